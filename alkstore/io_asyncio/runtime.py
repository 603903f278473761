"""The asyncio side of the runtime seam."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


async def _wait_through_cancel(future: asyncio.Future[T]) -> T:
    """Wait for ``future`` to finish even if cancelled meanwhile, then
    re-deliver the cancellation: work handed to a thread is never abandoned."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.done():
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return future.result()


class _Completion:
    __slots__ = ("_future", "_loop")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[Any] = self._loop.create_future()

    def _set(self, value: Any, error: BaseException | None) -> None:
        if self._future.done():
            return
        if error is None:
            self._future.set_result(value)
        else:
            self._future.set_exception(error)

    def resolve(self, value: Any) -> None:
        self._loop.call_soon_threadsafe(self._set, value, None)

    def reject(self, error: BaseException) -> None:
        self._loop.call_soon_threadsafe(self._set, None, error)

    async def wait(self) -> Any:
        return await _wait_through_cancel(self._future)


class _TaskGroup:
    def __init__(self, group: asyncio.TaskGroup) -> None:
        self._group = group
        self._tasks: set[asyncio.Task[Any]] = set()

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        task: asyncio.Task[Any] = self._group.create_task(fn(*args))  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class _CancelScope:
    """Cancels the task that entered it; absorbs only that cancellation."""

    def __init__(self) -> None:
        self._task = asyncio.current_task()
        self._requested = False
        self.cancelled_caught = False

    def cancel(self) -> None:
        if not self._requested and self._task is not None:
            self._requested = True
            self._task.cancel()


class AsyncioRuntime:
    name = "asyncio"

    def signal(self) -> asyncio.Event:
        return asyncio.Event()

    def lock(self) -> asyncio.Lock:
        return asyncio.Lock()

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def checkpoint(self) -> None:
        await asyncio.sleep(0)

    async def wait_signal(self, signal: Any, timeout: float | None) -> bool:
        if timeout is None:
            await signal.wait()
            return True
        try:
            async with asyncio.timeout(timeout):
                await signal.wait()
        except TimeoutError:
            pass
        return bool(signal.is_set())

    def completion(self) -> _Completion:
        return _Completion()

    async def run_in_thread(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        return await _wait_through_cancel(loop.run_in_executor(None, fn))

    async def wait_readable(self, fd: int, timeout: float | None) -> bool:
        return await self._wait_fd(fd, timeout, writable=False)

    async def wait_writable(self, fd: int, timeout: float | None) -> bool:
        return await self._wait_fd(fd, timeout, writable=True)

    async def _wait_fd(self, fd: int, timeout: float | None, *, writable: bool) -> bool:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def mark() -> None:
            if not ready.done():
                ready.set_result(None)

        add, remove = (loop.add_writer, loop.remove_writer) if writable else (
            loop.add_reader, loop.remove_reader
        )
        add(fd, mark)
        try:
            if timeout is None:
                await ready
                return True
            try:
                async with asyncio.timeout(timeout):
                    await ready
                return True
            except TimeoutError:
                return False
        finally:
            remove(fd)

    @asynccontextmanager
    async def task_group(self) -> AsyncIterator[_TaskGroup]:
        body_error: BaseException | None = None
        try:
            async with asyncio.TaskGroup() as group:
                try:
                    yield _TaskGroup(group)
                except BaseException as exc:
                    body_error = exc
                    raise
        except BaseExceptionGroup as eg:
            if body_error is not None and eg.exceptions == (body_error,):
                raise body_error from None
            raise

    @contextmanager
    def cancel_scope(self) -> Iterator[_CancelScope]:
        scope = _CancelScope()
        try:
            yield scope
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not scope._requested or task is None:
                raise
            # Ours, and nobody else's: absorb it and undo our request.
            if task.uncancel() > 0:
                raise
            scope.cancelled_caught = True

    @contextmanager
    def shield(self, timeout: float | None = None) -> Iterator[_CancelScope]:
        # asyncio cancellation is delivered once, at one await: the cleanup
        # that runs inside this block after it is not interrupted again
        # unless someone cancels twice. Only the timeout needs doing.
        scope = _CancelScope()
        task = asyncio.current_task()
        if timeout is None or task is None:
            yield scope
            return
        # Cancellations already under way when the block started (the one
        # that began a shutdown, say) are not ours to absorb.
        before = task.cancelling()
        timer = asyncio.get_running_loop().call_later(timeout, scope.cancel)
        try:
            yield scope
        except asyncio.CancelledError:
            if not scope._requested or task.uncancel() > before:
                raise
            scope.cancelled_caught = True
        finally:
            timer.cancel()

    def is_cancellation(self, exc: BaseException) -> bool:
        return isinstance(exc, asyncio.CancelledError)
