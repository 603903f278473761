"""Rules: per-key concurrency limits and rate limits (contract extension, on every backend).

- ``set_limits(concurrency_per_key=N)``: at most N jobs with the same
  ``concurrency_key`` (an enqueue option) hold a live claim at once; ``None``
  lifts the limit; ``limits()`` reads it back. Jobs without a key are not
  limited; keys are per queue.
- A lapsed claim no longer counts (its worker lost the job); an ack, retry,
  fail or release frees the key's room at once.
- Fairness: claims take jobs in claim order (priority, then due time, then
  id) among those whose key has room; a job whose key is full is passed
  over and is its key's first taken once the key has room.
- Every enqueue path takes the key (enqueue, batch, unique, transaction).
- ``set_limits(rate=Rate(N, per=P))``: at most N claims of the queue in any
  window of length P (sliding: a claim is allowed when fewer than N were
  made in the P before it); ``rate_per_key`` the same per concurrency key.
  A key over its rate is passed over like a full key. ``set_limits``
  replaces every limit; ``limits()`` returns a ``QueueLimits``.
- Inspection: ``JobInfo.concurrency_key`` is a job's key, live, dead or in
  history; ``QueueSummary.concurrency_per_key`` is the limit.
- A dead letter keeps its key, and ``requeue_dead`` restores it: the
  requeued job is limited (concurrency and rate) as it was before it died,
  whatever buried it (fail, exhausted attempts, deadline).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import InvalidArgument, InvalidName, ManualClock, Queue, QueueLimits, Rate, Store

from .helpers import US, set_retention


def _keys(jobs: list) -> list[str]:  # type: ignore[type-arg]
    return [j.payload["k"] for j in jobs]


async def test_at_most_n_jobs_of_a_key_are_claimed_at_once(store: Store) -> None:
    q = store.queue("q")
    await q.set_limits(concurrency_per_key=2)
    for i in range(4):
        await q.enqueue({"k": "a", "i": i}, concurrency_key="a")
    await q.enqueue({"k": "b", "i": 0}, concurrency_key="b")
    await q.enqueue({"k": None, "i": 0})
    jobs = await q.claim_batch("w1", 10)
    assert sorted(map(str, _keys(jobs))) == ["None", "a", "a", "b"]
    assert await q.claim_batch("w2", 10) == []  # a is full, across workers
    first_a = next(j for j in jobs if j.payload["k"] == "a")
    assert await first_a.ack()
    more = await q.claim_batch("w2", 10)
    assert [(j.payload["k"], j.payload["i"]) for j in more] == [("a", 2)]


async def test_without_a_limit_keys_change_nothing_and_none_lifts_it(store: Store) -> None:
    q = store.queue("q")
    assert await q.limits() == QueueLimits()
    for i in range(3):
        await q.enqueue({"k": "a", "i": i}, concurrency_key="a")
    assert len(await q.claim_batch("w", 1)) == 1
    await q.set_limits(concurrency_per_key=1)
    assert await q.limits() == QueueLimits(concurrency_per_key=1)
    assert await q.claim_batch("w", 10) == []  # the running job fills the key
    await q.set_limits(concurrency_per_key=None)
    assert await q.limits() == QueueLimits()
    assert len(await q.claim_batch("w", 10)) == 2


async def test_settling_or_a_lapsed_claim_frees_room(store: Store, clock: ManualClock) -> None:
    q = store.queue("q", visibility_timeout=10, max_attempts=5)
    await q.set_limits(concurrency_per_key=1)
    for i in range(4):
        await q.enqueue({"k": "a", "i": i}, concurrency_key="a")
    (j0,) = await q.claim_batch("w", 5)
    assert await j0.retry(delay=0)  # back to pending: first in order again
    (j0,) = await q.claim_batch("w", 5)
    assert j0.payload["i"] == 0
    assert await j0.fail("no")
    (j1,) = await q.claim_batch("w", 5)
    assert await j1.release()
    (j1,) = await q.claim_batch("w", 5)
    assert j1.payload["i"] == 1
    assert await q.claim_batch("w2", 5) == []
    clock.advance(11)  # j1's claim lapses: it no longer counts, and room is back
    (again,) = await q.claim_batch("w2", 5)
    assert again.payload["i"] == 2  # due before j1's lapsed claim, so first


async def test_a_full_key_is_passed_over_in_claim_order_and_never_starves(store: Store) -> None:
    q = store.queue("q")
    await q.set_limits(concurrency_per_key=1)
    await q.enqueue({"k": "a", "i": 0}, concurrency_key="a", priority=9)
    await q.enqueue({"k": "a", "i": 1}, concurrency_key="a", priority=9)
    for i in range(3):
        await q.enqueue({"k": "b", "i": i}, concurrency_key="b", priority=1)
    await q.enqueue({"k": "c", "i": 0}, concurrency_key="c", priority=0)
    taken = await q.claim_batch("w", 10)
    # one per key, in claim order: a (priority 9), then b, then c
    assert [(j.payload["k"], j.payload["i"]) for j in taken] == [("a", 0), ("b", 0), ("c", 0)]
    # lower-priority jobs keep coming, but a's next job is first once a has room
    await q.enqueue({"k": "d", "i": 0}, concurrency_key="d", priority=5)
    assert await taken[0].ack()
    nxt = await q.claim_batch("w", 1)
    assert [(j.payload["k"], j.payload["i"]) for j in nxt] == [("a", 1)]


async def test_limits_are_per_queue_and_keys_per_queue(store: Store) -> None:
    a, b = store.queue("a"), store.queue("b")
    await a.set_limits(concurrency_per_key=1)
    for q in (a, b):
        for i in range(2):
            await q.enqueue({"k": "x", "i": i}, concurrency_key="x")
    assert len(await a.claim_batch("w", 5)) == 1
    assert len(await b.claim_batch("w", 5)) == 2  # b has no limit


async def test_every_enqueue_path_takes_the_key(store: Store) -> None:
    q = store.queue("q")
    await q.set_limits(concurrency_per_key=1)
    await q.enqueue({"k": "plain"}, concurrency_key="a")
    await q.enqueue_batch([{"k": "batch"}, {"k": "batch"}], concurrency_key="a")
    await q.enqueue_unique({"k": "unique"}, "u", concurrency_key="a")
    async with store.transaction() as tx:
        await tx.enqueue(q, {"k": "tx"}, concurrency_key="a")
    # five jobs of key a: one claim at a time, whatever path enqueued them
    seen = []
    for _ in range(5):
        jobs = await q.claim_batch("w", 5)
        assert len(jobs) == 1
        seen.append(jobs[0].payload["k"])
        assert await q.claim_batch("w2", 5) == []
        assert await jobs[0].ack()
    assert seen == ["plain", "batch", "batch", "unique", "tx"]


async def test_a_paused_limited_queue_gives_nothing(store: Store) -> None:
    q = store.queue("q")
    await q.set_limits(concurrency_per_key=1)
    await q.enqueue({"k": "a"}, concurrency_key="a")
    await q.pause()
    assert await q.claim_batch("w", 5) == []
    await q.resume()
    assert len(await q.claim_batch("w", 5)) == 1


@pytest.mark.producer
async def test_the_limit_is_stored_with_the_queue(store: Store) -> None:
    q = store.queue("q")
    assert await q.limits() == QueueLimits()
    rate, per_key = Rate(5, per=2.5), Rate(1, per=timedelta(minutes=1))
    await q.set_limits(concurrency_per_key=3, rate=rate, rate_per_key=per_key)
    both = QueueLimits(concurrency_per_key=3, rate=rate, rate_per_key=per_key)
    assert await store.queue("q").limits() == both
    assert (await q.limits()).rate == Rate(5, per=timedelta(seconds=2.5))
    assert await store.queue("other").limits() == QueueLimits()
    await q.pause()  # the other settings stay
    assert await q.limits() == both
    await q.set_limits(rate=rate)  # replaces: what is not given is lifted
    assert await q.limits() == QueueLimits(rate=rate)
    await q.set_limits()
    assert await q.limits() == QueueLimits()


@pytest.mark.producer
async def test_enqueue_paths_accept_a_concurrency_key(store: Store) -> None:
    q = store.queue("q")
    await q.enqueue({"n": 1}, concurrency_key="a")
    await q.enqueue_batch([{"n": 2}, {"n": 3}], concurrency_key="b")
    assert not (await q.enqueue_unique({"n": 4}, "u", concurrency_key="a")).duplicate
    async with store.transaction() as tx:
        await tx.enqueue(q, {"n": 5}, concurrency_key="c")
    assert (await q.stats()).ready == 5


@pytest.mark.producer
async def test_bad_limit_arguments_are_refused_before_any_write(store: Store) -> None:
    q = store.queue("q")
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(InvalidArgument):
            await q.set_limits(concurrency_per_key=bad)  # type: ignore[arg-type]
    for key in ("", 5, "a\x00b"):
        with pytest.raises(InvalidName):
            await q.enqueue("x", concurrency_key=key)  # type: ignore[arg-type]
    with pytest.raises(InvalidName):
        await q.enqueue_batch(["x"], concurrency_key="")
    assert (await q.stats()).ready == 0
    assert await q.limits() == QueueLimits()


# -- rate limits ------------------------------------------------------------------


async def test_a_rate_admits_at_most_n_claims_in_any_window(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    await q.set_limits(rate=Rate(2, per=10))
    for i in range(6):
        await q.enqueue({"i": i})
    assert [j.payload["i"] for j in await q.claim_batch("w", 10)] == [0, 1]
    assert await q.claim_batch("w2", 10) == []  # across workers
    assert await q.claim_one("w2") is None
    clock.advance(9.999)
    assert await q.claim_batch("w", 10) == []
    clock.advance(0.001)  # a claim counts for 10 s: the first two left the window
    assert [j.payload["i"] for j in await q.claim_batch("w", 1)] == [2]
    clock.advance(6)
    # a sliding window, not a fixed one: the claim 6 s ago still counts
    assert [j.payload["i"] for j in await q.claim_batch("w", 10)] == [3]
    assert await q.claim_batch("w", 10) == []
    clock.advance(4)  # the claim at 10 s left the window, the one at 16 s has not
    assert [j.payload["i"] for j in await q.claim_batch("w", 10)] == [4]


async def test_every_claim_counts_settled_or_not(store: Store, clock: ManualClock) -> None:
    q = store.queue("q", visibility_timeout=5, max_attempts=5)
    await q.set_limits(rate=Rate(2, per=60))
    for i in range(3):
        await q.enqueue({"i": i})
    first, second = await q.claim_batch("w", 10)
    assert await first.ack()  # settling gives nothing back: a rate counts claims
    assert await second.retry(delay=0)
    assert await q.claim_batch("w", 10) == []
    clock.advance(6)  # a lapsed claim neither: its reclaim is a claim too
    assert await q.claim_batch("w", 10) == []
    clock.advance(55)
    assert len(await q.claim_batch("w", 10)) == 2


async def test_a_rate_per_key_passes_over_a_key_and_never_starves_it(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    await q.set_limits(rate_per_key=Rate(1, per=10))
    await q.enqueue({"k": "a", "i": 0}, concurrency_key="a", priority=9)
    await q.enqueue({"k": "a", "i": 1}, concurrency_key="a", priority=9)
    await q.enqueue({"k": "b", "i": 0}, concurrency_key="b")
    await q.enqueue({"k": "b", "i": 1}, concurrency_key="b")
    await q.enqueue({"k": None, "i": 0})
    await q.enqueue({"k": None, "i": 1})
    taken = await q.claim_batch("w", 10)
    # one per key (each key's first, in claim order), keyless jobs unlimited
    assert [(j.payload["k"], j.payload["i"]) for j in taken] == [
        ("a", 0), ("b", 0), (None, 0), (None, 1),
    ]  # fmt: skip
    for job in taken:
        assert await job.ack()  # acks free no rate
    await q.enqueue({"k": "c", "i": 0}, concurrency_key="c", priority=9)
    assert [j.payload["k"] for j in await q.claim_batch("w", 10)] == ["c"]
    clock.advance(10)
    # a's and b's next jobs are first again, ahead of later work
    await q.enqueue({"k": "d", "i": 0}, concurrency_key="d")
    nxt = await q.claim_batch("w", 2)
    assert [(j.payload["k"], j.payload["i"]) for j in nxt] == [("a", 1), ("b", 1)]


async def test_rates_and_a_concurrency_limit_hold_together(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    await q.set_limits(concurrency_per_key=1, rate=Rate(3, per=10), rate_per_key=Rate(2, per=10))
    for i in range(4):
        await q.enqueue({"k": "a", "i": i}, concurrency_key="a")
    for i in range(4):
        await q.enqueue({"k": "b", "i": i}, concurrency_key="b")
    taken = await q.claim_batch("w", 10)
    assert [(j.payload["k"], j.payload["i"]) for j in taken] == [("a", 0), ("b", 0)]
    for job in taken:
        assert await job.ack()
    # concurrency has room again; the queue's rate has one claim left
    assert [(j.payload["k"], j.payload["i"]) for j in await q.claim_batch("w", 10)] == [("a", 1)]
    assert await q.claim_batch("w", 10) == []
    clock.advance(10)
    again = await q.claim_batch("w", 10)
    assert [(j.payload["k"], j.payload["i"]) for j in again] == [("b", 1)]  # a is still running
    assert await q.claim_batch("w", 10) == []  # a's key is full, b's too


async def test_a_rate_limited_queue_is_per_queue(store: Store) -> None:
    a, b = store.queue("a"), store.queue("b")
    await a.set_limits(rate=Rate(1, per=60))
    for q in (a, b):
        for i in range(3):
            await q.enqueue({"i": i})
    assert len(await a.claim_batch("w", 5)) == 1
    assert len(await b.claim_batch("w", 5)) == 3


async def test_lowering_a_rate_applies_to_the_next_claim(store: Store, clock: ManualClock) -> None:
    q = store.queue("q")
    await q.set_limits(rate=Rate(3, per=10))
    for i in range(6):
        await q.enqueue({"i": i})
    assert len(await q.claim_batch("w", 3)) == 3
    await q.set_limits(rate=Rate(1, per=10))
    clock.advance(5)
    assert await q.claim_batch("w", 10) == []
    clock.advance(5)  # all three left the window: one claim a window now
    assert len(await q.claim_batch("w", 10)) == 1


@pytest.mark.producer
async def test_bad_rates_are_refused_before_any_write(store: Store) -> None:
    q = store.queue("q")
    for limit, per in ((0, 1), (-1, 1), (1.5, 1), ("2", 1), (True, 1), (1, 0), (1, -1),
                       (1, "1"), (1, timedelta(days=32)), (1, float("nan"))):  # fmt: skip
        with pytest.raises(InvalidArgument):
            Rate(limit, per)  # type: ignore[arg-type]
    for bad in (5, (5, 1.0), "5/s", QueueLimits()):
        with pytest.raises(InvalidArgument):
            await q.set_limits(rate=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            await q.set_limits(rate_per_key=bad)  # type: ignore[arg-type]
    assert await q.limits() == QueueLimits()
    assert Rate(1, per=timedelta(days=31)).per == timedelta(days=31)


@pytest.mark.producer
async def test_inspection_shows_a_live_jobs_concurrency_key(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    await set_retention(store, "q", history_us=3600 * US, dead_us=None)
    plain = await q.enqueue({"n": 0})
    keyed = await q.enqueue({"n": 1}, concurrency_key="a")
    batch = await q.enqueue_batch([{"n": 2}, {"n": 3}], concurrency_key="b")
    unique = (await q.enqueue_unique({"n": 4}, "u", concurrency_key="c")).id
    async with store.transaction() as tx:
        in_tx = await tx.enqueue(q, {"n": 5}, concurrency_key="d")
    expected = {plain: None, keyed: "a", batch[0]: "b", batch[1]: "b", unique: "c", in_tx: "d"}
    assert {j.id: j.concurrency_key for j in await q.list_jobs()} == expected
    for job_id, key in expected.items():
        info = await q.get_job(job_id)
        assert info is not None and info.concurrency_key == key
        assert info.unique_key == ("u" if job_id == unique else None)
        assert await store.get_job(job_id) == info
    # Claimed, acked or cancelled into history, dead: still shown.
    claimed = {job.id: job for job in await q.claim_batch("w", 2)}
    assert set(claimed) == {plain, keyed}
    info = await q.get_job(keyed)
    assert info is not None and (info.state, info.concurrency_key) == ("processing", "a")
    assert await claimed[keyed].ack()
    assert await claimed[plain].ack()
    info = await q.get_job(keyed)
    assert info is not None and (info.state, info.concurrency_key) == ("acked", "a")
    info = await q.get_job(plain)
    assert info is not None and (info.state, info.concurrency_key) == ("acked", None)
    assert await q.cancel(in_tx)
    info = await q.get_job(in_tx)
    assert info is not None and (info.state, info.concurrency_key) == ("cancelled", "d")
    acked = await q.list_jobs(state="acked")
    assert {j.id: j.concurrency_key for j in acked} == {keyed: "a", plain: None}
    assert [j.concurrency_key for j in await q.list_jobs(state="cancelled")] == ["d"]
    (job,) = await q.claim_batch("w", 1)
    assert job.id == batch[0] and await job.fail("no")
    info = await q.get_job(batch[0])
    assert info is not None and (info.state, info.concurrency_key) == ("dead", "b")
    assert await store.get_job(batch[0]) == info
    assert [d.concurrency_key for d in await q.dead_letters()] == ["b"]
    assert [d.concurrency_key for d in await q.list_jobs(state="dead")] == ["b"]
    # A requeued letter comes back with its key.
    assert await q.requeue_dead(batch[0])
    info = await q.get_job(batch[0])
    assert info is not None and (info.state, info.concurrency_key) == ("pending", "b")
    assert await q.dead_letters() == []


async def _die(q: Queue, job_id: int, how: str, clock: ManualClock) -> None:
    """Bury the pending job ``job_id`` (the only one claimable) by ``how``."""
    if how == "expired":
        clock.advance(2)  # past its deadline (expires=1 at enqueue)
        assert await q.sweep_expired() == 1
    else:
        (job,) = await q.claim_batch("w0", 1)
        assert job.id == job_id
        if how == "failed":
            assert await job.fail("no")
        elif how == "max_attempts":  # a retry of its last attempt
            assert await job.retry(error="no")
        else:  # its last attempt's claim lapses: the sweep buries it
            clock.advance(11)
            assert await q.sweep_expired() == 1
    (dead,) = await q.dead_letters()
    assert (dead.id, dead.dead_reason, dead.concurrency_key) == (job_id, how, "a")


@pytest.mark.parametrize("how", ["failed", "max_attempts", "claim_expired", "expired"])
async def test_a_requeued_dead_letter_is_still_limited_by_its_key(
    store: Store, clock: ManualClock, how: str
) -> None:
    q = store.queue("q", max_attempts=1, visibility_timeout=10)
    await q.set_limits(concurrency_per_key=1)
    dies = await q.enqueue({"i": 0}, concurrency_key="a", expires=1 if how == "expired" else None)
    await _die(q, dies, how, clock)
    runs = await q.enqueue({"i": 1}, concurrency_key="a")
    (running,) = await q.claim_batch("w1", 5)
    assert running.id == runs
    assert await q.requeue_dead(dies)
    # The running job fills key a: the requeued one waits for it...
    assert await q.claim_batch("w2", 5) == []
    other = await q.enqueue({"i": 2}, concurrency_key="b")
    assert [j.id for j in await q.claim_batch("w2", 5)] == [other]
    assert await running.ack()
    # ...and is claimed once it settles, with its key counted again.
    (back,) = await q.claim_batch("w2", 5)
    assert (back.id, back.payload) == (dies, {"i": 0})
    await q.enqueue({"i": 3}, concurrency_key="a")
    assert await q.claim_batch("w3", 5) == []


async def test_requeued_dead_letters_are_limited_one_by_one_and_by_rate(
    store: Store, clock: ManualClock
) -> None:
    # Several letters of one key requeued together (as `alkstore dead
    # requeue --all` does, one requeue each): one runs at a time.
    q = store.queue("q", max_attempts=1)
    await q.set_limits(concurrency_per_key=1)
    ids = [await q.enqueue({"i": i}, concurrency_key="a") for i in range(3)]
    for _ in ids:
        (job,) = await q.claim_batch("w0", 1)
        assert await job.fail("no")
    assert sorted(d.id for d in await q.dead_letters()) == ids
    for job_id in ids:
        assert await q.requeue_dead(job_id)
    for job_id in ids:
        (job,) = await q.claim_batch("w", 5)
        assert job.id == job_id and await q.claim_batch("w", 5) == []
        assert await job.ack()
    # A per-key rate holds a requeued letter too.
    r = store.queue("r", max_attempts=1)
    await r.set_limits(rate_per_key=Rate(1, per=10))
    dies = await r.enqueue({"i": 0}, concurrency_key="a")
    (job,) = await r.claim_batch("w", 5)
    assert await job.fail("no")  # the claim counted in key a's window
    assert await r.requeue_dead(dies)
    assert await r.claim_batch("w", 5) == []
    clock.advance(10)
    assert [j.id for j in await r.claim_batch("w", 5)] == [dies]


async def test_list_queues_shows_the_limit(store: Store) -> None:
    await store.queue("limited").set_limits(concurrency_per_key=3)
    await store.queue("lifted").set_limits(concurrency_per_key=2)
    await store.queue("lifted").set_limits(concurrency_per_key=None)
    await store.queue("plain").enqueue("x")
    listed = {s.name: s.limits.concurrency_per_key for s in await store.list_queues()}
    assert listed == {"limited": 3, "lifted": None, "plain": None}
    assert listed["limited"] == (await store.queue("limited").limits()).concurrency_per_key
