"""The few concurrency tools the contract tests use, on trio and asyncio alike.

A contract test runs on every backend: under trio (pytest-trio) or on an
asyncio event loop (tests/conftest.py). Each tool here asks sniffio which
library is running and does the obvious thing in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import sniffio
import trio
import trio.testing


def _on_trio() -> bool:
    return sniffio.current_async_library() == "trio"


async def sleep(seconds: float) -> None:
    if _on_trio():
        await trio.sleep(seconds)
    else:
        await asyncio.sleep(seconds)


def event() -> trio.Event | asyncio.Event:
    """A trio.Event or an asyncio.Event: set, is_set, wait."""
    return trio.Event() if _on_trio() else asyncio.Event()


@asynccontextmanager
async def fail_after(seconds: float) -> AsyncIterator[None]:
    """The block raises (trio.TooSlowError / TimeoutError) if it runs longer than ``seconds``."""
    if _on_trio():
        with trio.fail_after(seconds):
            yield
    else:
        async with asyncio.timeout(seconds):
            yield


@asynccontextmanager
async def cancel_requested() -> AsyncIterator[None]:
    """The block runs with a cancel already requested (it lands at the block's
    first cancellation point), and execution goes on after it."""
    if _on_trio():
        with trio.CancelScope() as scope:
            scope.cancel()
            yield
        return
    task = asyncio.current_task()
    assert task is not None
    task.cancel()
    try:
        yield
    except asyncio.CancelledError:
        task.uncancel()
        return
    # Not taken in the block: withdraw it so it cannot land later.
    task.uncancel()


@asynccontextmanager
async def move_on_after(seconds: float) -> AsyncIterator[None]:
    """The block is cancelled after ``seconds``, and execution goes on after it."""
    if _on_trio():
        with trio.move_on_after(seconds):
            yield
        return
    try:
        async with asyncio.timeout(seconds) as timeout:
            yield
    except TimeoutError:
        if not timeout.expired():
            raise


async def wait_all_tasks_blocked() -> None:
    """Return once every other task is blocked (on IO, a timer, an event, a thread).

    On asyncio: once the loop, after polling for IO, has nothing else ready to
    run (``loop._ready`` is its run queue; trio's version is the model).
    """
    if _on_trio():
        await trio.testing.wait_all_tasks_blocked()
        return
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(0)
        if not loop._ready:  # type: ignore[attr-defined]
            return


class TaskStatus:
    """What ``TaskGroup.start`` hands an asyncio task as ``task_status``."""

    def __init__(self) -> None:
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def started(self, value: Any = None) -> None:
        self.future.set_result(value)


class TaskGroup:
    """A trio nursery or an asyncio.TaskGroup: start_soon, start and cancel."""

    def __init__(self, nursery: trio.Nursery | None, group: asyncio.TaskGroup | None) -> None:
        self._nursery = nursery
        self._group = group
        self._tasks: list[asyncio.Task[Any]] = []

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(fn, *args)
        else:
            assert self._group is not None
            self._tasks.append(self._group.create_task(fn(*args)))  # type: ignore[arg-type]

    async def start(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Start ``fn(*args, task_status=...)``; return once it calls ``task_status.started()``."""
        if self._nursery is not None:
            return await self._nursery.start(fn, *args)
        assert self._group is not None
        status = TaskStatus()
        task = self._group.create_task(fn(*args, task_status=status))  # type: ignore[arg-type]
        self._tasks.append(task)
        await asyncio.wait([status.future, task], return_when=asyncio.FIRST_COMPLETED)
        if status.future.done():
            return status.future.result()
        task.result()  # its error, if it failed
        raise RuntimeError(f"{fn!r} returned without calling task_status.started()")

    def cancel(self) -> None:
        """Cancel the group's tasks (use it as the body's last statement:
        trio also cancels the rest of the body, asyncio does not)."""
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        for task in self._tasks:
            task.cancel()


@asynccontextmanager
async def open_task_group() -> AsyncIterator[TaskGroup]:
    """A task group that waits for its tasks; a failure comes out as an exception group."""
    if _on_trio():
        async with trio.open_nursery() as nursery:
            yield TaskGroup(nursery, None)
    else:
        async with asyncio.TaskGroup() as group:
            yield TaskGroup(None, group)
