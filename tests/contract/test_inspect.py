"""The read models (contract extension: inspection, on every backend).

What ``Store.list_queues``, ``Queue.list_jobs``, ``Store.get_job``,
``Store.list_streams`` / ``Stream.info`` and ``Store.list_locks`` report is
what the store holds: the same counts as ``stats``, every job exactly once
across the pages of a listing, finished jobs while their queue keeps
history. Rows that other parts of alkstore write (history, retention
settings, consumers that hold events back) are written here with the
caller's own SQL (``helpers.add_history``, ``set_retention``)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from alkstore import (
    ConsumerInfo,
    InvalidArgument,
    JobInfo,
    LockInfo,
    ManualClock,
    QueueSummary,
    Store,
    StreamInfo,
)

from . import aio
from .helpers import US, add_history, at, execute, set_retention, table


def ids(jobs: list[JobInfo]) -> list[int]:
    return [j.id for j in jobs]


async def test_a_new_store_lists_nothing(store: Store) -> None:
    assert await store.list_queues() == []
    assert await store.list_streams() == []
    assert await store.list_locks() == []
    assert await store.list_schedules() == []
    assert await store.get_job(1) is None
    assert await store.queue("q").list_jobs() == []


async def test_list_queues_counts_each_queue_as_stats_does(
    store: Store, clock: ManualClock
) -> None:
    a = store.queue("a")
    first = await a.enqueue(1)
    await a.enqueue(2)
    await a.enqueue(3, delay=60)
    claimed = await a.claim_one("w")
    assert claimed is not None and claimed.id == first
    clock.advance(5)
    oldest = await a.enqueue(4, run_at=at(clock, -10))  # ready, and due before job 2
    doomed = await store.queue("b").enqueue("x")
    job = await store.queue("b").claim_one("w")
    assert job is not None and job.id == doomed and await job.fail("boom")
    await add_history(store, 900, "c", "acked", finished_at_us=clock.now_us())
    await add_history(store, 901, "c", "cancelled", finished_at_us=clock.now_us())
    await store.queue("d").pause()
    await set_retention(store, "a", history_us=3600 * US, dead_us=None)
    await store.outbox("o").enqueue({"m": 1})

    listed = await store.list_queues()
    assert [s.name for s in listed] == ["__alkstore_outbox:o", "a", "b", "c", "d"]
    by_name = {s.name: s for s in listed}
    assert by_name["a"] == QueueSummary(
        name="a", ready=2, scheduled=1, processing=1, dead=0,
        oldest_ready_at=at(clock, -10), paused=False, history=0,
        history_retention=timedelta(hours=1), dead_retention=None, outbox=None,
    )  # fmt: skip
    assert (await a.get_job(oldest)) is not None
    assert by_name["b"].dead == 1 and by_name["b"].ready == 0
    assert by_name["b"].oldest_ready_at is None
    assert by_name["c"].history == 2 and by_name["c"].ready == 0
    assert by_name["d"].paused is True and by_name["d"].history_retention is None
    outbox = by_name["__alkstore_outbox:o"]
    assert outbox.outbox == "o" and outbox.ready == 1
    assert all(s.outbox is None for s in listed if s is not outbox)
    # The counts are those stats gives, queue by queue.
    for s in listed:
        stats = await store.queue(s.name).stats() if s.outbox is None else (
            await store.outbox(s.outbox).stats()
        )
        assert (stats.ready, stats.scheduled, stats.processing, stats.dead, stats.paused) == (
            s.ready, s.scheduled, s.processing, s.dead, s.paused,
        )  # fmt: skip


async def test_a_queue_whose_jobs_all_finished_is_listed_while_history_keeps_them(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    await q.enqueue(1)
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    assert await store.list_queues() == []  # no history kept: nothing left to list
    await add_history(store, job.id, "q", "acked", finished_at_us=clock.now_us())
    assert [s.name for s in await store.list_queues()] == ["q"]


@pytest.mark.producer
async def test_list_jobs_pages_through_each_state_by_id(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    made = await q.enqueue_batch(list(range(7)))
    later = await q.enqueue("later", delay=60)
    claimed = [j.id for j in await q.claim_batch("w", 2)]
    assert claimed == made[:2]
    job = await q.claim_one("w")
    assert job is not None and job.id == made[2] and await job.fail("boom")
    await add_history(store, 5000, "q", "acked", finished_at_us=clock.now_us())
    await add_history(store, 5001, "q", "cancelled", finished_at_us=clock.now_us(), worker=None)
    await store.queue("other").enqueue("elsewhere")
    ready = made[3:]

    assert ids(await q.list_jobs(state="processing")) == claimed
    assert ids(await q.list_jobs(state="ready")) == ready
    assert ids(await q.list_jobs(state="scheduled")) == [later]
    assert ids(await q.list_jobs(state="pending")) == [*ready, later]
    assert ids(await q.list_jobs(state="dead")) == [made[2]]
    assert ids(await q.list_jobs(state="acked")) == [5000]
    assert ids(await q.list_jobs(state="cancelled")) == [5001]
    everything = [*made, later]
    assert ids(await q.list_jobs()) == everything  # live and dead, not history
    states = {j.id: j.state for j in await q.list_jobs()}
    assert states == {
        **dict.fromkeys(claimed, "processing"), made[2]: "dead",
        **dict.fromkeys([*ready, later], "pending"),
    }  # fmt: skip

    # Pages of two: every job exactly once, in id order, whatever table.
    for state in (None, "pending", "ready"):
        seen: list[int] = []
        after = None
        while page := await q.list_jobs(state=state, limit=2, after=after):
            assert len(page) <= 2
            seen += ids(page)
            after = page[-1].id
        expected = {None: everything, "pending": [*ready, later], "ready": ready}
        assert seen == expected[state]
    assert await q.list_jobs(after=everything[-1]) == []
    assert ids(await q.list_jobs(after=0, limit=1)) == everything[:1]


async def test_a_listed_job_reads_as_get_job_reads_it(store: Store, clock: ManualClock) -> None:
    q = store.queue("q")
    live = await q.enqueue({"n": 1}, priority=3)
    doomed = await q.enqueue({"n": 2})
    claimed = await q.claim_batch("w", 2)
    assert [j.id for j in claimed] == [live, doomed]
    assert await claimed[1].fail("boom")
    listed = {j.id: j for j in await q.list_jobs()}
    assert listed[live] == await q.get_job(live)
    # A page leaves the attempt history out; the lookup of one job fills it.
    looked_up = await q.get_job(doomed)
    assert looked_up is not None and [a.outcome for a in looked_up.attempt_history] == ["failed"]
    assert listed[doomed] == dataclasses.replace(looked_up, attempt_history=())
    assert listed[doomed].dead_reason == "failed" and listed[doomed].last_error == "boom"


@pytest.mark.producer
async def test_bad_list_jobs_arguments_are_refused(store: Store) -> None:
    q = store.queue("q")
    for state in ("done", "Ready", "", 1):
        with pytest.raises(InvalidArgument, match="state"):
            await q.list_jobs(state=state)  # type: ignore[arg-type]
    for limit in (0, -1, True, 1.5):
        with pytest.raises(InvalidArgument):
            await q.list_jobs(limit=limit)  # type: ignore[arg-type]
    for after in (-1, "1", 2**64):
        with pytest.raises(InvalidArgument):
            await q.list_jobs(after=after)  # type: ignore[arg-type]
    for job_id in (-2**70, "1", None):
        with pytest.raises(InvalidArgument):
            await store.get_job(job_id)  # type: ignore[arg-type]


@pytest.mark.producer
async def test_get_job_finds_a_job_live_dead_or_in_history(
    store: Store, clock: ManualClock
) -> None:
    q, other = store.queue("q"), store.queue("other")
    live = await q.enqueue("live")
    dead = await q.enqueue("dead")
    job = await q.claim_batch("w", 2)
    assert await job[1].fail("boom")
    acked = await q.enqueue("acked")
    done = await q.claim_one("w")
    assert done is not None and done.id == acked and await done.ack()
    assert await q.get_job(acked) is None  # acked, and no history kept
    finished = clock.now_us()
    await add_history(store, acked, "q", "acked", finished_at_us=finished,
                      payload='"acked"', worker="w", attempts=1)  # fmt: skip

    info = await q.get_job(acked)
    assert info is not None and info.state == "acked" and info.payload == "acked"
    assert info.finished_at == at(clock) and info.claimed_by == "w"
    assert info.dead_reason is None and info.died_at is None and info.claim_expires_at is None
    assert info.attempts == 1 and info.queue == "q"
    for job_id, state in ((live, "processing"), (dead, "dead"), (acked, "acked")):
        found = await store.get_job(job_id)  # any queue
        assert found is not None and found.state == state and found == await q.get_job(job_id)
        assert await other.get_job(job_id) is None  # not that queue's
    assert await store.get_job(acked + 1000) is None


async def test_list_streams_shows_heads_events_and_consumers(
    store: Store, clock: ManualClock
) -> None:
    s = store.stream("s")
    for i in range(5):
        await s.publish(i)
        clock.advance(1)
    assert await s.trim_to(3) == 2
    await s.save_offset("slow", 1)
    await s.save_offset("fast", 5)
    await store.stream("listened").save_offset("c", 2)  # offsets, never published
    await execute(
        store,
        f"UPDATE {table(store, 'offsets')} SET keep = {{}} WHERE consumer = {{}}",
        True, "slow",
    )  # fmt: skip
    await execute(
        store,
        f"UPDATE {table(store, 'streams')} SET max_age_us = {{}}, max_events = {{}} "
        "WHERE name = {}",
        7 * 86400 * US, 1000, "s",
    )  # fmt: skip

    listed = await store.list_streams()
    assert [i.name for i in listed] == ["listened", "s"]
    oldest = (await s.read_since(0, 1))[0]
    expected = StreamInfo(
        name="s", head_offset=5, events=3, oldest_offset=3, oldest_event_at=oldest.created_at,
        max_age=timedelta(days=7), max_events=1000,
        consumers=(ConsumerInfo("fast", 5, 0, False), ConsumerInfo("slow", 1, 4, True)),
    )  # fmt: skip
    assert listed[1] == expected == await s.info()
    assert listed[0] == StreamInfo("listened", 0, 0, None, None, None, None,
                                   (ConsumerInfo("c", 2, 0, False),))  # fmt: skip
    assert await store.stream("never").info() == StreamInfo(
        "never", 0, 0, None, None, None, None, ()
    )


async def test_list_locks_shows_held_released_and_lapsed_locks(
    store: Store, clock: ManualClock
) -> None:
    held = await store.try_lock("held", "alice", 60)
    released = await store.try_lock("released", "bob", 60)
    lapsed = await store.try_lock("lapsed", "carol", 10)
    assert held is not None and released is not None and lapsed is not None
    assert await released.release()
    clock.advance(10)  # exactly at expiry: lapsed
    assert await store.list_locks() == [
        LockInfo("held", "alice", held.token, at(clock, 50), True),
        LockInfo("lapsed", "carol", lapsed.token, at(clock), False),
        LockInfo("released", None, released.token, None, False),
    ]
    again = await store.try_lock("lapsed", "dave", 5)
    assert again is not None
    assert (await store.list_locks())[1] == LockInfo("lapsed", "dave", 2, at(clock, 5), True)


async def test_list_events_pages_through_a_stream_newest_first(
    store: Store, clock: ManualClock
) -> None:
    s = store.stream("ev")
    for i in range(1, 8):
        await s.publish({"n": i})
        clock.advance(1)
    await store.stream("other").publish("x")
    await s.publish_with_key("k", {"n": 8})

    page = await s.list_events(limit=3)
    assert [e.offset for e in page] == [8, 7, 6]
    assert page[0].key == "k" and page[1].payload == {"n": 7} and page[1].stream == "ev"
    assert page[1] == (await s.read_since(6, 1))[0]  # the same event as a consumer reads it
    seen = [e.offset for e in page]
    while page:
        page = await s.list_events(before=page[-1].offset, limit=3)
        seen += [e.offset for e in page]
    assert seen == [8, 7, 6, 5, 4, 3, 2, 1]
    assert [e.offset for e in await s.list_events(before=3)] == [2, 1]
    assert await s.trim_to(6) == 5
    assert [e.offset for e in await s.list_events()] == [8, 7, 6]
    assert await s.list_events(before=6) == []
    assert await store.stream("never").list_events() == []


async def test_bad_list_events_arguments_are_refused(store: Store) -> None:
    s = store.stream("ev")
    for bad in ({"before": -1}, {"before": "3"}, {"limit": 0}, {"limit": 2.5}):
        with pytest.raises(InvalidArgument):
            await s.list_events(**bad)  # type: ignore[arg-type]


async def test_throughput_counts_finished_and_dead_jobs_per_bucket(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("t", max_attempts=1)
    other = store.queue("other")
    await q.set_retention(history=3600, dead=None)
    await other.set_retention(history=3600, dead=None)
    for i in range(6):
        await q.enqueue(i)
    await other.enqueue("x")

    async def settle(how: str) -> int:
        job = await q.claim_one("w")
        assert job is not None
        assert await (job.ack() if how == "ack" else job.fail("boom"))
        return job.id

    await settle("ack")  # T: before the window, which starts at T + 10 s
    clock.advance(40)
    await settle("ack")  # T + 40: bucket 0
    clock.advance(40)
    await settle("ack")  # T + 80: bucket 1, twice
    await settle("ack")
    clock.advance(60)
    dead = await settle("fail")  # T + 140: bucket 2, dead
    assert await q.cancel(await q.enqueue("c"))  # cancelled: finished, bucket 2
    job = await other.claim_one("w")
    assert job is not None and await job.ack()  # another queue's: not counted
    clock.advance(170)  # now T + 310
    await settle("ack")  # at now itself: the last bucket

    t = await q.throughput(window=300, bucket=60)
    assert t.finished == (1, 2, 1, 0, 1) and t.dead == (0, 0, 1, 0, 0)
    assert t.queue == "t" and t.buckets == 5 and t.bucket == timedelta(minutes=1)
    assert t.since == at(clock, -300) and t.until == at(clock)
    assert (await q.throughput(window=timedelta(minutes=10), bucket=300)).finished == (1, 5)
    # The window is (since, until]: the ack at T, exactly ``since`` here, is left out.
    assert (await q.throughput(window=310, bucket=310)).finished == (5,)
    # A requeued dead letter still counts where it died (its job has a
    # record); purged, it no longer does. A queue never used counts nothing.
    assert await q.requeue_dead(dead)
    assert (await q.throughput(window=300, bucket=60)).dead == (0, 0, 1, 0, 0)
    job = await q.claim_one("w")
    assert job is not None and job.id == dead and await job.fail("again")
    assert (await q.throughput(window=300, bucket=60)).dead == (0, 0, 1, 0, 1)
    assert await q.purge_dead() == 1
    assert (await q.throughput(window=300, bucket=60)).dead == (0,) * 5
    assert (await store.queue("never").throughput()).finished == (0,) * 30


async def test_throughput_counts_nothing_finished_without_history(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("plain")
    await q.enqueue(1)
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    clock.advance(1)
    assert (await q.throughput(window=60, bucket=60)).finished == (0,)


async def test_bad_throughput_arguments_are_refused(store: Store) -> None:
    q = store.queue("t")
    for bad in (
        {"bucket": 0.5}, {"bucket": 0}, {"window": 0}, {"window": 90, "bucket": 60},
        {"window": 30, "bucket": 60}, {"window": 86401, "bucket": 1}, {"window": "1h"},
    ):  # fmt: skip
        with pytest.raises(InvalidArgument):
            await q.throughput(**bad)  # type: ignore[arg-type]


async def test_a_queue_summary_is_what_list_queues_lists_for_it(
    store: Store, clock: ManualClock
) -> None:
    a = store.queue("a")
    await a.enqueue(1)
    await a.enqueue(2, delay=60)
    clock.advance(3)
    await store.queue("b").pause()
    await store.outbox("o").enqueue({"m": 1})
    listed = {s.name: s for s in await store.list_queues()}
    assert await a.summary() == listed["a"]
    assert await store.queue("b").summary() == listed["b"]
    assert await store.outbox("o").queue.summary() == listed["__alkstore_outbox:o"]
    assert await store.queue("never").summary() == QueueSummary(
        "never", 0, 0, 0, 0, None, False, 0, None, None
    )


async def test_a_listing_reads_one_snapshot_while_its_jobs_move(store: Store) -> None:
    """``list_jobs`` over every state reads one snapshot: paged thousands of
    times while another task keeps claiming the same jobs and handing them
    back, retrying them, failing them and requeueing the dead, no page lists
    a job twice or leaves one out (on Postgres each state's statement once
    saw a snapshot of its own: a job moving between two of them was listed
    in both, or in neither)."""
    q = store.queue("moving", max_attempts=1_000_000)
    everyone = set(await q.enqueue_batch(list(range(50))))
    moves = 0
    done = aio.event()

    async def mover() -> None:
        nonlocal moves
        while not done.is_set():
            for i, job in enumerate(await q.claim_batch("mover", 10)):
                if i % 3 == 0:
                    await job.release()
                elif i % 3 == 1:
                    await job.retry(delay=0)
                else:
                    await job.fail("moved")
                    await q.requeue_dead(job.id)
                moves += 1

    pages = 2000
    async with aio.open_task_group() as group:
        group.start_soon(mover)
        try:
            for _ in range(pages):
                listed = ids(await q.list_jobs(limit=1000))
                assert len(listed) == len(set(listed)), f"listed twice: {sorted(listed)}"
                assert set(listed) == everyone, f"left out: {sorted(everyone - set(listed))}"
                await aio.sleep(0)
        finally:
            done.set()
    assert moves > pages / 10  # the jobs really moved while they were listed
