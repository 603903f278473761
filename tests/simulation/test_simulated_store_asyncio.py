"""Virtual time under asyncio: ``open_simulated`` on ``run_virtual``'s loop.

The trio tests of ``test_simulated_store.py``, on asyncio. The suite runs in
pytest-trio's mode, so these are plain functions that run their own loop.
Each waits through minutes or hours of loop time: a loop whose clock did not
jump would sleep for real, and the watchdog below turns that into a failure
instead of a hang.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import sys
import threading
import time
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import looptime
import pytest

from alkstore import Backoff, Job
from alkstore.io_asyncio.runtime import AsyncioRuntime
from alkstore.protocol.values.errors import UsageError
from alkstore.testing import open_simulated, run_virtual

T = TypeVar("T")
REAL_TIME_BOUND = 30.0


def run(main: Coroutine[Any, Any, T], *, idle_timeout: float | None = None) -> T:
    """``run_virtual(main)``, cancelled after ``REAL_TIME_BOUND`` real seconds."""
    expired = threading.Event()

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def expire() -> None:
            expired.set()
            loop.call_soon_threadsafe(task.cancel)

        # A thread, because the loop's own timers run on the clock under test.
        watchdog = threading.Timer(REAL_TIME_BOUND, expire)
        watchdog.start()
        try:
            return await main
        finally:
            watchdog.cancel()

    try:
        return run_virtual(guarded(), idle_timeout=idle_timeout)
    except asyncio.CancelledError:
        if expired.is_set():
            pytest.fail(f"still running after {REAL_TIME_BOUND} s of real time: no virtual clock?")
        raise


def now() -> float:
    return asyncio.get_running_loop().time()


def test_retries_with_minutes_of_backoff_take_no_real_time() -> None:
    async def main() -> list[float]:
        async with open_simulated() as store:
            q = store.queue(
                "emails", backoff=Backoff.of(base=60, cap=600, jitter=0), max_attempts=5
            )
            attempts: list[float] = []

            async def send(job: Job) -> None:
                attempts.append(now())
                if len(attempts) < 3:
                    raise ConnectionError("smtp down")

            await q.enqueue({"to": "a@example.com"})
            async with asyncio.TaskGroup() as tg:
                worker = tg.create_task(q.work(send))
                while len(attempts) < 3 or (await q.stats()).processing:  # noqa: ASYNC110
                    await asyncio.sleep(1)
                worker.cancel()
            stats = await q.stats()
            assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)
            return attempts

    started = time.monotonic()
    attempts = run(main())
    # Backoff doubles from 60 s: the attempts are 60 s and 120 s apart in
    # loop time, and the job was acked on the third.
    assert [round(b - a) for a, b in itertools.pairwise(attempts)] == [60, 120]
    assert time.monotonic() - started < REAL_TIME_BOUND


def test_visibility_timeout_and_lock_ttl_pass_in_virtual_time() -> None:
    async def main() -> None:
        async with open_simulated() as store:
            q = store.queue("q", visibility_timeout=300)
            await q.enqueue("x")
            first = await q.claim_one("crashed-worker")
            assert first is not None
            await asyncio.sleep(301)
            again = await q.claim_one("other")
            assert again is not None and again.id == first.id and again.attempts == 2
            assert await first.ack() is False
            lock = await store.try_lock("L", "a", ttl=30)
            assert lock is not None and await store.try_lock("L", "b", ttl=30) is None
            await asyncio.sleep(31)
            stolen = await store.try_lock("L", "b", ttl=30)
            assert stolen is not None and stolen.token == lock.token + 1
            assert stolen.expires_at - lock.expires_at == timedelta(seconds=31)

    run(main())


def test_an_hour_of_loop_time_is_an_hour_on_the_store_clock() -> None:
    async def main() -> tuple[float, datetime, datetime]:
        start = datetime(2031, 5, 6, 7, 8, tzinfo=UTC)
        async with open_simulated(start=start) as store:
            t0 = now()
            job_id = await store.queue("q").enqueue("later", delay=3600)
            while (job := await store.queue("q").claim_one("w")) is None:  # noqa: ASYNC110
                await asyncio.sleep(59)
            assert job.id == job_id
            return now() - t0, job.run_at, job.claim_expires_at

    waited, run_at, claim_expires_at = run(main())
    assert 3600 <= waited < 3600 + 59
    assert run_at == datetime(2031, 5, 6, 8, 8, tzinfo=UTC)
    assert claim_expires_at > run_at


def test_same_seed_same_run() -> None:
    async def main(seed: int) -> list[float]:
        async with open_simulated(seed=seed) as store:
            q = store.queue("q", backoff=Backoff.of(base=10, jitter=1.0), max_attempts=4)
            await q.enqueue(1)
            seen: list[float] = []
            for _ in range(3):
                while (job := await q.claim_one("w")) is None:  # noqa: ASYNC110
                    await asyncio.sleep(0.5)
                seen.append(job.claim_expires_at.timestamp())
                await job.retry()
            return seen

    first = run(main(7))
    assert first == run(main(7))
    # The jitter is drawn from the seed: another seed, other retry times.
    assert first != run(main(8))


def test_worker_in_a_task_group_is_cancelled_cleanly() -> None:
    async def main() -> None:
        async with open_simulated(runtime=AsyncioRuntime()) as store:
            q = store.queue("q")
            done: list[int] = []

            async def handle(job: Job) -> None:
                await asyncio.sleep(10)  # slow handler: ten virtual seconds
                done.append(job.payload)

            for n in range(3):
                await q.enqueue(n)
            before = asyncio.all_tasks()
            async with asyncio.TaskGroup() as tg:
                worker = tg.create_task(q.work(handle, concurrency=2))
                while len(done) < 3:  # noqa: ASYNC110
                    await asyncio.sleep(1)
                worker.cancel()
            assert worker.cancelled()
            # The worker's own tasks (runners, sweeper, wake listener) ended with it.
            assert asyncio.all_tasks() == before
            assert sorted(done) == [0, 1, 2]
            assert (await q.stats()).processing == 0

    run(main())


def test_without_looptime_run_virtual_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "looptime", None)  # makes `import looptime` fail

    async def main() -> None:
        raise AssertionError("must not run")

    coro = main()
    with pytest.raises(UsageError, match=r"alkstore\[testing\]"):
        run_virtual(coro)
    # Closed, so Python reports no "never awaited" coroutine on top of the error.
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


def test_idle_timeout_turns_a_deadlock_into_an_error() -> None:
    async def main() -> None:
        # Nothing will ever set it, and no timer is pending: only outside I/O
        # could wake this loop, so it waits in real time, then gives up.
        await asyncio.Event().wait()

    with pytest.raises(looptime.IdleTimeoutError):
        run(main(), idle_timeout=0.2)
