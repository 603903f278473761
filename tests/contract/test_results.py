"""Rules: results (contract extension, every backend; docs/workflows.md).

- What a handler returns (JSON, or a typed object through the codec) is the
  job's result, stored in the ack's transaction; ``job.ack(result=...)``
  does the same by hand.
- ``Queue.result(id, timeout=)`` waits for the job, woken by its finish in
  any process, and returns the result (None for a handler that returned
  nothing); ``JobFailed`` for a job that died, ``JobCancelled`` for one
  cancelled, ``ResultTimeout`` past the timeout, ``InvalidArgument`` for an
  id no job ever had or a job of another queue.
- A handler reads its dependencies' results (``job.dependency_results()``).
- Results follow the results retention (``set_retention(results=...)``, a
  day by default, or the history retention if longer): pruned after it.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from alkstore import (
    InvalidArgument,
    Job,
    JobCancelled,
    JobFailed,
    ManualClock,
    ResultTimeout,
    Store,
)

from . import aio
from .helpers import SOON


@dataclasses.dataclass
class Total:
    amount: int
    currency: str


async def run_worker(store: Store, queue: str, handler: Any, body: Any) -> Any:
    """``body()`` while a worker of ``queue`` runs ``handler``."""
    q = store.queue(queue, max_attempts=1)

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, concurrency=4, poll_interval=60.0, task_status=task_status)

    async with aio.open_task_group() as group:
        await group.start(worker)
        async with aio.fail_after(SOON * 2):
            value = await body()
        group.cancel()
    return value


async def test_a_handlers_return_value_is_the_jobs_result(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    plain = await q.enqueue({"n": 2})
    typed = await q.enqueue({"n": 3})
    nothing = await q.enqueue({"n": 0})

    async def handler(job: Job) -> Any:
        n = job.payload["n"]
        if n == 0:
            return None
        return {"double": n * 2} if n == 2 else Total(n * 100, "EUR")

    async def body() -> list[Any]:
        return [
            await q.result(plain),
            await q.result(typed, as_type=Total),
            await q.result(nothing),
        ]

    got = await run_worker(store, "q", handler, body)
    assert got == [{"double": 4}, Total(300, "EUR"), None]
    info = await q.get_job(plain)
    assert info is not None and info.state == "acked" and info.result == {"double": 4}


async def test_result_waits_for_the_job_and_is_woken_by_its_finish(store: Store) -> None:
    """The worker polls every 60 s; the result comes back well before."""
    q = store.queue("q")
    job_id = await q.enqueue("x")
    release = aio.event()

    async def handler(job: Job) -> str:
        await release.wait()
        return "done"

    async def body() -> Any:
        async def let_go() -> None:
            await aio.sleep(0.2)
            release.set()

        async with aio.open_task_group() as group:
            group.start_soon(let_go)
            started = time.monotonic()
            value = await q.result(job_id, timeout=30)
        assert time.monotonic() - started < 10
        return value

    assert await run_worker(store, "q", handler, body) == "done"


async def test_failed_and_cancelled_jobs_raise(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    bad = await q.enqueue("bad")
    later = await q.enqueue("later", depends_on=[bad])
    cancelled = await q.enqueue("cancel me", delay=3600)
    assert await q.cancel(cancelled)

    async def handler(job: Job) -> None:
        raise ValueError("no good")

    async def body() -> None:
        with pytest.raises(JobFailed) as failed:
            await q.result(bad)
        assert failed.value.job_id == bad and failed.value.reason == "max_attempts"
        assert "no good" in (failed.value.error or "")
        with pytest.raises(JobCancelled) as dependent:
            await q.result(later)
        assert dependent.value.reason == f"dependency job {bad} died (max_attempts)"

    await run_worker(store, "q", handler, body)
    # Cancelled by hand: recorded only while its queue keeps history (it
    # had nothing depending on it); without, it reads as finished, no result.
    assert await q.result(cancelled) is None


async def test_a_cancel_of_an_awaited_job_raises(store: Store) -> None:
    q = store.queue("q")
    job_id = await q.enqueue("x", delay=3600)

    async def cancel_soon() -> None:
        await aio.sleep(0.2)
        assert await q.cancel(job_id)

    async with aio.open_task_group() as group:
        group.start_soon(cancel_soon)
        with pytest.raises(JobCancelled):
            async with aio.fail_after(SOON):
                await q.result(job_id)


@pytest.mark.producer
async def test_result_times_out_and_refuses_unknown_ids_and_other_queues(store: Store) -> None:
    q = store.queue("q")
    job_id = await q.enqueue("x", delay=3600)
    with pytest.raises(ResultTimeout):
        await q.result(job_id, timeout=0.1)
    with pytest.raises(InvalidArgument, match="no job"):
        await q.result(job_id + 1000, timeout=0)
    with pytest.raises(InvalidArgument, match="of queue 'q'"):
        await store.queue("other").result(job_id, timeout=0)
    with pytest.raises(InvalidArgument):
        await q.result("1", timeout=0)  # type: ignore[arg-type]


async def test_a_handler_reads_its_dependencies_results(store: Store) -> None:
    q = store.queue("q")
    a = await q.enqueue(1)
    b = await q.enqueue(2)
    total = await q.enqueue("sum", depends_on=[a, b])
    seen: dict[int, Any] = {}

    async def handler(job: Job) -> Any:
        if job.id == total:
            seen.update(await job.dependency_results())
            return sum(seen.values())
        return int(job.payload) * 10

    async def body() -> Any:
        return await q.result(total)

    assert await run_worker(store, "q", handler, body) == 30
    assert seen == {a: 10, b: 20}


async def test_ack_by_hand_keeps_a_result(store: Store) -> None:
    q = store.queue("q")
    job_id = await q.enqueue("x")
    (job,) = await q.claim_batch("w", 1)
    assert await job.ack(result=[1, 2, 3])
    assert not await job.ack(result="again")  # settled once
    assert await q.result(job_id) == [1, 2, 3]


async def test_results_leave_with_their_retention(
    backend: Any, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock, housekeeping_interval=None) as store:
        q = store.queue("q")
        await q.set_retention(results=60)
        job_id = await q.enqueue("x")
        (job,) = await q.claim_batch("w", 1)
        assert await job.ack(result="kept")
        clock.advance(30)
        await store.prune()
        assert await q.result(job_id) == "kept"
        clock.advance(31)
        report = await store.prune()
        assert report.history == 1
        assert await q.result(job_id) is None  # finished, its record gone


async def test_a_result_outlives_its_retention_while_a_dependent_waits_for_it(
    backend: Any, location: str, clock: ManualClock
) -> None:
    # The fan-in reads its dependencies' results when it runs: a record
    # past its retention stays while a job depending on it waits or is live.
    async with backend.open(location, clock=clock, housekeeping_interval=None) as store:
        q = store.queue("q")
        await q.set_retention(results=60)
        early = await q.enqueue("early")
        slow = await q.enqueue("slow", delay=3600)
        join = await q.enqueue("join", depends_on=[early, slow])
        (job,) = await q.claim_batch("w", 1)
        assert job.id == early and await job.ack(result="E")
        clock.advance(3601)
        assert (await store.prune()).history == 0  # join still waits for it
        (job,) = await q.claim_batch("w", 1)
        assert job.id == slow and await job.ack(result="S")
        await store.prune()
        (job,) = await q.claim_batch("w", 1)  # join is live now
        assert job.id == join
        assert await job.dependency_results() == {early: "E", slow: "S"}
        assert await job.ack()
        clock.advance(61)
        assert (await store.prune()).history == 3  # nothing needs them any more
        assert await q.result(early) is None


async def test_a_workflow_stays_readable_while_a_step_is_recorded(
    backend: Any, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock, housekeeping_interval=None) as store:
        q = store.queue("q")
        await q.set_retention(results=7 * 86_400)
        wf = store.workflow("weekly")
        wf.step("only", q, "x")
        run = await wf.enqueue()
        (job,) = await q.claim_batch("w", 1)
        assert await job.ack(result=1)
        clock.advance(2 * 86_400)
        assert (await store.prune()).workflows == 0
        assert (await run.status()).steps["only"].result == 1
        clock.advance(6 * 86_400)
        report = await store.prune()
        assert (report.history, report.workflows) == (1, 1)
        with pytest.raises(InvalidArgument, match="no workflow"):
            await run.status()
