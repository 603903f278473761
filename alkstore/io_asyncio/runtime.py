"""The asyncio side of the runtime seam.

asyncio delivers a cancel request once, as a ``CancelledError`` thrown in
at one ``await``, and has no cancel scopes. alkstore needs trio's two
guarantees on asyncio too, so this module provides them for every wait that
goes through the runtime:

- **No cancellation is dropped.** Work handed to a thread (a plan on the
  SQLite writer, ``run_in_thread``) is never abandoned: its waiter absorbs a
  cancel, waits for the true result, returns it, and the cancel is delivered
  again at the task's next await. A cancel request withdrawn meanwhile (an
  ``asyncio.timeout`` that expired while the work completed and then ended
  normally) is not re-delivered.
- **``shield()`` protects.** Inside a shield block, the task's waits
  (``sleep``, ``wait_signal``, ``wait_readable``/``wait_writable``,
  ``checkpoint``) absorb cancels the same way, and the block's own deadline,
  if any, ends them instead. The cancels absorbed are delivered once the
  block exits. A shield applies to the task that entered it, not to tasks it
  starts.

Re-delivery is scheduled with ``call_soon`` and re-checks the task's
``cancelling()`` count first, so it fires only while a request is still
outstanding (Python 3.11 and 3.12 do not rescind a pending cancel on
``uncancel()``; this never sets one that could go stale).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, TypeVar

from ..runner.runtime import unwrapped_task_group

T = TypeVar("T")


# -- cancellation bookkeeping -----------------------------------------------------
def _redeliver(task: asyncio.Task[Any], message: Any) -> None:
    """Cancel ``task`` again soon, if a cancel request is still outstanding
    then (``cancelling()`` above zero: nobody withdrew it meanwhile).

    The count, not a snapshot of it, decides: a re-delivered cancel may land
    in the next absorbing wait before it reaches the task's code, and that
    wait must pass it on again."""

    def again() -> None:
        if not task.done() and task.cancelling() > 0:
            # Replace the absorbed request with a fresh one: same count.
            task.uncancel()
            task.cancel(message)

    asyncio.get_running_loop().call_soon(again)


class _Shield:
    """One ``shield()`` block of one task. Also its ``cancelled_caught``."""

    __slots__ = ("absorbed", "cancelled_caught", "deadline", "message", "task")

    def __init__(self, task: asyncio.Task[Any], deadline: float | None) -> None:
        self.task = task
        self.deadline = deadline
        self.absorbed = False
        self.message: Any = None
        self.cancelled_caught = False

    def absorb(self, exc: asyncio.CancelledError) -> None:
        self.absorbed = True
        self.message = exc.args[0] if exc.args else None


_SHIELD: contextvars.ContextVar[_Shield | None] = contextvars.ContextVar(
    "alkstore_asyncio_shield", default=None
)


def _active_shield() -> _Shield | None:
    shield = _SHIELD.get()
    # A task started inside a block inherits the context, not the shield.
    if shield is not None and shield.task is asyncio.current_task():
        return shield
    return None


class _Expired(asyncio.CancelledError):
    """A shield block's own deadline passed; caught by the block itself."""


async def _wait_private(fut: asyncio.Future[Any], timeout: float | None) -> bool:
    """Wait until ``fut`` (owned by this wait alone) is done: True, or False
    when ``timeout`` passed first. Inside a shield, outside cancels are
    absorbed and the block's deadline raises ``_Expired``."""
    shield = _active_shield()
    if shield is None:
        if timeout is None:
            await fut
            return True
        try:
            async with asyncio.timeout(timeout):
                await fut
            return True
        except TimeoutError:
            return False
    loop = asyncio.get_running_loop()
    until = None if timeout is None else loop.time() + timeout
    while not fut.done():
        limit, by_shield = until, False
        if shield.deadline is not None and (limit is None or shield.deadline <= limit):
            limit, by_shield = shield.deadline, True
        remaining = None if limit is None else limit - loop.time()
        if remaining is not None and remaining <= 0:
            if by_shield:
                raise _Expired
            return False
        try:
            await asyncio.wait((fut,), timeout=remaining)
        except asyncio.CancelledError as exc:
            shield.absorb(exc)
    return True


# -- the pieces the seam hands out ----------------------------------------------------
class _Signal:
    """A one-shot event whose waits honour shields (``asyncio.Event``'s do not)."""

    __slots__ = ("_flag", "_waiters")

    def __init__(self) -> None:
        self._flag = False
        self._waiters: list[asyncio.Future[None]] = []

    def set(self) -> None:
        if self._flag:
            return
        self._flag = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def is_set(self) -> bool:
        return self._flag

    async def wait_for(self, timeout: float | None) -> bool:
        if self._flag:
            return True
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await _wait_private(waiter, timeout)
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def wait(self) -> bool:
        return await self.wait_for(None)


class _Lock:
    """A FIFO lock whose waits honour shields (``asyncio.Lock``'s do not)."""

    __slots__ = ("_locked", "_waiters")

    def __init__(self) -> None:
        self._locked = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> None:
        if not self._locked and not self._waiters:
            self._locked = True
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        try:
            await _wait_private(turn, None)
        except BaseException:
            if turn in self._waiters:
                self._waiters.remove(turn)
            elif turn.done() and not turn.cancelled():
                self._release()  # handed the lock as we were cancelled: pass it on
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def _release(self) -> None:
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # ownership passes straight to the next waiter
                return
        self._locked = False


class _Completion:
    """A thread's result for one task. The future is only the wake-up: when
    a cancel cancels it, the waiter makes a new one and waits on, and the
    result (kept here, set on the loop's thread) is never lost."""

    __slots__ = ("_arrived", "_error", "_future", "_loop", "_value")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[None] = self._loop.create_future()
        self._arrived = False
        self._value: Any = None
        self._error: BaseException | None = None

    def _set(self, value: Any, error: BaseException | None) -> None:
        if self._arrived:
            return
        self._arrived = True
        self._value, self._error = value, error
        if not self._future.done():
            self._future.set_result(None)

    def resolve(self, value: Any) -> None:
        self._loop.call_soon_threadsafe(self._set, value, None)

    def reject(self, error: BaseException) -> None:
        self._loop.call_soon_threadsafe(self._set, None, error)

    async def wait(self) -> Any:
        """The result, through any cancel and any shield deadline (work
        handed to a thread is never abandoned); every cancel absorbed is
        delivered again afterwards."""
        task = asyncio.current_task()
        absorbed: asyncio.CancelledError | None = None
        while not self._arrived:
            try:
                await self._future
            except asyncio.CancelledError as exc:
                absorbed = exc
                if not self._arrived:
                    self._future = self._loop.create_future()
        if absorbed is not None and task is not None:
            shield = _active_shield()
            if shield is not None:
                shield.absorb(absorbed)  # delivered when the block exits
            else:
                _redeliver(task, absorbed.args[0] if absorbed.args else None)
        if self._error is not None:
            raise self._error
        return self._value


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

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self._task = task
        self._requested = False
        self.cancelled_caught = False

    def cancel(self) -> None:
        if not self._requested and self._task is not None and not self._task.done():
            self._requested = True
            self._task.cancel()


class AsyncioRuntime:
    name = "asyncio"

    def signal(self) -> _Signal:
        return _Signal()

    def lock(self) -> _Lock:
        return _Lock()

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        shield = _active_shield()
        if shield is None:
            await asyncio.sleep(seconds)
        elif seconds <= 0:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError as exc:
                shield.absorb(exc)
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            await _wait_private(fut, seconds)

    async def checkpoint(self) -> None:
        await self.sleep(0)

    async def cancel_point(self) -> None:
        # A cancel can be pending without having been thrown in yet (one
        # re-delivered after a thread hop, say): yield once so it lands
        # here, before an operation starts, rather than inside its wait.
        # No request outstanding means nothing can be pending: no yield.
        task = asyncio.current_task()
        if task is not None and task.cancelling() and _active_shield() is None:
            await asyncio.sleep(0)

    async def yield_now(self) -> None:
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError as exc:
            shield = _active_shield()
            if shield is not None:
                shield.absorb(exc)
            else:
                task = asyncio.current_task()
                if task is not None:
                    _redeliver(task, exc.args[0] if exc.args else None)

    async def wait_signal(self, signal: Any, timeout: float | None) -> bool:
        return bool(await signal.wait_for(timeout))

    def completion(self) -> _Completion:
        return _Completion()

    async def run_in_thread(self, fn: Callable[[], T]) -> T:
        done = _Completion()

        def work() -> None:
            try:
                done.resolve(fn())
            except BaseException as exc:
                done.reject(exc)

        asyncio.get_running_loop().run_in_executor(None, work)
        return await done.wait()  # type: ignore[no-any-return]

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
            return await _wait_private(ready, timeout)
        finally:
            remove(fd)

    def task_group(self) -> AbstractAsyncContextManager[_TaskGroup]:
        return unwrapped_task_group(asyncio.TaskGroup(), _TaskGroup)

    @contextmanager
    def cancel_scope(self) -> Iterator[_CancelScope]:
        task = asyncio.current_task()
        scope = _CancelScope(task)
        before = 0 if task is None else task.cancelling()
        try:
            yield scope
        except asyncio.CancelledError:
            if not scope._requested or task is None:
                raise
            # Ours, and nobody else's: absorb it and undo our request.
            if task.uncancel() > before:
                raise
            scope.cancelled_caught = True
        else:
            if scope._requested and task is not None:
                # Requested, never delivered (the body finished first, say
                # in a thread hop that absorbed it): take the request back,
                # so it cannot land after the scope on the scope's behalf.
                task.uncancel()

    @contextmanager
    def shield(self, timeout: float | None = None) -> Iterator[_Shield]:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - only inside a task
            raise RuntimeError("shield() needs a running task")
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        scope = _Shield(task, deadline)
        token = _SHIELD.set(scope)
        try:
            yield scope
        except _Expired:
            scope.cancelled_caught = True
        finally:
            _SHIELD.reset(token)
            if scope.absorbed:
                _redeliver(task, scope.message)
