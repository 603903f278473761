"""``Queue.work``: the worker runtime, on the real clock.

Every "within" bound is generous (seconds) so a loaded machine passes; the
points being proved are orders of magnitude apart from those bounds (a 60 s
poll interval against a 2-5 s deadline, a 300 s visibility timeout against
an immediate hand-back).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio

from alkstore import Backoff, Job, Queue, Rate, Store
from tests.backends import BACKENDS, Backend, selected_backends

SOON = 5.0  # upper bound for anything that must happen "promptly"
NEVER = 60.0  # a poll interval no test may rely on

Handler = Callable[[Job], Awaitable[Any]]


async def start_worker(
    nursery: trio.Nursery, q: Queue, handler: Handler, **options: Any
) -> trio.CancelScope:
    """``nursery.start(q.work, ...)`` in a scope of its own; returns the scope
    that stops this worker alone."""
    scope = trio.CancelScope()

    async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await q.work(handler, task_status=task_status, **options)

    await nursery.start(run)
    return scope


async def wait_for(predicate: Callable[[], bool], timeout: float = SOON) -> None:
    """Wait (real time) until ``predicate()`` holds."""
    with trio.fail_after(timeout):
        while True:
            if predicate():
                return
            await trio.sleep(0.005)


async def until(check: Callable[[], Awaitable[bool]], timeout: float = SOON) -> None:
    """Wait (real time) until ``await check()`` holds, looking every 10 ms."""
    with trio.fail_after(timeout):
        while True:
            if await check():
                return
            await trio.sleep(0.01)


async def gone(q: Queue, *job_ids: int) -> bool:
    """Every job acked (or cancelled): no live or dead row left."""
    return all([await q.get_job(i) is None for i in job_ids])


def record_acks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, bool]]:
    """Every ack the worker makes: (job id, worker id, still owned). The
    worker acks in batches through ``ack_many``; this wraps that plan."""
    import alkstore.services.worker.settler as worker_module

    acks: list[tuple[int, str, bool]] = []
    real = worker_module.ack_many

    def recording(d: Any, worker: str, jobs: Any, now_us: int, **options: Any) -> Any:
        acked = yield from real(d, worker, jobs, now_us, **options)
        acks.extend((j.id, worker, j.id in acked) for j in jobs)
        return acked

    monkeypatch.setattr(worker_module, "ack_many", recording)
    return acks


@pytest.fixture(params=selected_backends(driver="trio"))
def backend(request: pytest.FixtureRequest) -> Backend:
    """These tests drive workers with trio itself: the trio backends only."""
    return BACKENDS[request.param]


@pytest.fixture
async def store(backend: Backend, location: str) -> Any:
    async with backend.open(location, clock=None) as s:
        yield s


# -- processing, acking, retrying ---------------------------------------------------
async def test_processes_jobs_and_acks_on_return(store: Store) -> None:
    q = store.queue("w")
    ids = [await q.enqueue({"n": i}) for i in range(5)]
    seen: list[int] = []

    async def handler(job: Job) -> None:
        seen.append(job.payload["n"])

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await wait_for(lambda: len(seen) == 5)
        await until(lambda: gone(q, *ids))  # acked: the live rows are gone
        scope.cancel()
    assert sorted(seen) == [0, 1, 2, 3, 4]
    stats = await q.stats()
    assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)


async def test_an_exception_retries_with_backoff_and_records_the_error(store: Store) -> None:
    q = store.queue("w", max_attempts=5, backoff=Backoff.of(base=0.01, cap=0.05))
    job_id = await q.enqueue("x")
    attempts: list[int] = []

    async def handler(job: Job) -> None:
        attempts.append(job.attempts)
        if job.attempts < 3:
            raise ValueError(f"boom {job.attempts}")

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await wait_for(lambda: len(attempts) >= 2)
        await wait_for(lambda: len(attempts) == 3)
        await until(lambda: gone(q, job_id))
        scope.cancel()
    assert attempts == [1, 2, 3]


async def test_a_retried_job_keeps_its_last_error(store: Store) -> None:
    q = store.queue("w", max_attempts=5, backoff=Backoff.of(base=0.01, cap=0.05))
    job_id = await q.enqueue("x")
    failed = trio.Event()

    async def handler(job: Job) -> None:
        if job.attempts == 1:
            failed.set()
            raise KeyError("first-try")
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        with trio.fail_after(SOON):
            await failed.wait()
            while True:
                info = await q.get_job(job_id)
                assert info is not None
                if info.attempts == 2:
                    break
                await trio.sleep(0.01)
        assert info.last_error is not None and "first-try" in info.last_error
        assert "KeyError" in info.last_error
        scope.cancel()


async def test_dead_letters_after_max_attempts(store: Store) -> None:
    q = store.queue("w", max_attempts=3, backoff=Backoff.of(base=0.01, cap=0.05))
    job_id = await q.enqueue("x")
    calls = 0

    async def handler(job: Job) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError(f"always fails ({job.attempts})")

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await until(lambda: _has_dead(q))
        await trio.sleep(0.2)  # it is not run again
        scope.cancel()
    assert calls == 3
    (dead,) = await q.dead_letters()
    assert dead.id == job_id and dead.state == "dead" and dead.dead_reason == "max_attempts"
    assert dead.attempts == 3
    assert dead.last_error is not None and "always fails (3)" in dead.last_error
    info = await q.get_job(job_id)
    assert info is not None and info.state == "dead"
    # Each attempt the handler raised on is in the job's history, with the
    # worker's id, its duration and the handler's own frame in its trace.
    history = info.attempt_history
    assert [(a.attempt, a.outcome) for a in history] == [
        (1, "retried"), (2, "retried"), (3, "max_attempts"),
    ]  # fmt: skip
    for a in history:
        assert a.error == f"RuntimeError: always fails ({a.attempt})"
        assert a.trace is not None and "in handler" in a.trace
        assert a.trace.rstrip().endswith(a.error)
        assert a.worker is not None and a.worker == history[0].worker
        assert a.duration is not None and timedelta(0) <= a.duration < timedelta(seconds=SOON)


async def _has_dead(q: Queue) -> bool:
    return bool(await q.dead_letters())


@pytest.mark.parametrize("how", ["fail", "retry", "ack"])
async def test_a_handler_may_settle_its_job_itself(store: Store, how: str) -> None:
    q = store.queue("w", visibility_timeout=0.3)
    job_id = await q.enqueue("x")
    finished: list[str] = []

    async def handler(job: Job) -> None:
        if how == "fail":
            assert await job.fail("bad input") is True
        elif how == "retry":
            assert await job.retry(delay=60, error="later") is True
        else:
            assert await job.ack() is True
        # Working on after settling, past several heartbeats: not cancelled
        # (its claim is gone, but not lost to anyone).
        await trio.sleep(0.4)
        finished.append(how)

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await wait_for(lambda: bool(finished))
        await trio.sleep(0.1)
        scope.cancel()
    info = await q.get_job(job_id)
    if how == "fail":
        assert info is not None and info.state == "dead" and info.dead_reason == "failed"
        assert info.last_error == "bad input"
    elif how == "retry":
        assert info is not None and info.state == "pending" and info.attempts == 1
        assert info.run_at > datetime.now(UTC) + timedelta(seconds=30)
    else:
        assert info is None


# -- concurrency ---------------------------------------------------------------------
@pytest.mark.parametrize("concurrency", [1, 4])
async def test_never_more_than_concurrency_handlers_at_once(store: Store, concurrency: int) -> None:
    q = store.queue("w")
    await q.enqueue_batch([{"n": i} for i in range(24)])
    running = 0
    peak = 0
    done = 0

    async def handler(job: Job) -> None:
        nonlocal running, peak, done
        running += 1
        peak = max(peak, running)
        try:
            await trio.sleep(0.02)
        finally:
            running -= 1
        done += 1

    async with trio.open_nursery() as nursery:
        scope = await start_worker(
            nursery, q, handler, concurrency=concurrency, poll_interval=NEVER
        )
        await wait_for(lambda: done == 24, timeout=20)
        scope.cancel()
    assert peak == concurrency
    assert (await q.stats()).processing == 0


# -- heartbeats ------------------------------------------------------------------------
async def test_a_long_job_is_heartbeaten_and_acked_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = store.queue("w", visibility_timeout=0.3)
    job_id = await q.enqueue("long")
    runs: list[str] = []
    finished = trio.Event()
    acks = record_acks(monkeypatch)

    async def handler(job: Job) -> None:
        runs.append(job.worker_id)
        await trio.sleep(1.0)
        finished.set()

    stolen: list[Job] = []
    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, worker_id="w1", poll_interval=NEVER)
        await wait_for(lambda: bool(runs))
        # A second worker on the same queue, and a thief claiming by hand,
        # both try for the job throughout: neither may get it.
        other = await start_worker(nursery, q, handler, worker_id="w2", poll_interval=0.05)
        with trio.fail_after(SOON):
            while not finished.is_set():
                job = await q.claim_one("thief")
                if job is not None:
                    stolen.append(job)
                await trio.sleep(0.05)
        await until(lambda: gone(q, job_id))
        scope.cancel()
        other.cancel()
    assert stolen == []
    assert runs == ["w1"]
    assert acks == [(job_id, "w1", True)]  # its claim held for the whole second


# -- wakes, due times, polling ------------------------------------------------------------
async def test_an_enqueue_wakes_an_idle_worker_without_polling(store: Store) -> None:
    q = store.queue("w")
    done: list[float] = []

    async def handler(job: Job) -> None:
        done.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await trio.sleep(0.3)  # idle: it claimed nothing and went to sleep
        for _ in range(3):
            start = trio.current_time()
            await q.enqueue("now")
            await wait_for(lambda: len(done) > 0, timeout=SOON)
            assert done[-1] - start < 2.0
            done.clear()
            await trio.sleep(0.1)
        scope.cancel()


@pytest.mark.parametrize("enqueue_first", [True, False])
async def test_a_delayed_job_runs_when_due_without_a_wake(
    store: Store, enqueue_first: bool
) -> None:
    q = store.queue("w")
    done: list[float] = []

    async def handler(job: Job) -> None:
        done.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        start = trio.current_time()
        if enqueue_first:
            await q.enqueue("later", delay=0.3)
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        if not enqueue_first:
            await trio.sleep(0.1)
            start = trio.current_time()
            await q.enqueue("later", delay=0.3)
        await wait_for(lambda: bool(done), timeout=SOON)
        scope.cancel()
    assert 0.29 <= done[0] - start < 3.0


async def test_a_lapsed_claim_is_reclaimed_when_it_falls_due(store: Store) -> None:
    """A job whose worker vanished is taken again once its claim lapses,
    with no wake and no poll: the worker sleeps until the claim's expiry."""
    q = store.queue("w", visibility_timeout=0.4)
    job_id = await q.enqueue("orphan")
    assert await q.claim_one("vanished") is not None  # and never settled
    done: list[int] = []

    async def handler(job: Job) -> None:
        done.append(job.attempts)

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await wait_for(lambda: bool(done), timeout=SOON)
        scope.cancel()
    assert done == [2]
    assert await q.get_job(job_id) is None


@pytest.mark.parametrize("per_key", [False, True])
async def test_a_rate_limited_worker_sleeps_until_the_rate_admits_more(
    store: Store, per_key: bool
) -> None:
    """Jobs held back by a rate (the queue's, or their key's) are taken as
    the window opens, with no wake and no poll: 6 jobs at 2 per 0.5 s take
    at least 1 s, and finish well before the 60 s poll interval."""
    q = store.queue("w")
    rate = Rate(2, per=0.5)
    await q.set_limits(rate_per_key=rate) if per_key else await q.set_limits(rate=rate)
    await q.enqueue_batch([{"i": i} for i in range(6)], concurrency_key="k")
    done: list[float] = []

    async def handler(job: Job) -> None:
        done.append(trio.current_time())

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
        await wait_for(lambda: len(done) == 6, timeout=SOON)
        scope.cancel()
    assert done[-1] - start >= 0.95  # three windows: claims at 0, 0.5 and 1 s


# -- shutdown ---------------------------------------------------------------------------
async def test_cancellation_hands_running_jobs_back_at_once(store: Store) -> None:
    q = store.queue("w")  # visibility timeout 300 s: waiting it out would fail
    ids = [await q.enqueue({"n": i}) for i in range(3)]
    started: list[int] = []
    cancelled: list[int] = []

    async def blocking(job: Job) -> None:
        started.append(job.id)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(job.id)
            raise

    taken: list[int] = []

    async def other_handler(job: Job) -> None:
        taken.append(job.id)

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, blocking, concurrency=3, poll_interval=NEVER)
        await wait_for(lambda: len(started) == 3)
        # Another worker, idle now (everything is claimed), sleeping for long.
        other = await start_worker(nursery, q, other_handler, poll_interval=NEVER)
        await trio.sleep(0.1)
        assert taken == []
        scope.cancel()
        await wait_for(lambda: len(cancelled) == 3)
        # ... is woken by the hand-back and takes the jobs at once.
        await wait_for(lambda: len(taken) == 3, timeout=SOON)
        other.cancel()
    assert sorted(taken) == sorted(ids)
    assert sorted(cancelled) == sorted(ids)


async def test_handed_back_jobs_are_pending_with_attempts_refunded(store: Store) -> None:
    q = store.queue("w")
    ids = [await q.enqueue({"n": i}) for i in range(3)]
    started: list[int] = []

    async def blocking(job: Job) -> None:
        started.append(job.id)
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, blocking, concurrency=2, poll_interval=NEVER)
        await wait_for(lambda: len(started) == 2)
        running = [await q.get_job(i) for i in started]
        assert all(r is not None and r.state == "processing" for r in running)
        scope.cancel()
    for job_id in ids:
        info = await q.get_job(job_id)
        assert info is not None
        assert info.state == "pending" and info.attempts == 0 and info.claimed_by is None
    # claimable right now by anyone
    jobs = await q.claim_batch("next", 3)
    assert sorted(j.id for j in jobs) == sorted(ids)
    assert all(j.attempts == 1 for j in jobs)


async def test_a_worker_stops_claiming_when_cancelled(store: Store) -> None:
    q = store.queue("w")
    seen: list[int] = []

    async def handler(job: Job) -> None:
        seen.append(job.id)

    async with trio.open_nursery() as nursery:
        scope = await start_worker(nursery, q, handler, poll_interval=0.01)
        await q.enqueue("one")
        await wait_for(lambda: len(seen) == 1)
        scope.cancel()
    await q.enqueue("two")
    await trio.sleep(0.2)
    assert len(seen) == 1
    assert (await q.stats()).ready == 1


@pytest.mark.parametrize("raises", [False, True], ids=["returns", "raises"])
async def test_a_job_finished_as_shutdown_begins_is_settled_not_handed_back(
    store: Store, raises: bool
) -> None:
    q = store.queue("w", backoff=Backoff.of(base=60, cap=60))
    job_id = await q.enqueue("x")
    stop: list[trio.CancelScope] = []

    async def handler(job: Job) -> None:
        await wait_for(lambda: bool(stop))
        stop[0].cancel()  # shutdown begins just as the handler finishes
        if raises:
            raise ValueError("late")

    async with trio.open_nursery() as nursery:
        stop.append(await start_worker(nursery, q, handler, poll_interval=NEVER))
    info = await q.get_job(job_id)
    if not raises:
        assert info is None  # acked: a hand-back would have it run again
        return
    # retried: the attempt counts and the backoff applies (a hand-back would
    # refund the attempt and make it due at once)
    assert info is not None and info.state == "pending" and info.attempts == 1
    assert info.last_error == "ValueError: late"
    assert info.run_at > datetime.now(UTC) + timedelta(seconds=20)


# -- losing a claim --------------------------------------------------------------------
async def test_a_handler_whose_job_is_cancelled_is_stopped_and_does_not_ack(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = store.queue("w")
    acks = record_acks(monkeypatch)
    victim = await q.enqueue("victim")
    started = trio.Event()
    stopped: list[int] = []
    later: list[int] = []

    async def handler(job: Job) -> None:
        if job.id != victim:
            later.append(job.id)
            return
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            stopped.append(job.id)
            raise

    async with trio.open_nursery() as nursery:
        scope = await start_worker(
            nursery, q, handler, poll_interval=NEVER, heartbeat_interval=0.05
        )
        with trio.fail_after(SOON):
            await started.wait()
        assert await q.cancel(victim) is True  # taken away from the worker
        await wait_for(lambda: stopped == [victim])
        # The worker carries on with other work.
        nxt = await q.enqueue("next")
        await wait_for(lambda: later == [nxt])
        scope.cancel()
    assert [job_id for job_id, _, _ in acks] == [nxt]


async def test_a_handler_whose_claim_lapses_is_stopped_and_the_job_goes_elsewhere(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = store.queue("w", visibility_timeout=0.3)
    acks = record_acks(monkeypatch)
    job_id = await q.enqueue("slow")
    started = trio.Event()
    stopped = trio.Event()

    async def handler(job: Job) -> None:
        started.set()
        try:
            await trio.sleep(30)  # far beyond the claim
        except trio.Cancelled:
            stopped.set()
            raise

    async with trio.open_nursery() as nursery:
        # Heartbeats far apart: the claim lapses while the handler runs.
        scope = await start_worker(
            nursery, q, handler, worker_id="slow", poll_interval=NEVER, heartbeat_interval=10
        )
        with trio.fail_after(SOON):
            await started.wait()
            await stopped.wait()  # cancelled once its claim lapsed
        rescued: list[Job] = []

        async def rescue() -> bool:
            job = await q.claim_one("rescuer")
            if job is not None:
                rescued.append(job)
            return job is not None

        await until(rescue)
        (job,) = rescued
        assert job.id == job_id and job.attempts == 2
        assert await job.ack() is True
        await trio.sleep(0.1)
        scope.cancel()
    assert acks == []  # the worker whose claim lapsed never acked (the rescuer did, above)
