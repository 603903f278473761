"""Rules: unique jobs (contract extension, on every backend).

- ``enqueue_unique(payload, key)`` inserts a job holding ``key`` in its
  queue unless a live job (pending, scheduled or processing) holds it; then
  nothing is inserted and the holder's id comes back with ``duplicate``.
- The key is free again once its job is acked, cancelled or dead; keys are
  per queue; a plain ``enqueue`` holds no key.
- ``set_unique_policy(processing_blocks=False)``: a processing job gives its
  key up to the next unique enqueue (a pending one still holds it).
- ``unique_for``: a key stays taken that long after its job was acked; the
  queue must keep history at least that long (``InvalidArgument``).
- Batches and transactions apply the same rule, duplicates inside one batch
  included; a rolled-back transaction holds no key.
- Inspection: ``JobInfo.unique_key`` is the key a job was enqueued with,
  while it is live (a processing job that gave its key up included) and in
  history; a dead letter shows None. ``QueueSummary.unique_processing_blocks``
  is the queue's policy (True unless set to False).
"""

from __future__ import annotations

import pytest

from alkstore import Enqueued, InvalidArgument, InvalidName, ManualClock, QueueStats, Store

from .helpers import US, set_retention


@pytest.mark.producer
async def test_a_live_job_holds_its_key(store: Store) -> None:
    q = store.queue("q")
    first = await q.enqueue_unique({"n": 1}, "k")
    assert first == Enqueued(first.id, duplicate=False)
    again = await q.enqueue_unique({"n": 2}, "k", priority=5)
    assert again == Enqueued(first.id, duplicate=True)
    job_id, duplicate = await q.enqueue_unique({"n": 3}, "other")
    assert not duplicate and job_id != first.id
    assert (await q.stats()).ready == 2
    info = await q.get_job(first.id)
    assert info is not None and info.payload == {"n": 1}  # the duplicate changed nothing


@pytest.mark.producer
async def test_keys_are_per_queue_and_plain_enqueues_hold_none(store: Store) -> None:
    a, b = store.queue("a"), store.queue("b")
    await a.enqueue("plain")
    await a.enqueue("plain")
    assert not (await a.enqueue_unique("x", "k")).duplicate
    assert not (await b.enqueue_unique("x", "k")).duplicate
    assert (await a.stats()).ready == 3


@pytest.mark.producer
async def test_a_scheduled_job_holds_its_key(store: Store) -> None:
    q = store.queue("q")
    first = await q.enqueue_unique("later", "k", delay=3600)
    assert (await q.enqueue_unique("now", "k")) == (first.id, True)
    assert await q.stats() == QueueStats(ready=0, scheduled=1, processing=0, dead=0)


async def test_a_processing_job_holds_its_key_and_frees_it_when_acked(store: Store) -> None:
    q = store.queue("q")
    first = await q.enqueue_unique("a", "k")
    job = await q.claim_one("w")
    assert job is not None and job.id == first.id
    assert (await q.enqueue_unique("b", "k")) == (first.id, True)
    # A retry keeps the key: the job is pending again.
    assert await job.retry(delay=0)
    assert (await q.enqueue_unique("b", "k")) == (first.id, True)
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    second = await q.enqueue_unique("b", "k")
    assert not second.duplicate and second.id != first.id


@pytest.mark.producer
async def test_a_cancel_frees_the_key(store: Store) -> None:
    q = store.queue("q")
    first = await q.enqueue_unique("a", "k")
    assert await q.cancel(first.id)
    second = await q.enqueue_unique("b", "k")
    assert not second.duplicate and second.id != first.id


async def test_a_dead_job_frees_its_key(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    first = await q.enqueue_unique("a", "k")
    job = await q.claim_one("w")
    assert job is not None and await job.fail("boom")
    assert [d.id for d in await q.dead_letters()] == [first.id]
    assert not (await q.enqueue_unique("b", "k")).duplicate


async def test_a_processing_job_may_give_its_key_up(store: Store) -> None:
    q = store.queue("q")
    await q.set_unique_policy(processing_blocks=False)
    first = await q.enqueue_unique("a", "k")
    # Pending: it holds the key.
    assert (await q.enqueue_unique("b", "k")) == (first.id, True)
    job = await q.claim_one("w")
    assert job is not None and job.id == first.id
    second = await q.enqueue_unique("b", "k")
    assert not second.duplicate
    assert (await q.enqueue_unique("c", "k")) == (second.id, True)
    # The running job goes on without its key; its ack frees nothing.
    assert await job.ack()
    assert (await q.enqueue_unique("d", "k")) == (second.id, True)
    # The setting goes back; a new handle on the queue sees it.
    await store.queue("q").set_unique_policy(processing_blocks=True)
    job = await q.claim_one("w")
    assert job is not None and job.id == second.id
    assert (await q.enqueue_unique("e", "k")) == (second.id, True)


@pytest.mark.producer
async def test_a_batch_applies_the_rule_inside_itself_and_against_live_jobs(
    store: Store,
) -> None:
    q = store.queue("q")
    held = await q.enqueue_unique("old", "b")
    results = await q.enqueue_batch_unique(
        [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("c", 5)], priority=2
    )
    assert [r.duplicate for r in results] == [False, True, True, False, True]
    assert results[1].id == held.id
    assert results[2].id == results[0].id and results[4].id == results[3].id
    assert (await q.stats()).ready == 3
    info = await q.get_job(results[0].id)
    assert info is not None and info.payload == 1 and info.priority == 2
    assert await q.enqueue_batch_unique([]) == []


@pytest.mark.producer
async def test_a_transaction_holds_the_key_only_if_it_commits(store: Store) -> None:
    q = store.queue("q")

    class Abort(Exception):
        pass

    with pytest.raises(Abort):
        async with store.transaction() as tx:
            inside = await tx.enqueue_unique(q, "a", "k")
            assert not inside.duplicate
            assert (await tx.enqueue_unique("q", "b", "k")) == (inside.id, True)
            raise Abort
    assert (await q.stats()).ready == 0
    async with store.transaction() as tx:
        kept = await tx.enqueue_unique(q, "a", "k")
    assert not kept.duplicate
    assert (await q.enqueue_unique("b", "k")) == (kept.id, True)


async def test_unique_for_keeps_the_key_after_the_ack(store: Store, clock: ManualClock) -> None:
    q = store.queue("q")
    await q.set_retention(history=3600, dead=None)
    first = await q.enqueue_unique("a", "k", unique_for=60)
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    assert (await q.enqueue_unique("b", "k", unique_for=60)) == (first.id, True)
    clock.advance(30)
    assert (await q.enqueue_unique("b", "k", unique_for=60)) == (first.id, True)
    clock.advance(31)
    second = await q.enqueue_unique("b", "k", unique_for=60)
    assert not second.duplicate
    # Batches too; a cancelled job is not kept for unique_for.
    assert await q.cancel(second.id)
    results = await q.enqueue_batch_unique([("k", 1), ("j", 2)], unique_for=60)
    assert [r.duplicate for r in results] == [False, False]


async def test_without_unique_for_an_acked_job_kept_in_history_holds_nothing(
    store: Store,
) -> None:
    q = store.queue("q")
    await q.set_retention(history=3600, dead=None)
    first = await q.enqueue_unique("a", "k", unique_for=60)
    job = await q.claim_one("w")
    assert job is not None and await job.ack()
    second = await q.enqueue_unique("b", "k")
    assert not second.duplicate and second.id != first.id


async def test_unique_for_needs_history_long_enough(store: Store) -> None:
    q = store.queue("q")
    with pytest.raises(InvalidArgument, match="keep history"):
        await q.enqueue_unique("a", "k", unique_for=60)
    await q.set_retention(history=30, dead=None)
    with pytest.raises(InvalidArgument, match="longer than"):
        await q.enqueue_unique("a", "k", unique_for=60)
    with pytest.raises(InvalidArgument, match="longer than"):
        await q.enqueue_batch_unique([("k", 1)], unique_for=60)
    assert (await q.stats()).ready == 0


@pytest.mark.producer
async def test_bad_unique_arguments_are_refused_before_any_write(store: Store) -> None:
    q = store.queue("q")
    with pytest.raises(InvalidName):
        await q.enqueue_unique("a", "")
    with pytest.raises(InvalidName):
        await q.enqueue_unique("a", 7)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await q.enqueue_unique("a", "k", unique_for=0)
    with pytest.raises(InvalidArgument):
        await q.enqueue_unique("a", "k", unique_for="soon")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await q.enqueue_batch_unique(["k"])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        await q.enqueue_batch_unique({"k": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await q.set_unique_policy(processing_blocks=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await q.enqueue_unique("a", "k", unique_key="k")  # type: ignore[call-arg]
    assert (await q.stats()).ready == 0


@pytest.mark.producer
async def test_inspection_shows_the_unique_key_where_it_is_kept(store: Store) -> None:
    q = store.queue("q")
    await set_retention(store, "q", history_us=3600 * US, dead_us=None)
    await q.set_unique_policy(processing_blocks=False)
    held = (await q.enqueue_unique({"n": 1}, "held")).id
    plain = await q.enqueue({"n": 2})
    gave_up = (await q.enqueue_unique({"n": 3}, "taken")).id
    acked = (await q.enqueue_unique({"n": 4}, "acked")).id
    dead = (await q.enqueue_unique({"n": 5}, "dead")).id
    cancelled = (await q.enqueue_unique({"n": 6}, "cancelled")).id
    claimed = {job.id: job for job in await q.claim_batch("w", 10)}
    assert set(claimed) == {held, plain, gave_up, acked, dead, cancelled}
    assert await claimed[acked].ack() and await claimed[dead].fail("no")
    assert await q.cancel(cancelled)
    # A processing job whose key a new enqueue took over still shows it.
    took = await q.enqueue_unique({"n": 7}, "taken")
    assert not took.duplicate

    expected = {
        held: ("processing", "held"), plain: ("processing", None),
        gave_up: ("processing", "taken"), took.id: ("pending", "taken"),
        acked: ("acked", "acked"), cancelled: ("cancelled", "cancelled"),
        dead: ("dead", None),  # the dead table keeps no key
    }  # fmt: skip
    for job_id, (state, key) in expected.items():
        info = await q.get_job(job_id)
        assert info is not None and (info.state, info.unique_key) == (state, key), info
        assert info.concurrency_key is None
        assert await store.get_job(job_id) == info
    listed = await q.list_jobs()  # live and dead
    listed += await q.list_jobs(state="acked") + await q.list_jobs(state="cancelled")
    assert {j.id: (j.state, j.unique_key) for j in listed} == expected
    assert [d.unique_key for d in await q.dead_letters()] == [None]


async def test_list_queues_shows_the_unique_policy(store: Store) -> None:
    await store.queue("never-set").enqueue("x")
    await store.queue("yields").set_unique_policy(processing_blocks=False)
    await store.queue("blocks").set_unique_policy(processing_blocks=False)
    await store.queue("blocks").set_unique_policy(processing_blocks=True)
    listed = {s.name: s.unique_processing_blocks for s in await store.list_queues()}
    assert listed == {"never-set": True, "yields": False, "blocks": True}
