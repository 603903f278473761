"""A small connection pool over the runtime seam (trio and asyncio alike)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..protocol.errors import Closed
from .pg_conn import PgConnection
from .runtime import Runtime, Signal


class PgPool:
    """Up to ``size`` connections, created on demand, handed out FIFO.

    A connection that broke (network error, or a task cancelled mid-statement)
    is closed instead of returned, and the next caller gets a fresh one.
    """

    def __init__(
        self, runtime: Runtime, dsn: str, *, size: int, connect_timeout: float
    ) -> None:
        self._runtime = runtime
        self._dsn = dsn
        self._size = size
        self._connect_timeout = connect_timeout
        self._idle: list[PgConnection] = []
        self._total = 0
        self._waiters: deque[Signal] = deque()
        self._closed = False
        # Backend pids of our connections: their NOTIFYs already woke local
        # receivers at commit, so the listener skips their echo.
        self.backend_pids: set[int] = set()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PgConnection]:
        conn = await self._acquire()
        try:
            yield conn
        finally:
            self._release(conn)

    async def _acquire(self) -> PgConnection:
        while True:
            if self._closed:
                raise Closed("store is closed")
            while self._idle:
                conn = self._idle.pop()
                if conn.alive():
                    return conn
                # Died while idle (server restart, terminated backend):
                # drop it here rather than fail the caller's operation.
                self.backend_pids.discard(conn.backend_pid)
                conn.close()
                self._total -= 1
            if self._total < self._size:
                self._total += 1
                try:
                    conn = await PgConnection.connect(
                        self._runtime, self._dsn, timeout=self._connect_timeout
                    )
                    self.backend_pids.add(conn.backend_pid)
                    return conn
                except BaseException:
                    self._total -= 1
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

    def _release(self, conn: PgConnection) -> None:
        if conn.broken or conn.in_transaction or self._closed:
            self.backend_pids.discard(conn.backend_pid)
            if not conn.broken:
                conn.close()
            else:
                conn.pgconn.finish()
            self._total -= 1
        else:
            self._idle.append(conn)
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            signal = self._waiters.popleft()
            signal.set()
            return

    def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._total -= len(self._idle)
        self._idle.clear()
        while self._waiters:
            self._waiters.popleft().set()
