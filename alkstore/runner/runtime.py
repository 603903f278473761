"""The seam between the shared code and an async library.

A driver implements ``Runtime``: how to wait (events, sleeps, file
descriptors, threads), how to spawn (task groups that own every background
task) and how to cancel (scopes, shields). Nothing else differs between trio
and asyncio.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
G = TypeVar("G")


@asynccontextmanager
async def unwrapped_task_group(
    group: AbstractAsyncContextManager[G], wrap: Callable[[G], T]
) -> AsyncIterator[T]:
    """A library's task group (a trio nursery, an asyncio ``TaskGroup``),
    handed to the body through ``wrap``, with the body's own exception
    raised as it was raised: not wrapped in a group that holds nothing else.
    Both drivers' ``task_group`` are this."""
    body_error: BaseException | None = None
    try:
        async with group as opened:
            try:
                yield wrap(opened)
            except BaseException as exc:
                body_error = exc
                raise
    except BaseExceptionGroup as eg:
        if body_error is not None and eg.exceptions == (body_error,):
            raise body_error from None
        raise


class Signal(Protocol):
    """A one-shot event: ``set`` wakes every waiter; never reset (make a new one)."""

    def set(self) -> None: ...
    def is_set(self) -> bool: ...
    async def wait(self) -> object: ...


class Completion(Protocol[T]):
    """A result handed from a plain thread to one waiting task.

    ``resolve``/``reject`` may be called from any thread, once. ``wait`` is
    not interruptible: work handed to the database runs to its end, and a
    cancellation is delivered at the caller's next checkpoint.
    """

    def resolve(self, value: T) -> None: ...
    def reject(self, error: BaseException) -> None: ...
    async def wait(self) -> T: ...


class AsyncLock(Protocol):
    async def __aenter__(self) -> Any: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any: ...


class TaskGroup(Protocol):
    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None: ...
    def cancel(self) -> None: ...


class CancelScope(Protocol):
    def cancel(self) -> None: ...

    @property
    def cancelled_caught(self) -> bool: ...


class Runtime(Protocol):
    name: str

    def signal(self) -> Signal: ...
    def lock(self) -> AsyncLock: ...
    def monotonic(self) -> float: ...
    async def sleep(self, seconds: float) -> None: ...
    async def checkpoint(self) -> None:
        """Yield to other tasks; a cancellation may be delivered here."""
        ...
    async def cancel_point(self) -> None:
        """Raise the caller's cancellation if one is pending; otherwise return
        without yielding. Every operation starts with one: its own waits are
        shielded (work handed to the database is never abandoned), so a cancel
        that came before the operation must be taken before it starts."""
        ...
    async def yield_now(self) -> None:
        """Let other tasks run, without being a cancellation point: a cancel
        that arrives meanwhile is delivered at the next checkpoint."""
        ...
    async def wait_signal(self, signal: Signal, timeout: float | None) -> bool:
        """Wait for ``signal`` at most ``timeout`` seconds; True when it was set."""
        ...

    def completion(self) -> Completion[Any]:
        """A completion bound to the calling task's event loop."""
        ...

    async def run_in_thread(self, fn: Callable[[], T]) -> T:
        """Run blocking ``fn`` on a worker thread; not abandoned on cancel:
        its result is returned and the cancellation delivered at the next
        checkpoint (never dropped)."""
        ...

    async def wait_readable(self, fd: int, timeout: float | None) -> bool:
        """Wait until ``fd`` is readable (True) or ``timeout`` passes (False)."""
        ...
    async def wait_writable(self, fd: int, timeout: float | None) -> bool:
        """Wait until ``fd`` is writable (True) or ``timeout`` passes (False)."""
        ...

    def task_group(self) -> AbstractAsyncContextManager[TaskGroup]:
        """A task group whose body's own exception propagates unwrapped."""
        ...

    def cancel_scope(self) -> AbstractContextManager[CancelScope]: ...
    def shield(self, timeout: float | None = None) -> AbstractContextManager[Any]:
        """Protect the block from outside cancellation: a cancel arriving
        inside is delivered after it. With ``timeout``, the block is
        cancelled after that many seconds all the same, and the context's
        ``cancelled_caught`` is then True: shielded cleanup that waits on a
        peer that never answers must not hang a shutdown. Work handed to a
        thread (``Completion.wait``, ``run_in_thread``) runs to its end even
        then."""
        ...


class Clock(Protocol):
    """Wall-clock time in microseconds since the epoch: the core's ``now``."""

    def now_us(self) -> int:
        """Microseconds since the Unix epoch, now."""
        ...


class SystemClock:
    """The system's wall clock: the default ``clock`` of every store."""
    def now_us(self) -> int:
        """The system time, in microseconds since the Unix epoch."""
        return time.time_ns() // 1000


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start_us: int = 1_700_000_000_000_000) -> None:
        self._now = start_us

    def now_us(self) -> int:
        """The time it was last set or advanced to."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (backward if negative), to the microsecond."""
        self._now += round(seconds * 1_000_000)

    def set(self, now_us: int) -> None:
        """Set the clock to ``now_us`` microseconds since the epoch."""
        self._now = now_us
