"""Rules: job dependencies (contract extension, every backend; docs/workflows.md).

- ``depends_on=[ids]`` on every enqueue path (queue, batch, transaction,
  ``alkstore.sync``), across queues: the job waits (state ``waiting``,
  counted in ``QueueStats.waiting``), is never claimed, and becomes pending
  in the transaction that finishes its last dependency.
- Every dependency id must exist (live, waiting, or finished and recorded):
  an unknown one is ``InvalidArgument`` and nothing is written.
- A dependency that dies or is cancelled cancels its dependents (outcome
  ``cancelled``, ``last_error`` says which dependency), transitively;
  ``on_dependency_failure="run"`` runs the dependent anyway. Cancelling a
  waiting or a live job cancels what waits for it.
- A dependency already acked counts as finished at once; one already dead
  or cancelled makes the new job born cancelled (or, with ``run``, ready).
- The unique enqueues refuse ``depends_on`` (``InvalidArgument``): a unique
  key is held by a live job, and a waiting job is not one.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidArgument, Job, ManualClock, Store

from . import aio
from .helpers import SOON


async def claim_ids(store: Store, queue: str, n: int = 100) -> list[int]:
    return [j.id for j in await store.queue(queue).claim_batch("w", n)]


async def ack_all(store: Store, queue: str) -> list[int]:
    """Claim and ack everything claimable in ``queue``; the ids."""
    q = store.queue(queue)
    jobs = await q.claim_batch("w", 100)
    for job in jobs:
        assert await job.ack()
    return [j.id for j in jobs]


@pytest.mark.producer
async def test_a_job_with_dependencies_waits_and_is_never_claimed(store: Store) -> None:
    q = store.queue("q")
    a = await q.enqueue("a")
    b = await q.enqueue("b", depends_on=[a])
    stats = await q.stats()
    assert (stats.ready, stats.waiting) == (1, 1)
    info = await q.get_job(b)
    assert info is not None and info.state == "waiting" and info.dependencies == (a,)
    dep = await q.get_job(a)
    assert dep is not None and dep.dependents == (b,) and dep.state == "pending"
    assert await claim_ids(store, "q") == [a]
    assert await claim_ids(store, "q") == []
    assert [j.id for j in await q.list_jobs(state="waiting")] == [b]


async def test_the_ack_of_the_last_dependency_releases_the_job(store: Store) -> None:
    q, other = store.queue("q"), store.queue("other")
    a = await q.enqueue("a")
    b = await other.enqueue("b")
    c = await q.enqueue("c", depends_on=[a, b])
    assert await ack_all(store, "q") == [a]
    assert (await q.stats()).waiting == 1  # b not finished: still waiting
    assert await claim_ids(store, "q") == []
    assert await ack_all(store, "other") == [b]
    stats = await q.stats()
    assert (stats.waiting, stats.ready) == (0, 1)
    info = await q.get_job(c)
    assert info is not None and info.state == "pending" and info.dependencies == (a, b)
    assert await ack_all(store, "q") == [c]


async def test_a_released_job_wakes_a_waiting_worker_at_once(store: Store) -> None:
    """The release is a wake like an enqueue's: a worker with a 60 s poll
    takes the dependent as soon as its dependency is acked elsewhere."""
    q = store.queue("q")
    a = await store.queue("first").enqueue("a")
    b = await q.enqueue("b", depends_on=[a])
    ran = aio.event()

    async def handler(job: Job) -> None:
        assert job.id == b
        ran.set()

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, poll_interval=60.0, task_status=task_status)

    async with aio.open_task_group() as group:
        await group.start(worker)
        await aio.sleep(0.05)  # the worker's first claim found nothing
        assert await ack_all(store, "first") == [a]
        async with aio.fail_after(SOON):
            await ran.wait()
        group.cancel()


@pytest.mark.producer
async def test_an_unknown_dependency_is_refused_and_nothing_is_written(store: Store) -> None:
    q = store.queue("q")
    a = await q.enqueue("a")
    with pytest.raises(InvalidArgument, match="does not exist"):
        await q.enqueue("x", depends_on=[a, a + 1000])
    with pytest.raises(InvalidArgument, match="does not exist"):
        await q.enqueue_batch(["x", "y"], depends_on=[a + 1000])
    stats = await q.stats()
    assert (stats.ready, stats.waiting) == (1, 0)
    info = await q.get_job(a)
    assert info is not None and info.dependents == ()  # no edge survived


@pytest.mark.producer
@pytest.mark.parametrize(
    "bad", ["12", 12, [1.5], [True], [-1], {"a": 1}, [None]], ids=repr
)
async def test_bad_dependency_lists_are_refused_before_any_round_trip(
    store: Store, bad: Any
) -> None:
    with pytest.raises(InvalidArgument):
        await store.queue("q").enqueue("x", depends_on=bad)
    with pytest.raises(InvalidArgument):
        await store.queue("q").enqueue("x", on_dependency_failure="maybe")  # type: ignore[typeddict-item]
    assert (await store.queue("q").stats()).ready == 0


@pytest.mark.producer
async def test_every_enqueue_path_takes_dependencies(store: Store) -> None:
    q = store.queue("q")
    a = await q.enqueue("a")
    batch = await q.enqueue_batch(["b1", "b2"], depends_on=[a])
    async with store.transaction() as tx:
        in_tx = await tx.enqueue("q", "t", depends_on=[a])
    boxed = await store.outbox("box").enqueue("o", depends_on=[a])
    for job_id in (*batch, in_tx):
        info = await q.get_job(job_id)
        assert info is not None and info.state == "waiting" and info.dependencies == (a,)
    assert (await store.outbox("box").stats()).waiting == 1
    assert boxed not in batch
    dep = await q.get_job(a)
    assert dep is not None and set(dep.dependents) == {*batch, in_tx, boxed}


@pytest.mark.producer
async def test_the_unique_enqueues_refuse_dependencies_and_write_nothing(store: Store) -> None:
    # A unique key is held by a live job: a waiting one could not hold it.
    q = store.queue("q")
    a = await q.enqueue("a")
    with pytest.raises(InvalidArgument, match="depends_on"):
        await q.enqueue_unique("x", "k", depends_on=[a])
    with pytest.raises(InvalidArgument, match="depends_on"):
        await q.enqueue_batch_unique([("k", "x")], depends_on=[a])
    with pytest.raises(InvalidArgument, match="on_dependency_failure"):
        await q.enqueue_unique("x", "k", on_dependency_failure="run")
    with pytest.raises(InvalidArgument, match="depends_on"):
        async with store.transaction() as tx:
            await tx.enqueue_unique("q", "x", "k", depends_on=[a])
    stats = await q.stats()
    assert (stats.ready, stats.waiting) == (1, 0)


@pytest.mark.producer
async def test_a_rolled_back_transaction_leaves_no_waiting_job_or_edge(store: Store) -> None:
    q = store.queue("q")
    a = await q.enqueue("a")
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.enqueue("q", "b", depends_on=[a])
            raise RuntimeError("roll back")
    assert (await q.stats()).waiting == 0
    info = await q.get_job(a)
    assert info is not None and info.dependents == ()


async def test_fan_in_releases_once_after_the_last_of_many(store: Store) -> None:
    q = store.queue("q")
    deps = await q.enqueue_batch(list(range(50)))
    last = await store.queue("join").enqueue("join", depends_on=deps)
    jobs = await q.claim_batch("w", 100)
    assert await q.ack_batch([j.id for j in jobs[:49]], "w") == 49
    assert (await store.queue("join").stats()).waiting == 1
    assert await jobs[49].ack()
    assert await claim_ids(store, "join") == [last]


async def test_a_dead_dependency_cancels_its_dependents_transitively(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    a = await q.enqueue("a")
    b = await q.enqueue("b", depends_on=[a])
    c = await store.queue("c").enqueue("c", depends_on=[b])
    anyway = await q.enqueue("anyway", depends_on=[a], on_dependency_failure="run")
    (job,) = await q.claim_batch("w", 1)
    assert await job.fail("broken")
    b_info, c_info = await q.get_job(b), await store.queue("c").get_job(c)
    assert b_info is not None and b_info.state == "cancelled"
    assert b_info.last_error == f"dependency job {a} died (failed)"
    assert c_info is not None and c_info.state == "cancelled"
    assert c_info.last_error == f"dependency job {b} was cancelled"
    assert await claim_ids(store, "q") == [anyway]  # its policy: run anyway
    assert (await q.stats()).waiting == 0


async def test_a_retry_that_buries_a_dependency_cancels_its_dependents(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    a = await q.enqueue("a")
    b = await q.enqueue("b", depends_on=[a])
    (job,) = await q.claim_batch("w", 1)
    assert await job.retry(error="no")  # the last attempt: to the dead letters
    info = await q.get_job(b)
    assert info is not None and info.state == "cancelled"
    assert info.last_error == f"dependency job {a} died (max_attempts)"


async def test_cancelling_a_job_cancels_what_waits_for_it(store: Store) -> None:
    q = store.queue("q")
    a = await q.enqueue("a")
    b = await q.enqueue("b", depends_on=[a])
    c = await q.enqueue("c", depends_on=[b])
    assert await q.cancel(b)  # a waiting job
    for job_id, why in ((b, None), (c, f"dependency job {b} was cancelled")):
        info = await q.get_job(job_id)
        assert info is not None and info.state == "cancelled" and info.last_error == why
    d = await q.enqueue("d", depends_on=[a])
    assert await q.cancel(a)  # a live one, with a dependent
    info = await q.get_job(d)
    assert info is not None and info.state == "cancelled"
    assert await claim_ids(store, "q") == []


async def test_a_dependency_finished_already_counts_at_once(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    a = await q.enqueue("a")
    keeper = await q.enqueue("keeper", depends_on=[a])  # keeps a's record
    assert await ack_all(store, "q") == [a]
    assert await claim_ids(store, "q") == [keeper]
    after = await q.enqueue("after", depends_on=[a])
    info = await q.get_job(after)
    assert info is not None and info.state == "pending" and info.dependencies == (a,)
    dead = await q.enqueue("dies")
    dependent = await q.enqueue("x", depends_on=[dead])  # keeps its record
    (job,) = [j for j in await q.claim_batch("w", 10) if j.id == dead]
    assert await job.fail("no")
    born = await q.enqueue("born", depends_on=[dead])
    ran = await q.enqueue("ran", depends_on=[dead], on_dependency_failure="run")
    for job_id, state in ((dependent, "cancelled"), (born, "cancelled"), (ran, "pending")):
        info = await q.get_job(job_id)
        assert info is not None and info.state == state, (job_id, info)


async def test_a_dependency_acked_without_a_record_is_unknown(store: Store) -> None:
    """A job that finished with nothing depending on it, no result and no
    history kept leaves nothing to depend on: refused, not guessed."""
    q = store.queue("q")
    a = await q.enqueue("a")
    assert await ack_all(store, "q") == [a]
    with pytest.raises(InvalidArgument, match="does not exist"):
        await q.enqueue("b", depends_on=[a])


async def test_an_expired_dependency_swept_cancels_its_dependents(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    a = await q.enqueue("a", expires=5)
    b = await q.enqueue("b", depends_on=[a])
    clock.advance(10)
    assert await q.sweep_expired() == 1
    info = await q.get_job(b)
    assert info is not None and info.state == "cancelled"
    assert info.last_error == f"dependency job {a} died (expired)"


async def test_a_worker_runs_a_chain_in_order(store: Store) -> None:
    q = store.queue("q")
    ids = [await q.enqueue(0)]
    for i in range(1, 5):
        ids.append(await q.enqueue(i, depends_on=[ids[-1]]))
    ran: list[int] = []
    done = aio.event()

    async def handler(job: Job) -> int:
        ran.append(job.payload)
        if len(ran) == len(ids):
            done.set()
        return int(job.payload) * 10

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, concurrency=4, task_status=task_status)

    async with aio.open_task_group() as group:
        await group.start(worker)
        async with aio.fail_after(SOON):
            await done.wait()
        group.cancel()
    assert ran == [0, 1, 2, 3, 4]
