"""A small connection pool over the runtime seam, for any kind of connection.

Up to ``size`` connections, opened on demand and handed out last-in first-out
(the warmest one), with waiters served first come, first served. The engine
says how to open one, whether an idle one is still usable, and how to get
rid of one; the caller says, when it gives one back, whether it may be used
again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

from ..protocol.values.errors import Closed, InvalidArgument
from .runtime import Runtime, Signal

C = TypeVar("C")


class Pool(Generic[C]):
    def __init__(
        self,
        runtime: Runtime,
        *,
        size: int,
        open: Callable[[], Awaitable[C]],
        discard: Callable[[C], None],
        usable: Callable[[C], bool] = lambda conn: True,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidArgument(f"pool size must be an int >= 1, got {size!r}")
        self._runtime = runtime
        self._size = size
        self._open = open
        self._discard = discard
        self._usable = usable
        self._idle: list[C] = []
        self.total = 0  # open connections, idle or handed out
        self._waiters: deque[Signal] = deque()
        self.closed = False

    @asynccontextmanager
    async def connection(self, reuse: Callable[[C], bool] = lambda conn: True) -> AsyncIterator[C]:
        """A connection for the block; given back afterwards if ``reuse(conn)``."""
        conn = await self.acquire()
        try:
            yield conn
        finally:
            self.release(conn, reuse=reuse(conn))

    async def acquire(self) -> C:
        while True:
            if self.closed:
                raise Closed("store is closed")
            while self._idle:
                conn = self._idle.pop()
                if self._usable(conn):
                    return conn
                # Died while idle: drop it here rather than fail the caller.
                self._drop(conn)
            if self.total < self._size:
                self.total += 1
                try:
                    return await self._open()
                except BaseException:
                    self.total -= 1
                    self._wake_one()
                    raise
            signal = self._runtime.signal()
            self._waiters.append(signal)
            try:
                await signal.wait()
            except BaseException:
                if signal in self._waiters:
                    self._waiters.remove(signal)
                elif signal.is_set():
                    self._wake_one()  # pass the turn we were given on
                raise

    def release(self, conn: C, *, reuse: bool = True) -> None:
        if reuse and not self.closed:
            self._idle.append(conn)
        else:
            self._drop(conn)
        self._wake_one()

    def _drop(self, conn: C) -> None:
        self.total -= 1
        self._discard(conn)

    def drop_idle(self) -> None:
        """Close every idle connection; callers open new ones as needed."""
        idle, self._idle = self._idle, []
        for conn in idle:
            self._drop(conn)

    def _wake_one(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()

    def close(self) -> None:
        """Close the idle connections now, the others as they come back."""
        self.closed = True
        self.drop_idle()
        while self._waiters:
            self._waiters.popleft().set()
