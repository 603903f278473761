"""The runtime seam delivers every cancellation, on trio and asyncio alike.

Invariant: a cancellation that arrives while a task waits on work handed to
the database (a thread's result, a shielded block) is never dropped: the
task gets the work's true result and is cancelled at its next checkpoint.
No database here: these drive ``TrioRuntime``/``AsyncioRuntime`` directly,
cancelling in the exact gap (result resolved, waiter not yet resumed) where
asyncio delivers a cancel request once and only once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from alkstore.io_asyncio.runtime import AsyncioRuntime
from alkstore.io_trio.runtime import TrioRuntime

BOUND = 2.0  # seconds a cancelled task may take to end; it needs milliseconds


def on_asyncio(main: Callable[[AsyncioRuntime], Awaitable[None]]) -> None:
    async def run() -> None:
        await main(AsyncioRuntime())

    asyncio.run(run())


def on_trio(main: Callable[[TrioRuntime], Awaitable[None]]) -> None:
    async def run() -> None:
        await main(TrioRuntime())

    trio.run(run)


async def _asyncio_outcome(task: asyncio.Task[Any]) -> str:
    """How ``task`` ended, waiting at most BOUND: 'cancelled', 'returned',
    'raised <error>', or 'hung'."""
    done, _ = await asyncio.wait([task], timeout=BOUND)
    if not done:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return "hung"
    if task.cancelled():
        return "cancelled"
    error = task.exception()
    return "returned" if error is None else f"raised {error!r}"


# -- a completion resolved just before the cancel lands --------------------------------
def test_asyncio_completion_resolved_then_cancelled_keeps_the_result_and_the_cancel() -> None:
    """The deterministic case of the lost cancel: the thread's result is in,
    the waiter has not resumed, ``Task.cancel()`` lands. The waiter gets the
    result, and the cancel ends the task at its next await."""

    async def main(rt: AsyncioRuntime) -> None:
        done = rt.completion()
        got: list[Any] = []

        async def body() -> None:
            got.append(await done.wait())
            await asyncio.sleep(10)  # the cancel must land here

        task = asyncio.create_task(body())
        await asyncio.sleep(0)  # body waits on the completion
        done.resolve("committed")
        await asyncio.sleep(0)  # the loop sets the result; body not resumed yet
        task.cancel()
        assert await _asyncio_outcome(task) == "cancelled"
        assert got == ["committed"]

    on_asyncio(main)


def test_trio_completion_resolved_then_cancelled_keeps_the_result_and_the_cancel() -> None:
    async def main(rt: TrioRuntime) -> None:
        done = rt.completion()
        got: list[Any] = []
        ended = trio.Event()

        async def body() -> None:
            try:
                got.append(await done.wait())
                await trio.sleep(10)
            finally:
                ended.set()

        with trio.move_on_after(BOUND) as guard:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(body)
                await trio.testing.wait_all_tasks_blocked()
                done.resolve("committed")
                nursery.cancel_scope.cancel()
        assert not guard.cancelled_caught and ended.is_set()
        assert got == ["committed"]

    on_trio(main)


def test_asyncio_thread_result_in_then_cancelled_is_not_lost() -> None:
    """``run_in_thread``: the thread finished and queued its result while the
    loop was busy; the cancel comes next. Same promise as a completion."""

    async def main(rt: AsyncioRuntime) -> None:
        release = threading.Event()
        got: list[Any] = []

        def work() -> str:
            release.wait(5)
            return "done"

        async def body() -> None:
            got.append(await rt.run_in_thread(work))
            await asyncio.sleep(10)

        task = asyncio.create_task(body())
        await asyncio.sleep(0.01)
        release.set()
        time.sleep(0.1)  # noqa: ASYNC251 - block the loop: the result queues behind us
        task.cancel()
        assert await _asyncio_outcome(task) == "cancelled"
        assert got == ["done"]

    on_asyncio(main)


@pytest.mark.parametrize("delay", [0.0, 0.001, 0.005, 0.02])
def test_asyncio_cancel_at_any_moment_of_a_thread_hop_ends_the_task(delay: float) -> None:
    """Whenever the cancel lands (before, during, or just after the hop),
    the task ends; it saw the result only if the hop completed."""

    async def main(rt: AsyncioRuntime) -> None:
        for _ in range(50):
            got: list[Any] = []

            async def body(got: list[Any] = got) -> None:
                got.append(await rt.run_in_thread(lambda: time.sleep(0.002) or 1))
                await asyncio.sleep(10)

            task = asyncio.create_task(body())
            await asyncio.sleep(delay)
            task.cancel()
            assert await _asyncio_outcome(task) == "cancelled"

    on_asyncio(main)


def test_asyncio_a_redelivered_cancel_that_lands_in_the_next_hop_is_passed_on() -> None:
    """The cancel absorbed by one hop is delivered again; if that lands in
    the next hop (two operations in a row), it is absorbed and passed on
    again, until it reaches the task's own code."""

    async def main(rt: AsyncioRuntime) -> None:
        hops: list[int] = []

        async def body() -> None:
            for n in range(3):
                await rt.run_in_thread(lambda: time.sleep(0.02))
                hops.append(n)
            await asyncio.sleep(10)

        task = asyncio.create_task(body())
        await asyncio.sleep(0.005)
        task.cancel()
        assert await _asyncio_outcome(task) == "cancelled"
        assert hops == [0, 1, 2]

    on_asyncio(main)


# -- a timeout that passed while the work completed ------------------------------------
def test_asyncio_timeout_over_completed_work_leaves_no_stray_cancel() -> None:
    """``asyncio.timeout`` expired during the hop, but the work completed and
    the block ended normally, so the timeout withdrew its cancel. Nothing may
    cancel the task later on its behalf."""

    async def main(rt: AsyncioRuntime) -> None:
        async with asyncio.timeout(0.01):
            value = await rt.run_in_thread(lambda: time.sleep(0.05) or "late")
        assert value == "late"
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0.05)  # a stray cancel would land here

    on_asyncio(main)


# -- shield(): the block is protected, a cancel arriving inside lands after ------------
def _signal_later(rt: Any, signal: Any, seconds: float, *, trio_token: Any = None) -> None:
    def fire() -> None:
        time.sleep(seconds)
        if trio_token is not None:
            trio_token.run_sync_soon(signal.set)
        else:
            loop.call_soon_threadsafe(signal.set)

    loop = None if trio_token is not None else asyncio.get_running_loop()
    threading.Thread(target=fire, daemon=True).start()


@pytest.mark.parametrize("wait", ["sleep", "signal", "readable"])
def test_asyncio_shield_protects_its_waits_from_a_first_cancel(wait: str) -> None:
    """A cancel that first arrives inside ``shield()`` (the worker settling a
    finished job when shutdown starts) does not cut the block's waits short:
    the block finishes, then the task is cancelled at its next await."""

    async def main(rt: AsyncioRuntime) -> None:
        steps: list[str] = []
        rfd, wfd = os.pipe()
        try:

            async def body() -> None:
                with rt.shield():
                    if wait == "sleep":
                        await rt.sleep(0.1)
                    elif wait == "signal":
                        signal = rt.signal()
                        asyncio.get_running_loop().call_later(0.1, signal.set)
                        assert await rt.wait_signal(signal, None)
                    else:
                        asyncio.get_running_loop().call_later(0.1, os.write, wfd, b"x")
                        assert await rt.wait_readable(rfd, None)
                    steps.append("block finished")
                steps.append("after block")
                await asyncio.sleep(10)
                steps.append("not cancelled")

            task = asyncio.create_task(body())
            await asyncio.sleep(0.02)
            task.cancel()
            assert await _asyncio_outcome(task) == "cancelled"
            assert steps == ["block finished", "after block"]
        finally:
            os.close(rfd)
            os.close(wfd)

    on_asyncio(main)


def test_asyncio_shield_timeout_still_bounds_the_block() -> None:
    """A shielded block with a timeout gives up when it passes, says so in
    ``cancelled_caught``, and the caller's cancel still lands afterwards."""

    async def main(rt: AsyncioRuntime) -> None:
        caught: list[bool] = []

        async def body() -> None:
            with rt.shield(0.1) as scope:
                await rt.sleep(10)
            caught.append(scope.cancelled_caught)
            await asyncio.sleep(10)

        task = asyncio.create_task(body())
        await asyncio.sleep(0.02)
        task.cancel()
        started = time.monotonic()
        assert await _asyncio_outcome(task) == "cancelled"
        assert caught == [True]
        assert time.monotonic() - started < 1.0

    on_asyncio(main)


def test_asyncio_cancel_scope_that_cancelled_a_finished_body_leaves_no_stray_cancel() -> None:
    """A scope cancelled (a lost lock, say) just as its body finished work
    handed to a thread: the body ends normally, and leaving the scope takes
    the request back, so the task is not cancelled later on the scope's
    behalf."""

    async def main(rt: AsyncioRuntime) -> None:
        with rt.cancel_scope() as scope:
            loop = asyncio.get_running_loop()
            loop.call_later(0.01, scope.cancel)
            value = await rt.run_in_thread(lambda: time.sleep(0.05) or "ok")
        assert value == "ok"
        await asyncio.sleep(0.05)  # a stray cancel would land here
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0

    on_asyncio(main)


# -- an operation starts with a cancellation point -------------------------------------
def test_cancel_point_raises_a_pending_cancel_on_both_drivers() -> None:
    """A loop of operations that all complete in a shielded wait must still
    be cancellable: each operation begins with ``cancel_point()``."""

    async def asyncio_main(rt: AsyncioRuntime) -> None:
        count = 0

        async def loop_forever() -> None:
            nonlocal count
            while True:
                await rt.cancel_point()
                await rt.run_in_thread(lambda: None)
                count += 1

        task = asyncio.create_task(loop_forever())
        await asyncio.sleep(0.05)
        task.cancel()
        assert await _asyncio_outcome(task) == "cancelled"
        assert count > 0

    async def trio_main(rt: TrioRuntime) -> None:
        done = trio.Event()

        async def loop_forever() -> None:
            try:
                while True:
                    await rt.cancel_point()
                    c = rt.completion()
                    trio.lowlevel.current_trio_token().run_sync_soon(c.resolve, None)
                    await c.wait()
            finally:
                done.set()

        with trio.move_on_after(BOUND):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(loop_forever)
                await trio.sleep(0.05)
                nursery.cancel_scope.cancel()
        assert done.is_set()

    on_asyncio(asyncio_main)
    on_trio(trio_main)
