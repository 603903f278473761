"""The trio side of the runtime seam."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, TypeVar

import trio

from ..runner.runtime import unwrapped_task_group

T = TypeVar("T")


class _Nursery:
    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._nursery.start_soon(fn, *args)

    def cancel(self) -> None:
        self._nursery.cancel_scope.cancel()


class _Completion:
    __slots__ = ("_done", "_error", "_token", "_value")

    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._done = trio.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def resolve(self, value: Any) -> None:
        self._value = value
        self._token.run_sync_soon(self._done.set)

    def reject(self, error: BaseException) -> None:
        self._error = error
        self._token.run_sync_soon(self._done.set)

    async def wait(self) -> Any:
        with trio.CancelScope(shield=True):
            await self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


async def _wait_fd(
    wait: Callable[[int], Awaitable[None]], fd: int, timeout: float | None
) -> bool:
    if timeout is None:
        await wait(fd)
        return True
    with trio.move_on_after(timeout):
        await wait(fd)
        return True
    return False


class TrioRuntime:
    name = "trio"

    def signal(self) -> trio.Event:
        return trio.Event()

    def lock(self) -> trio.Lock:
        return trio.Lock()

    def monotonic(self) -> float:
        return trio.current_time()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    async def checkpoint(self) -> None:
        await trio.lowlevel.checkpoint()

    async def cancel_point(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()

    async def yield_now(self) -> None:
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def wait_signal(self, signal: Any, timeout: float | None) -> bool:
        if timeout is None:
            await signal.wait()
            return True
        with trio.move_on_after(timeout):
            await signal.wait()
        return bool(signal.is_set())

    def completion(self) -> _Completion:
        return _Completion()

    async def run_in_thread(self, fn: Callable[[], T]) -> T:
        return await trio.to_thread.run_sync(fn)

    async def wait_readable(self, fd: int, timeout: float | None) -> bool:
        return await _wait_fd(trio.lowlevel.wait_readable, fd, timeout)

    async def wait_writable(self, fd: int, timeout: float | None) -> bool:
        return await _wait_fd(trio.lowlevel.wait_writable, fd, timeout)

    def task_group(self) -> AbstractAsyncContextManager[_Nursery]:
        return unwrapped_task_group(trio.open_nursery(), _Nursery)

    @contextmanager
    def cancel_scope(self) -> Iterator[trio.CancelScope]:
        with trio.CancelScope() as scope:
            yield scope

    @contextmanager
    def shield(self, timeout: float | None = None) -> Iterator[trio.CancelScope]:
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        with trio.CancelScope(shield=True, deadline=deadline) as scope:
            yield scope
