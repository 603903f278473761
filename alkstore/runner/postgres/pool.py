"""The Postgres statement pool: ``Pool`` over libpq connections.

A connection that broke (network error, or a task cancelled mid-statement)
or that is still inside a transaction is closed instead of returned, and the
next caller gets a fresh one. One that the server closed while it sat idle
(a restart, a terminated backend) is noticed when taken, without a round
trip, and replaced. One that stopped answering (``response_timeout``) takes
every idle connection with it: they share its path to the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..pool import Pool
from ..runtime import Runtime
from .conn import PgConnection


class PgPool:
    def __init__(
        self,
        runtime: Runtime,
        dsn: str,
        *,
        size: int,
        connect_timeout: float,
        response_timeout: float | None = None,
        prepare_threshold: int | None = None,
    ) -> None:
        self._runtime = runtime
        self._dsn = dsn
        self._connect_timeout = connect_timeout
        self._response_timeout = response_timeout
        self._prepare_threshold = prepare_threshold
        self._pool: Pool[PgConnection] = Pool(
            runtime, size=size, open=self._connect, discard=self._discard, usable=_alive
        )
        # Backend pids of our connections: their NOTIFYs already woke local
        # receivers at commit, so the listener skips their echo.
        self.backend_pids: set[int] = set()

    @property
    def _total(self) -> int:
        return self._pool.total

    async def _connect(self) -> PgConnection:
        conn = await PgConnection.connect(
            self._runtime, self._dsn, timeout=self._connect_timeout, pipeline=True,
            prepare_threshold=self._prepare_threshold,
        )
        conn.response_timeout = self._response_timeout
        self.backend_pids.add(conn.backend_pid)
        return conn

    def _discard(self, conn: PgConnection) -> None:
        self.backend_pids.discard(conn.backend_pid)
        if conn.timed_out:
            # The server stopped answering one connection: the idle ones
            # share its path and are as likely dead, and finding that out
            # one response_timeout at a time would stall every caller.
            self._pool.drop_idle()
        if conn.broken:
            conn.pgconn.finish()
        else:
            conn.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[PgConnection]:
        async with self._pool.connection(reuse=_reusable) as conn:
            yield conn

    def drop_idle(self) -> None:
        """Close the idle connections (the path to the server is suspect)."""
        self._pool.drop_idle()

    def close(self) -> None:
        self._pool.close()


def _alive(conn: PgConnection) -> bool:
    return conn.alive()


def _reusable(conn: PgConnection) -> bool:
    return not conn.broken and not conn.in_transaction and not conn.drop_deferred()
