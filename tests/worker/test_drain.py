"""``Drain``: ending ``Queue.work`` gracefully, driven with trio itself.

The points proved: a drain stops claims at once, hands back at once what
was claimed ahead (claimable by another worker straight away, attempt
refunded), lets running handlers finish and settles them as usual, cancels
and hands back those still running at the deadline, and ``work`` then
returns its report instead of raising; one drain ends many workers, and
nothing is lost or settled twice on the way.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio

from alkstore import Backoff, Drain, InvalidArgument, Job, Queue, Store, WorkerReport
from alkstore.protocol.machines.worker import WorkerPolicy
from tests.backends import BACKENDS, Backend, selected_backends

from .test_work import NEVER, SOON, record_acks, until, wait_for


@pytest.fixture(params=selected_backends(driver="trio"))
def backend(request: pytest.FixtureRequest) -> Backend:
    """These tests drive workers with trio itself: the trio backends only."""
    return BACKENDS[request.param]


@pytest.fixture
async def store(backend: Backend, location: str) -> Any:
    async with backend.open(location, clock=None) as s:
        yield s


def claim_ahead(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """Workers claim ``n`` jobs beyond their free slots, whatever their rate
    (the rate that sets it in real use is not what these tests are about)."""
    configure = WorkerPolicy.configure.__func__  # type: ignore[attr-defined]

    def fixed(cls: type[WorkerPolicy], **kwargs: Any) -> WorkerPolicy:
        policy: WorkerPolicy = configure(cls, **kwargs)
        policy.ahead = n
        return policy

    monkeypatch.setattr(WorkerPolicy, "configure", classmethod(fixed))
    monkeypatch.setattr(WorkerPolicy, "_count_finish", lambda self, now_us: None)


async def run_worker(
    q: Queue, handler: Any, drain: Drain, reports: list[WorkerReport], **options: Any
) -> None:
    reports.append(await q.work(handler, drain=drain, poll_interval=NEVER, **options))


async def test_a_drain_lets_the_running_handler_finish_and_hands_back_what_waits(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    claim_ahead(monkeypatch, 4)
    acks = record_acks(monkeypatch)
    q = store.queue("w")
    ids = [await q.enqueue(i) for i in range(5)]
    running = trio.Event()
    release = trio.Event()
    ran: list[int] = []

    async def slow(job: Job) -> None:
        ran.append(job.id)
        running.set()
        await release.wait()

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_worker, q, slow, drain, reports)
        with trio.fail_after(SOON):
            await running.wait()
        assert (await q.stats()).processing == 5  # one running, four claimed ahead
        assert drain.workers == 1 and drain.running == 1
        drain.start(timeout=NEVER)
        # The four claimed ahead are back at once, attempt refunded, while the
        # handler still runs: another worker can take them now.
        waiting = [i for i in ids if i not in ran]

        async def handed_back() -> bool:
            infos = [await q.get_job(i) for i in waiting]
            return all(i is not None and i.state == "pending" for i in infos)

        await until(handed_back)
        infos = [await q.get_job(i) for i in waiting]
        assert all(i is not None and i.attempts == 0 for i in infos)
        taken = await q.claim_batch("other", 10)
        assert sorted(j.id for j in taken) == sorted(waiting)
        release.set()
    # The nursery ended by itself: the worker returned once its handler was done.
    (report,) = reports
    assert ran == [ids[0]]
    assert await q.get_job(ids[0]) is None  # acked, not handed back
    assert [job_id for job_id, _, owned in acks if owned] == [ids[0]]
    assert (report.started, report.acked, report.handed_back, report.cancelled) == (1, 1, 4, 0)
    assert (report.retried, report.dead, report.lost) == (0, 0, 0)


async def test_a_handler_still_running_at_the_deadline_is_cancelled_and_its_job_returns(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    acks = record_acks(monkeypatch)
    q = store.queue("w")
    job_id = await q.enqueue("stuck")
    started = trio.Event()
    cancelled: list[int] = []

    async def stuck(job: Job) -> None:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(job.id)
            raise

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_worker, q, stuck, drain, reports)
        with trio.fail_after(SOON):
            await started.wait()
        drain.start(timeout=0.2)
    assert cancelled == [job_id]
    info = await q.get_job(job_id)
    assert info is not None and info.state == "pending" and info.attempts == 0
    assert info.claimed_by is None
    (report,) = reports
    assert (report.started, report.acked, report.handed_back, report.cancelled) == (1, 0, 1, 1)
    assert acks == []
    job = await q.claim_one("next")  # claimable at once
    assert job is not None and job.id == job_id and job.attempts == 1


async def test_now_stops_at_once_whatever_the_timeout(store: Store) -> None:
    q = store.queue("w")
    ids = [await q.enqueue(i) for i in range(2)]
    started: list[int] = []

    async def stuck(job: Job) -> None:
        started.append(job.id)
        await trio.sleep_forever()

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(run_worker, q, stuck, drain, reports, concurrency=2))
        await wait_for(lambda: len(started) == 2)
        drain.start()  # no deadline: the handlers would be waited for forever
        await trio.sleep(0.1)
        assert reports == [] and drain.running == 2
        drain.now()  # the second Ctrl-C
        await wait_for(lambda: bool(reports))
    assert drain.forced and reports[0].cancelled == 2
    for job_id in ids:
        info = await q.get_job(job_id)
        assert info is not None and info.state == "pending" and info.attempts == 0


async def test_one_drain_ends_workers_on_several_queues_together(store: Store) -> None:
    queues = [store.queue(name) for name in ("a", "b", "c")]
    for q in queues:
        await q.enqueue(q.name)
    started: list[str] = []
    finish = trio.Event()

    async def handler(job: Job) -> None:
        started.append(job.queue)
        await finish.wait()

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        for q in queues:
            nursery.start_soon(run_worker, q, handler, drain, reports)
        await wait_for(lambda: len(started) == 3)
        assert drain.workers == 3 and drain.running == 3
        drain.start(timeout=NEVER)
        await trio.sleep(0.1)
        assert reports == []  # still waiting for their handlers
        finish.set()
    assert sorted(r.queue for r in reports) == ["a", "b", "c"]
    assert all(r.acked == 1 and r.cancelled == 0 for r in reports)
    assert drain.workers == 0
    for q in queues:
        stats = await q.stats()
        assert (stats.ready, stats.processing) == (0, 0)


async def test_a_draining_worker_claims_nothing_new(store: Store) -> None:
    q = store.queue("w")
    await q.enqueue("first")
    started = trio.Event()
    finish = trio.Event()
    seen: list[Any] = []

    async def handler(job: Job) -> None:
        seen.append(job.payload)
        started.set()
        await finish.wait()

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(run_worker, q, handler, drain, reports, concurrency=2))
        with trio.fail_after(SOON):
            await started.wait()
        drain.start(timeout=NEVER)
        later = await q.enqueue("later")  # wakes the worker; a free slot waits
        await trio.sleep(0.2)
        finish.set()
    assert seen == ["first"]
    info = await q.get_job(later)
    assert info is not None and info.state == "pending" and info.attempts == 0


async def test_a_handler_that_fails_while_draining_is_retried_not_handed_back(
    store: Store,
) -> None:
    q = store.queue("w", backoff=Backoff.of(base=60, cap=60))
    job_id = await q.enqueue("x")
    started = trio.Event()
    finish = trio.Event()

    async def failing(job: Job) -> None:
        started.set()
        await finish.wait()
        raise ValueError("late")

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_worker, q, failing, drain, reports)
        with trio.fail_after(SOON):
            await started.wait()
        drain.start(timeout=NEVER)
        finish.set()
    info = await q.get_job(job_id)
    assert info is not None and info.state == "pending" and info.attempts == 1  # counted
    assert info.last_error == "ValueError: late"
    (report,) = reports
    assert (report.retried, report.handed_back, report.cancelled) == (1, 0, 0)


async def test_a_worker_given_a_started_drain_returns_at_once_having_claimed_nothing(
    store: Store,
) -> None:
    q = store.queue("w")
    job_id = await q.enqueue("x")
    drain = Drain()
    drain.start(timeout=5)

    async def handler(job: Job) -> None:
        raise AssertionError("never run")

    with trio.fail_after(SOON):
        report = await q.work(handler, drain=drain, poll_interval=NEVER)
    assert report == WorkerReport(queue="w", worker_id=report.worker_id)
    info = await q.get_job(job_id)
    assert info is not None and info.state == "pending" and info.attempts == 0


async def test_cancelling_a_worker_with_a_drain_still_raises(store: Store) -> None:
    """A drain adds a way to stop; cancellation stays what it was."""
    q = store.queue("w")

    async def handler(job: Job) -> None:
        pass

    drain = Drain()
    with trio.move_on_after(0.2) as scope:
        await q.work(handler, drain=drain, poll_interval=NEVER)
    assert scope.cancelled_caught
    assert drain.workers == 0


def test_a_drain_refuses_a_bad_timeout() -> None:
    drain = Drain()
    for bad in (-1, float("nan"), "30", True):
        with pytest.raises(InvalidArgument):
            drain.start(bad)  # type: ignore[arg-type]
    assert not drain.started


@pytest.mark.parametrize("timeout", [NEVER, 0.05], ids=["handlers-finish", "deadline-passes"])
async def test_after_a_drain_every_job_is_acked_once_or_pending_with_no_attempt_used(
    store: Store, monkeypatch: pytest.MonkeyPatch, timeout: float
) -> None:
    """Invariant: a drain loses nothing and settles nothing twice, whenever it lands."""
    claim_ahead(monkeypatch, 16)
    acks = record_acks(monkeypatch)
    q = store.queue("w")
    ids = await q.enqueue_batch(list(range(300)))
    started: list[int] = []

    stuck = timeout < 1  # then some handlers never finish by themselves

    async def handler(job: Job) -> None:
        started.append(job.id)
        if stuck and job.id % 5 == 0:
            await trio.sleep_forever()
        await trio.sleep(0.002 * (job.id % 7))

    drain = Drain()
    reports: list[WorkerReport] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(run_worker, q, handler, drain, reports, concurrency=8))
        await wait_for(lambda: len(started) >= 20)
        drain.start(timeout=timeout)
    acked = [job_id for job_id, _, owned in acks if owned]
    assert len(acked) == len(set(acked))
    left = {i: await q.get_job(i) for i in ids if i not in set(acked)}
    assert all(info is not None and info.state == "pending" for info in left.values())
    assert all(info is not None and info.attempts == 0 for info in left.values())
    (report,) = reports
    assert report.acked == len(acked) and report.lost == 0
    assert report.started == report.acked + report.cancelled
    assert report.acked + len(left) == len(ids)
    assert (report.cancelled > 0) == stuck
