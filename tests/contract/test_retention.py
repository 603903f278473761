"""Rules: what a store keeps once it is done with it, and housekeeping
(contract extension: retention, on every backend).

- A queue keeps no finished jobs unless told to (``set_retention(history=...)``):
  then an ack (by handle, ``ack_batch`` or the worker) or a cancel moves the job
  into history, with its outcome, attempts, worker and times, in the same
  transaction as the delete, until pruned. An ack follows the setting its job
  was claimed under.
- A dead letter of a queue with a dead retention is pruned that long after it
  died; without one it stays until purged.
- A stream under retention drops events past ``max_age`` or beyond the newest
  ``max_events``, never above a protected consumer's saved offset, and never
  gives an offset out again.
- Lock rows nobody held for the grace period are pruned, and a fencing token
  never repeats or goes back across a prune.
- ``store.prune()`` does one pass and counts what it removed; many stores may
  prune one database at once; every open store prunes by itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from alkstore import InvalidArgument, Job, ManualClock, PruneReport, Store
from tests.backends import Backend

from . import aio
from .helpers import SOON, US, count_rows, history_rows

GRACE = 600.0  # lock rows nobody held for this long are pruned (10 minutes)


@pytest.fixture
async def quiet(backend: Backend, location: str, clock: ManualClock) -> AsyncIterator[Store]:
    """A store without background housekeeping: every prune is the test's."""
    async with backend.open(location, clock=clock, housekeeping_interval=None) as s:
        yield s


# -- history -----------------------------------------------------------------


async def test_finished_jobs_are_not_kept_by_default(quiet: Store) -> None:
    q = quiet.queue("q")
    await q.enqueue("a")
    b = await q.enqueue("b")
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    assert await q.cancel(b)
    assert await history_rows(quiet) == []
    # Turned off again, nothing more is kept.
    await q.set_retention(history=60, dead=None)
    await q.set_retention(history=None, dead=None)
    await q.enqueue("c")
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    assert await history_rows(quiet) == []


async def test_an_acked_job_moves_into_history(quiet: Store, clock: ManualClock) -> None:
    q = quiet.queue("q")
    await q.set_retention(history=timedelta(minutes=1), dead=None)
    job_id = await q.enqueue({"n": 1})
    job = await q.claim_one("worker-7")
    assert job is not None and job.id == job_id
    clock.advance(2.5)
    now = clock.now_us()
    assert await job.ack() is True
    info = await q.get_job(job_id)  # no longer live: kept, finished
    assert info is not None and info.state == "acked" and info.claimed_by == "worker-7"
    (row,) = await history_rows(quiet)
    assert row["id"] == job_id and row["queue"] == "q" and row["outcome"] == "acked"
    assert row["attempts"] == 1 and row["worker"] == "worker-7"
    assert row["finished_at"] == now and row["prune_at"] == now + 60 * US
    # Exactly once: a second ack finds nothing to move.
    assert await job.ack() is False
    assert len(await history_rows(quiet)) == 1


async def test_a_retried_job_keeps_its_last_error_in_history(quiet: Store) -> None:
    q = quiet.queue("q", max_attempts=3)
    await q.set_retention(history=60, dead=None)
    await q.enqueue("x")
    job = await q.claim_one("w")
    assert job is not None and await job.retry(delay=0, error="first try failed")
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    (row,) = await history_rows(quiet)
    assert row["attempts"] == 2 and row["last_error"] == "first try failed"


async def test_ack_batch_moves_what_it_acks(quiet: Store) -> None:
    q = quiet.queue("q")
    await q.set_retention(history=60, dead=None)
    await q.enqueue_batch([1, 2, 3])
    jobs = await q.claim_batch("w", 3)
    assert await q.ack_batch([jobs[0].id, jobs[1].id, 10**9], "w") == 2
    assert await q.ack_batch([jobs[2].id], "someone-else") == 0
    rows = await history_rows(quiet)
    assert [(r["id"], r["outcome"], r["worker"]) for r in rows] == [
        (jobs[0].id, "acked", "w"),
        (jobs[1].id, "acked", "w"),
    ]
    assert (await q.stats()).processing == 1


async def test_a_cancelled_job_moves_into_history(quiet: Store, clock: ManualClock) -> None:
    q = quiet.queue("q")
    await q.set_retention(history=30, dead=None)
    pending = await q.enqueue("p", delay=60)
    await q.enqueue("c")
    claimed = await q.claim_one("w")
    assert claimed is not None and claimed.id != pending
    now = clock.now_us()
    assert await q.cancel(pending) is True
    assert await q.cancel(claimed.id) is True
    assert await q.cancel(pending) is False
    assert await claimed.ack() is False  # cancelled under its worker
    rows = await history_rows(quiet)
    assert [(r["id"], r["outcome"], r["worker"], r["attempts"]) for r in rows] == [
        (pending, "cancelled", None, 0),
        (claimed.id, "cancelled", "w", 1),
    ]
    assert all(r["finished_at"] == now and r["prune_at"] == now + 30 * US for r in rows)


async def test_an_ack_follows_the_setting_its_job_was_claimed_under(quiet: Store) -> None:
    """The claim carries the queue's setting to the ack (no round trip of its
    own): a change applies to jobs claimed after it."""
    q = quiet.queue("q")
    await q.enqueue_batch(["before", "after"])
    before = await q.claim_one("w")
    await q.set_retention(history=60, dead=None)
    after = await q.claim_one("w")
    assert before is not None and after is not None
    assert await before.ack() and await after.ack()
    assert [r["id"] for r in await history_rows(quiet)] == [after.id]


async def test_the_worker_acks_into_history(quiet: Store) -> None:
    q = quiet.queue("q")
    await q.set_retention(history=60, dead=None)
    ids = await q.enqueue_batch(list(range(20)))
    done = aio.event()
    seen: list[int] = []

    async def handler(job: Job) -> None:
        seen.append(job.id)

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, concurrency=4, task_status=task_status)

    async with aio.open_task_group() as group:
        await group.start(worker)
        async with aio.fail_after(SOON):
            while len(await history_rows(quiet)) < len(ids):
                await aio.sleep(0.01)
        done.set()
        group.cancel()
    rows = await history_rows(quiet)
    assert sorted(r["id"] for r in rows) == sorted(ids) == sorted(seen)
    assert {r["outcome"] for r in rows} == {"acked"}
    assert all(isinstance(r["worker"], str) for r in rows)


async def test_retention_is_shared_by_every_handle_and_keeps_the_pause(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with (
        backend.open(location, clock=clock, housekeeping_interval=None) as one,
        backend.open(location, clock=clock, housekeeping_interval=None) as two,
    ):
        await one.queue("q").pause()
        await one.queue("q").set_retention(history=60, dead=30)
        assert await two.queue("q").is_paused() is True
        await two.queue("q").resume()  # keeps the retention
        await two.queue("q").enqueue("x")
        job = await two.queue("q").claim_one("w")
        assert job is not None and await job.ack()
        assert len(await history_rows(one)) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"history": -1, "dead": None},
        {"history": 0, "dead": None},
        {"history": None, "dead": timedelta(0)},
        {"history": float("nan"), "dead": None},
        {"history": "60", "dead": None},
        {"history": None, "dead": True},
    ],
)
async def test_bad_retentions_are_refused(quiet: Store, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        await quiet.queue("q").set_retention(**kwargs)


async def test_a_retention_not_given_stays_as_it_was(quiet: Store) -> None:
    q: Any = quiet.queue("q")
    with pytest.raises(TypeError):
        await q.set_retention(60, None)  # keywords only
    await q.set_retention(history=60)
    await q.set_retention(dead=30)  # history stays 60
    await q.enqueue("x")
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    assert len(await history_rows(quiet)) == 1
    await q.set_retention(history=None)
    await q.enqueue("y")
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    assert len(await history_rows(quiet)) == 1


# -- dead letters --------------------------------------------------------------


async def dead_prune_times(store: Store) -> dict[int, int | None]:
    from .helpers import alkstore_table

    async with store.transaction() as tx:
        rows = await tx.execute(f"SELECT id, prune_at FROM {alkstore_table(store, 'dead')}")
    return {int(i): (None if p is None else int(p)) for i, p in rows}


async def test_dead_letters_get_a_prune_time_when_their_queue_has_a_dead_retention(
    quiet: Store, clock: ManualClock
) -> None:
    q = quiet.queue("q", max_attempts=1, visibility_timeout=5)
    kept = quiet.queue("kept")
    await q.set_retention(history=None, dead=timedelta(hours=1))
    failed, retried, swept = await q.enqueue_batch(["f", "r", "s"])
    await kept.enqueue("k")
    jobs = {j.id: j for j in await q.claim_batch("w", 3)}
    k = await kept.claim_one("w")
    assert k is not None and await k.fail("no retention here")
    now = clock.now_us()
    assert await jobs[failed].fail("boom")
    assert await jobs[retried].retry(error="out of attempts")
    clock.advance(10)  # the third claim lapses with no attempts left
    assert await q.sweep_expired() == 1
    hour = 3600 * US
    assert await dead_prune_times(quiet) == {
        k.id: None,
        failed: now + hour,
        retried: now + hour,
        swept: now + 10 * US + hour,
    }


async def test_prune_removes_what_is_due_and_counts_it(quiet: Store, clock: ManualClock) -> None:
    q = quiet.queue("q", max_attempts=1)
    forever = quiet.queue("forever", max_attempts=1)
    await q.set_retention(history=60, dead=120)
    await q.enqueue_batch(["a", "b", "c"])
    await forever.enqueue("z")
    a, b, c = await q.claim_batch("w", 3)
    z = await forever.claim_one("w")
    assert z is not None and await z.fail()
    assert await a.ack() and await b.fail() and await q.cancel(c.id)
    assert await quiet.prune() == PruneReport()  # nothing due yet
    clock.advance(60)
    assert await quiet.prune() == PruneReport(history=2)  # due at exactly its prune time
    clock.advance(59)
    assert (await quiet.prune()).dead == 0
    clock.advance(1)
    assert await quiet.prune() == PruneReport(dead=1)
    assert await history_rows(quiet) == []
    assert await q.dead_letters() == []
    assert [d.id for d in await forever.dead_letters()] == [z.id]  # until purged
    clock.advance(10**6)
    assert (await quiet.prune()).dead == 0


async def test_a_requeued_dead_letter_is_live_again_and_not_pruned(
    quiet: Store, clock: ManualClock
) -> None:
    q = quiet.queue("q", max_attempts=1)
    await q.set_retention(history=None, dead=10)
    job_id = await q.enqueue("x")
    job = await q.claim_one("w")
    assert job is not None and await job.fail()
    assert await q.requeue_dead(job_id)
    clock.advance(20)
    assert (await quiet.prune()).dead == 0
    info = await q.get_job(job_id)
    assert info is not None and info.state == "pending"


async def test_prune_deletes_in_batches_until_none_is_due(
    quiet: Store, clock: ManualClock
) -> None:
    """More rows than one statement deletes (1,000) all go in one pass."""
    q = quiet.queue("q")
    await q.set_retention(history=1, dead=None)
    ids = await q.enqueue_batch(list(range(2100)))
    jobs = await q.claim_batch("w", 2100)
    assert await q.ack_batch([j.id for j in jobs], "w") == len(ids)
    clock.advance(1)
    assert (await quiet.prune()).history == 2100
    assert await count_rows(quiet, "history") == 0


# -- streams -------------------------------------------------------------------


async def offsets(store: Store, stream: str) -> list[int]:
    return [e.offset for e in await store.stream(stream).read_since(0, 1000)]


async def test_a_stream_keeps_its_newest_max_events(quiet: Store) -> None:
    s = quiet.stream("s")
    for i in range(10):
        await s.publish(i)
    await s.set_retention(max_age=None, max_events=3)
    assert (await quiet.prune()).events == 7
    assert await offsets(quiet, "s") == [8, 9, 10]
    assert await s.head_offset() == 10  # never lowered
    assert await s.publish("next") == 11  # offsets are never given out again
    assert (await quiet.prune()).events == 1
    assert await offsets(quiet, "s") == [9, 10, 11]


async def test_a_stream_drops_events_older_than_max_age(quiet: Store, clock: ManualClock) -> None:
    s = quiet.stream("s")
    await s.set_retention(max_age=timedelta(seconds=15), max_events=None)
    for _ in range(3):
        await s.publish("x")  # at t, t+10, t+20
        clock.advance(10)
    clock.advance(5)  # t+35: the cutoff is t+20, which is kept
    assert (await quiet.prune()).events == 2
    assert await offsets(quiet, "s") == [3]
    clock.advance(1)
    assert (await quiet.prune()).events == 1
    assert await offsets(quiet, "s") == [] and await s.head_offset() == 3


async def test_either_limit_drops_an_event(quiet: Store, clock: ManualClock) -> None:
    s = quiet.stream("s")
    await s.set_retention(max_age=100, max_events=4)
    for _ in range(6):
        await s.publish("x")
        clock.advance(30)
    # Now t+180: age drops offsets 1-3 (before t+80), count drops 1-2.
    assert (await quiet.prune()).events == 3
    assert await offsets(quiet, "s") == [4, 5, 6]


async def test_a_protected_consumer_holds_its_unread_events(
    quiet: Store, clock: ManualClock
) -> None:
    s = quiet.stream("s")
    await s.protect("slow")  # never saved: holds everything
    await s.protect("slow")  # protecting twice changes nothing
    for i in range(6):
        await s.publish(i)
    await s.set_retention(max_age=None, max_events=1)
    assert (await quiet.prune()).events == 0
    assert await s.get_offset("slow") == 0
    await s.save_offset("slow", 3)
    assert (await quiet.prune()).events == 3
    assert await offsets(quiet, "s") == [4, 5, 6]
    await s.save_offset("fast", 6)  # unprotected consumers hold nothing back
    assert (await quiet.prune()).events == 0
    assert await s.unprotect("slow") is True
    assert await s.unprotect("slow") is False
    assert await s.unprotect("never") is False
    assert (await quiet.prune()).events == 2
    assert await offsets(quiet, "s") == [6]
    assert await s.get_offset("slow") == 3  # unprotecting keeps the offset


async def test_retention_set_before_the_first_event(quiet: Store) -> None:
    s = quiet.stream("fresh")
    await s.set_retention(max_age=None, max_events=2)
    assert await s.head_offset() == 0
    assert await s.publish("a") == 1
    await s.set_retention(max_age=None, max_events=None)  # back to keeping everything
    await s.publish("b")
    await s.publish("c")
    assert (await quiet.prune()).events == 0
    assert await offsets(quiet, "fresh") == [1, 2, 3]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_age": 0, "max_events": None},
        {"max_age": -5, "max_events": None},
        {"max_age": None, "max_events": -1},
        {"max_age": None, "max_events": 1.5},
        {"max_age": None, "max_events": True},
        {"max_age": "1h", "max_events": None},
    ],
)
async def test_bad_stream_retentions_are_refused(quiet: Store, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        await quiet.stream("s").set_retention(**kwargs)


# -- locks ---------------------------------------------------------------------


async def test_fencing_tokens_never_repeat_or_go_back_across_a_prune(
    quiet: Store, clock: ManualClock
) -> None:
    seen: dict[str, list[int]] = {}
    for _ in range(3):
        for name in ("a", "b", "c"):
            lock = await quiet.try_lock(name, "o", 30)
            assert lock is not None
            seen.setdefault(name, []).append(lock.token)
            if name != "c":
                assert await lock.release()
        clock.advance(GRACE + 31)
        assert (await quiet.prune()).locks == 3  # released, or lapsed, long enough ago
    for tokens in seen.values():
        assert tokens == sorted(set(tokens)), seen
    # A name never taken starts above every token pruned.
    fresh = await quiet.try_lock("never-seen", "o", 30)
    assert fresh is not None and fresh.token > max(max(t) for t in seen.values())


async def test_held_and_recently_free_locks_are_not_pruned(
    quiet: Store, clock: ManualClock
) -> None:
    held = await quiet.try_lock("held", "o", GRACE * 10)
    released = await quiet.try_lock("released", "o", 30)
    assert held is not None and released is not None and await released.release()
    clock.advance(GRACE - 0.000001)  # free for just under the grace period: kept
    assert (await quiet.prune()).locks == 0
    clock.advance(0.000001)
    assert (await quiet.prune()).locks == 1
    assert await held.renew(60)
    assert await quiet.try_lock("held", "other", 30) is None


# -- notifications --------------------------------------------------------------


async def test_prune_removes_old_notification_rows_on_sqlite(
    quiet: Store, clock: ManualClock
) -> None:
    await quiet.notify("c")
    await quiet.queue("q").enqueue(1)  # no row: new jobs are their own wake log
    await quiet.queue("q").pause()
    await quiet.queue("q").resume()  # a row: the wake of jobs already there
    assert (await quiet.prune()).notifications == 0  # young: a watcher may still read them
    clock.advance(61)
    report = await quiet.prune()
    assert report.notifications == (2 if quiet.engine == "sqlite" else 0)


# -- many prunes at once, and by itself ------------------------------------------


async def test_several_stores_prune_one_database_at_once(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    stores: list[Store] = []
    async with (
        backend.open(location, clock=clock, housekeeping_interval=None) as one,
        backend.open(location, clock=clock, housekeeping_interval=None) as two,
        backend.open(location, clock=clock, housekeeping_interval=None) as three,
    ):
        stores = [one, two, three]
        q = one.queue("q", max_attempts=1, visibility_timeout=1)
        await q.set_retention(history=1, dead=1)
        await q.enqueue_batch(list(range(2500)))
        jobs = await q.claim_batch("w", 2500)
        assert await q.ack_batch([j.id for j in jobs[:2000]], "w") == 2000
        clock.advance(1)  # the other claims lapse with no attempts left
        assert await q.sweep_expired() == 500
        async with one.transaction() as tx:
            for i in range(300):
                await tx.publish("s" if i % 2 else "t", i)
        for name in ("s", "t"):
            await one.stream(name).set_retention(max_age=None, max_events=10)
        tokens = {}
        for i in range(40):
            lock = await one.try_lock(f"l{i}", "o", 1)
            assert lock is not None
            tokens[lock.name] = lock.token
        clock.advance(GRACE + 2)
        reports: list[PruneReport] = []

        async def prune(store: Store) -> None:
            reports.append(await store.prune())

        async with aio.open_task_group() as group:
            for store in stores:
                group.start_soon(prune, store)
        assert sum(r.history for r in reports) == 2000
        assert sum(r.dead for r in reports) == 500
        assert sum(r.events for r in reports) == 280
        assert sum(r.locks for r in reports) == 40
        assert await count_rows(one, "history") == await count_rows(one, "dead") == 0
        assert await count_rows(one, "locks") == 0
        assert await offsets(one, "s") == await offsets(one, "t") == list(range(141, 151))
        for name, token in tokens.items():
            again = await two.try_lock(name, "o", 1)
            assert again is not None and again.token > token


async def test_every_open_store_prunes_by_itself(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock, housekeeping_interval=0.02) as store:
        q = store.queue("q")
        await q.set_retention(history=5, dead=None)
        await q.enqueue("x")
        job = await q.claim_one("w")
        assert job is not None and await job.ack()
        await aio.sleep(0.1)  # a few passes: nothing is due yet
        assert len(await history_rows(store)) == 1
        clock.advance(5)
        async with aio.fail_after(SOON):
            while await history_rows(store):
                await aio.sleep(0.01)


async def test_housekeeping_can_be_turned_off(quiet: Store, clock: ManualClock) -> None:
    q = quiet.queue("q")
    await q.set_retention(history=1, dead=None)
    await q.enqueue("x")
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    clock.advance(10)
    await aio.sleep(0.1)
    assert len(await history_rows(quiet)) == 1


async def test_tables_and_file_stay_bounded_under_steady_traffic(
    quiet: Store, clock: ManualClock
) -> None:
    """Steady traffic (jobs acked and failed on a queue keeping both for 60 s,
    a stream kept 60 s, locks taken under new names) through 40 windows of
    20 s, a prune after each: once every window has passed (the locks' 10
    minutes), each table holds the same rows after every pass, and the
    SQLite file stops growing."""
    q = quiet.queue("q", max_attempts=1)
    await q.set_retention(history=60, dead=60)
    await quiet.stream("s").set_retention(max_age=60, max_events=None)
    tables = ("jobs", "history", "dead", "events", "locks")
    if quiet.engine == "sqlite":
        tables += ("notifications",)
    sizes: list[tuple[int, ...]] = []
    pages: list[int] = []
    lock_names = 0
    for _ in range(40):
        await q.enqueue_batch(list(range(50)))
        jobs = await q.claim_batch("w", 50)
        assert await q.ack_batch([j.id for j in jobs[2:]], "w") == 48
        for job in jobs[:2]:
            assert await job.fail("one in 25")
        async with quiet.transaction() as tx:
            for i in range(20):
                await tx.publish("s", i)
        for _ in range(3):
            lock = await quiet.try_lock(f"entity-{lock_names}", "o", 5)
            assert lock is not None and await lock.release()
            lock_names += 1
        clock.advance(20)
        await quiet.prune()
        sizes.append(tuple([await count_rows(quiet, t) for t in tables]))
        if quiet.engine == "sqlite":
            async with quiet.transaction() as tx:
                ((n,),) = await tx.execute("PRAGMA page_count")
            pages.append(int(n))
    settled = sizes[31:]  # 30 windows: every lock row freed 10 minutes ago is gone
    assert all(s == settled[0] for s in settled), sizes
    # Two windows of history and dead letters, three of events (and of
    # notification rows: 20 a window, the stream's wakes; the enqueues write
    # none), 29 of locks.
    assert dict(zip(tables, settled[0], strict=False)) == {
        "jobs": 0, "history": 96, "dead": 4, "events": 60, "locks": 87,
        **({"notifications": 60} if quiet.engine == "sqlite" else {}),
    }  # fmt: skip
    if pages:
        assert max(pages[31:]) <= max(pages[:31]), pages
