"""Rule (contract extension: live cancellation): ``Queue.cancel`` of a job a
worker holds reaches that worker at the cancel's wake, not at its next
heartbeat: a running handler is cancelled, a job claimed ahead is dropped
without running, the job ends cancelled (in history when the queue keeps
it), and the worker's report counts it once, in ``cancelled_by_request``,
never as lost; a handler can shield a critical section from it.

The store's clock is a ``ManualClock`` these tests do not move (except the
missed-wake test): the workers' heartbeats and polls never come due, so
only the cancel's wake can deliver it within the tests' bounds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import sniffio
import trio

from alkstore import Drain, Job, ManualClock, Queue, Store, WorkerReport
from tests.backends import Backend

from . import aio
from .helpers import SOON, wait_until
from .test_drain import claim_ahead

NEVER = 60.0


async def start(group: aio.TaskGroup, q: Queue, handler: Any, drain: Drain,
                reports: list[WorkerReport], **options: Any) -> None:  # fmt: skip
    """A worker on ``q`` under ``drain``, started (listening) when this returns."""

    async def run(task_status: Any = None) -> None:
        report = await q.work(handler, drain=drain, poll_interval=NEVER,
                              task_status=task_status, **options)  # fmt: skip
        reports.append(report)

    await group.start(run)


def blocking_handler(started: Any, stopped: Any) -> Any:
    """A handler that runs until cancelled, saying when it starts and stops."""

    async def handler(job: Job) -> None:
        started.set()
        try:
            await aio.sleep(NEVER)
        finally:
            stopped.set()

    return handler


def only(reports: list[WorkerReport]) -> WorkerReport:
    (report,) = reports
    return report


@pytest.mark.producer
async def test_cancel_reaches_the_running_handler_at_once(store: Store) -> None:
    # On the -sync backends the cancel is alkstore.sync's, on a store of its
    # own: the wake crosses stores (the SQLite watcher, Postgres LISTEN).
    q = store.queue("q")
    job_id = await q.enqueue("work")
    started, stopped = aio.event(), aio.event()
    drain, reports = Drain(), []
    async with aio.open_task_group() as group:
        await start(group, q, blocking_handler(started, stopped), drain, reports)
        async with aio.fail_after(SOON):
            await started.wait()
        assert await q.cancel(job_id) is True
        async with aio.fail_after(SOON):
            await stopped.wait()  # the handler was cancelled, long before any heartbeat
        drain.now()
    report = only(reports)
    assert (report.started, report.cancelled_by_request) == (1, 1)
    assert (report.acked, report.lost, report.handed_back, report.cancelled) == (0, 0, 0, 0)
    assert await q.get_job(job_id) is None  # gone: no history kept


async def test_cancel_from_another_store_ends_the_job_cancelled_in_history(
    store: Store, backend: Backend, location: str, clock: ManualClock
) -> None:
    q = store.queue("q")
    await q.set_retention(history=3600, dead=None)
    job_id = await q.enqueue("work")
    started, stopped = aio.event(), aio.event()
    drain, reports = Drain(), []
    async with backend.open(location, clock=clock) as other, aio.open_task_group() as group:
        await start(group, q, blocking_handler(started, stopped), drain, reports)
        async with aio.fail_after(SOON):
            await started.wait()
        assert await other.queue("q").cancel(job_id) is True
        async with aio.fail_after(SOON):
            await stopped.wait()
        drain.now()
    report = only(reports)
    assert (report.cancelled_by_request, report.lost, report.acked) == (1, 0, 0)
    info = await q.get_job(job_id)
    assert info is not None and info.state == "cancelled"


async def test_a_job_claimed_ahead_and_cancelled_never_runs(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    claim_ahead(monkeypatch, 3)
    caplog.set_level(logging.INFO, "alkstore.worker")
    q = store.queue("q")
    first = await q.enqueue("first")
    waiting = await q.enqueue("waiting")
    running, release = aio.event(), aio.event()
    ran: list[int] = []

    async def handler(job: Job) -> None:
        ran.append(job.id)
        running.set()
        await release.wait()

    drain, reports = Drain(), []
    async with aio.open_task_group() as group:
        await start(group, q, handler, drain, reports)
        async with aio.fail_after(SOON):
            await running.wait()
        assert (await q.stats()).processing == 2  # the second is claimed ahead, waiting
        assert await q.cancel(waiting) is True
        await wait_until(lambda: f"job {waiting} on q cancelled before it started" in caplog.text)
        release.set()
        await wait_until(lambda: drain.running == 0)
        drain.start()
    report = only(reports)
    assert ran == [first]
    assert (report.started, report.acked, report.cancelled_by_request) == (1, 1, 1)
    assert (report.lost, report.handed_back) == (0, 0)
    assert (await q.stats()).processing == 0


async def test_a_cancel_as_the_handler_finishes_is_counted_once(store: Store) -> None:
    # The handler returns right after the cancel commits: whichever comes
    # first (the worker's look, or the handler's return and its refused
    # ack), the job is counted once, as cancelled.
    q = store.queue("q")
    await q.enqueue_batch(list(range(5)))
    drain, reports = Drain(), []

    async def handler(job: Job) -> None:
        assert await q.cancel(job.id) is True

    async with aio.open_task_group() as group:
        await start(group, q, handler, drain, reports, concurrency=2)
        async with aio.fail_after(SOON):
            while (await q.stats()).ready or (await q.stats()).processing:
                await aio.sleep(0.005)
        await wait_until(lambda: drain.running == 0)
        drain.start()
    report = only(reports)
    assert report.started == 5
    assert report.cancelled_by_request == 5
    assert (report.acked, report.lost, report.retried, report.dead) == (0, 0, 0, 0)


async def test_a_worker_that_missed_the_wake_finds_the_cancel_at_its_heartbeat(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker listens on a channel nobody notifies: only its heartbeat,
    # refused, can tell it; it still counts a cancellation, not a lost claim.
    import alkstore.services.worker.worker as worker_module

    monkeypatch.setattr(worker_module, "cancel_channel", lambda queue: f"deaf:{queue}")
    q = store.queue("q")
    job_id = await q.enqueue("work")
    started, stopped = aio.event(), aio.event()
    drain, reports = Drain(), []
    async with aio.open_task_group() as group:
        await start(group, q, blocking_handler(started, stopped), drain, reports,
                    heartbeat_interval=0.05)  # fmt: skip
        async with aio.fail_after(SOON):
            await started.wait()
        assert await q.cancel(job_id) is True
        clock.advance(1.0)  # the renewal is due: the keeper looks within 0.05 s
        async with aio.fail_after(SOON):
            await stopped.wait()
        drain.now()
    report = only(reports)
    assert (report.cancelled_by_request, report.lost) == (1, 0)


async def test_a_handler_shields_a_critical_section_from_the_cancel(store: Store) -> None:
    # trio: a shielded CancelScope. asyncio: the section as a task, awaited
    # through asyncio.shield and awaited again when the cancel arrives. Either
    # way the section completes, and the handler is cancelled right after it.
    q = store.queue("q")
    job_id = await q.enqueue("work")
    in_section = aio.event()
    completed: list[int] = []
    went_on: list[int] = []

    async def section(job: Job) -> None:
        in_section.set()
        # Until the worker has cancelled the handler (its private mark),
        # then a little longer: the cancel arrives while the section runs.
        await wait_until(lambda: job._observer.ctx.state.held[job.id].revoked)  # type: ignore[union-attr, attr-defined]
        await aio.sleep(0.01)
        completed.append(job.id)

    async def trio_handler(job: Job) -> None:
        with trio.CancelScope(shield=True):
            await section(job)
        await trio.sleep(NEVER)  # the cancel, held back by the shield, lands here
        went_on.append(job.id)

    async def asyncio_handler(job: Job) -> None:
        task = asyncio.ensure_future(section(job))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            await task  # let the section finish, then be cancelled
            raise
        went_on.append(job.id)

    on_trio = sniffio.current_async_library() == "trio"
    drain, reports = Drain(), []
    async with aio.open_task_group() as group:
        await start(group, q, trio_handler if on_trio else asyncio_handler, drain, reports)
        async with aio.fail_after(SOON):
            await in_section.wait()
        assert await q.cancel(job_id) is True
        await wait_until(lambda: drain.running == 0)
        drain.start()
    report = only(reports)
    assert completed == [job_id] and went_on == []
    assert (report.cancelled_by_request, report.lost, report.acked) == (1, 0, 0)


async def test_a_handler_that_raises_after_its_job_was_cancelled_counts_a_cancellation(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wake never comes (a deaf channel), so the handler raises before
    # its worker knows: the retry is refused, and the refusal's check finds
    # the cancel: a cancellation, not a lost claim.
    import alkstore.services.worker.worker as worker_module

    monkeypatch.setattr(worker_module, "cancel_channel", lambda queue: f"deaf:{queue}")
    q = store.queue("q")
    job_id = await q.enqueue("work")
    started, go_on = aio.event(), aio.event()

    async def handler(job: Job) -> None:
        started.set()
        await go_on.wait()
        raise RuntimeError("failed after the cancel")

    drain, reports = Drain(), []
    async with aio.open_task_group() as group:
        await start(group, q, handler, drain, reports)
        async with aio.fail_after(SOON):
            await started.wait()
        assert await q.cancel(job_id) is True
        drain.start(timeout=SOON)  # the running handler may finish: it raises
        go_on.set()
    report = only(reports)
    assert (report.cancelled_by_request, report.lost, report.retried) == (1, 0, 0)


async def test_a_worker_holding_many_jobs_stops_exactly_the_cancelled_ones(store: Store) -> None:
    # One look (one statement) covers every job the worker holds: the two
    # cancelled handlers are cancelled, the two others go on until the drain.
    q = store.queue("q")
    ids = await q.enqueue_batch(list(range(4)))
    started = {job_id: aio.event() for job_id in ids}
    stopped = {job_id: aio.event() for job_id in ids}

    async def handler(job: Job) -> None:
        started[job.id].set()
        try:
            await aio.sleep(NEVER)
        finally:
            stopped[job.id].set()

    drain, reports = Drain(), []
    async with aio.open_task_group() as group:
        await start(group, q, handler, drain, reports, concurrency=4)
        async with aio.fail_after(SOON):
            for job_id in ids:
                await started[job_id].wait()
        assert await q.cancel(ids[1]) is True
        assert await q.cancel(ids[3]) is True
        async with aio.fail_after(SOON):
            await stopped[ids[1]].wait()
            await stopped[ids[3]].wait()
        await aio.sleep(0.05)  # room for a wrong cancel to land
        assert not stopped[ids[0]].is_set() and not stopped[ids[2]].is_set()
        drain.now()
    report = only(reports)
    assert (report.started, report.cancelled_by_request, report.lost) == (4, 2, 0)
    assert (report.handed_back, report.cancelled, report.acked) == (2, 2, 0)

