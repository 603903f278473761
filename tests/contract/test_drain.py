"""Rule: a drained worker claims nothing more, hands back at once what it
claimed ahead (claimable by anyone, attempt refunded), lets its running
handlers finish and settles them as usual, cancels and hands back those
still running at the deadline, and ``work`` returns its report; one drain
ends many workers (contract extension: ``Drain``, on every backend).

The drain's deadline is measured on the store's clock, like the worker's
other intervals: these tests move their ``ManualClock`` past it.
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import Drain, Job, ManualClock, Queue, Store, WorkerReport
from alkstore.protocol.machines.worker import WorkerPolicy

from . import aio
from .helpers import SOON, wait_until

NEVER = 60.0


def claim_ahead(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Workers claim ``n`` jobs beyond their free slots, whatever their rate."""
    configure = WorkerPolicy.configure.__func__  # type: ignore[attr-defined]

    def fixed(cls: type[WorkerPolicy], **kwargs: Any) -> WorkerPolicy:
        policy: WorkerPolicy = configure(cls, **kwargs)
        policy.ahead = n
        return policy

    monkeypatch.setattr(WorkerPolicy, "configure", classmethod(fixed))
    monkeypatch.setattr(WorkerPolicy, "_count_finish", lambda self, now_us: None)


async def run_worker(
    q: Queue, handler: Any, drain: Drain, reports: list[WorkerReport], concurrency: int = 1
) -> None:
    report = await q.work(handler, drain=drain, poll_interval=NEVER, concurrency=concurrency)
    reports.append(report)


async def test_a_drained_worker_finishes_its_handler_and_hands_back_what_waits(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim_ahead(monkeypatch, 3)
    q = store.queue("q")
    ids = [await q.enqueue(i) for i in range(4)]
    running, release = aio.event(), aio.event()
    ran: list[int] = []

    async def slow(job: Job) -> None:
        ran.append(job.id)
        running.set()
        await release.wait()

    drain = Drain()
    reports: list[WorkerReport] = []
    async with aio.open_task_group() as group:
        group.start_soon(run_worker, q, slow, drain, reports)
        async with aio.fail_after(SOON):
            await running.wait()
        assert (await q.stats()).processing == 4
        drain.start(timeout=NEVER)
        waiting = [i for i in ids if i not in ran]
        async with aio.fail_after(SOON):
            while (await q.stats()).ready < 3:
                await aio.sleep(0.01)
        taken = await q.claim_batch("other", 10)  # at once, by anyone
        assert sorted(j.id for j in taken) == sorted(waiting)
        assert all(j.attempts == 1 for j in taken)  # the first attempt was refunded
        release.set()
    (report,) = reports  # the group ended by itself
    assert ran == [ids[0]] and await q.get_job(ids[0]) is None  # acked
    assert (report.started, report.acked, report.handed_back, report.cancelled) == (1, 1, 3, 0)


async def test_a_handler_running_past_the_deadline_is_cancelled_and_its_job_returns(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("q")
    job_id = await q.enqueue("stuck")
    started = aio.event()
    cancelled: list[int] = []

    async def stuck(job: Job) -> None:
        started.set()
        try:
            await aio.sleep(3600)
        except BaseException:
            cancelled.append(job.id)
            raise

    drain = Drain()
    reports: list[WorkerReport] = []
    async with aio.open_task_group() as group:
        group.start_soon(run_worker, q, stuck, drain, reports)
        async with aio.fail_after(SOON):
            await started.wait()
        drain.start(timeout=0.1)
        await aio.sleep(0.3)
        assert reports == []  # the store's clock has not moved: still within the deadline
        clock.advance(1)
    assert cancelled == [job_id]
    (report,) = reports
    assert (report.started, report.acked, report.handed_back, report.cancelled) == (1, 0, 1, 1)
    info = await q.get_job(job_id)
    assert info is not None and info.state == "pending" and info.attempts == 0
    job = await q.claim_one("next")
    assert job is not None and job.id == job_id and job.attempts == 1


async def test_one_drain_ends_workers_on_several_queues_and_now_cuts_it_short(
    store: Store,
) -> None:
    queues = [store.queue(name) for name in ("a", "b")]
    ids = [await q.enqueue(q.name) for q in queues]
    started: list[str] = []
    finish_a = aio.event()

    async def handler(job: Job) -> None:
        started.append(job.queue)
        if job.queue == "a":
            await finish_a.wait()
        else:
            await aio.sleep(3600)  # only ``now()`` ends this one

    drain = Drain()
    reports: list[WorkerReport] = []
    async with aio.open_task_group() as group:
        for q in queues:
            group.start_soon(run_worker, q, handler, drain, reports)
        await wait_until(lambda: len(started) == 2)
        assert (drain.workers, drain.running) == (2, 2)
        drain.start()  # no deadline
        finish_a.set()
        await wait_until(lambda: len(reports) == 1)
        assert reports[0].queue == "a" and reports[0].acked == 1
        drain.now()
    assert [r.queue for r in reports] == ["a", "b"]
    assert (reports[1].cancelled, reports[1].handed_back) == (1, 1)
    assert await queues[0].get_job(ids[0]) is None  # acked
    info = await queues[1].get_job(ids[1])
    assert info is not None and info.state == "pending" and info.attempts == 0


async def test_an_outbox_worker_drains_too(store: Store) -> None:
    ob = store.outbox("hooks")
    await ob.enqueue({"n": 1})
    delivered = aio.event()

    async def deliver(payload: Any) -> None:
        delivered.set()

    drain = Drain()
    reports: list[WorkerReport] = []

    async def run() -> None:
        reports.append(await ob.work(deliver, drain=drain, poll_interval=NEVER))

    async with aio.open_task_group() as group:
        group.start_soon(run)
        async with aio.fail_after(SOON):
            await delivered.wait()
        drain.start(timeout=NEVER)
    (report,) = reports
    assert (report.started, report.acked) == (1, 1)  # settled before work returned
    stats = await ob.stats()
    assert (stats.ready, stats.processing) == (0, 0)
