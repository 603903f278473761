"""One PostgreSQL connection, driven through libpq in nonblocking mode.

psycopg has no trio support, so this drives psycopg's public ``pq.PGconn``
directly and waits on its socket through the runtime seam (trio's
``wait_readable``/``wait_writable``, asyncio's reader/writer callbacks): the
same code serves both drivers. Measured faster than psycopg's own asyncio
connection and far faster than trio-asyncio or threads (docs/engines.md).

Cancellation: a task cancelled while a statement is in flight leaves the
connection in an unknown protocol state, so the connection is marked broken
and discarded by the pool (the server rolls back what it had open).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import pq

from ..protocol.errors import DatabaseError
from ..protocol.plan import Fetch, Statement
from .pg_wire import Wire, check
from .runtime import Runtime

# Longest a cancelled task waits for its cancel request to reach the server.
CANCEL_TIMEOUT = 5.0


class PgConnection:
    def __init__(self, runtime: Runtime, pgconn: pq.abc.PGconn) -> None:
        self._runtime = runtime
        self.pgconn = pgconn
        # Kept: libpq reports 0 once the connection has failed, and the pool
        # must still forget this pid (a reused pid would mute a stranger).
        self.backend_pid: int = pgconn.backend_pid
        self.wire = Wire(pgconn)
        self.broken = False
        self.in_transaction = False

    @classmethod
    async def connect(cls, runtime: Runtime, dsn: str, *, timeout: float) -> PgConnection:
        pgconn = pq.PGconn.connect_start(dsn.encode())
        if pgconn.status == pq.ConnStatus.BAD:
            raise DatabaseError(f"PostgreSQL: cannot connect: {_message(pgconn)}")
        deadline = runtime.monotonic() + timeout
        try:
            while True:
                state = pgconn.connect_poll()
                if state == pq.PollingStatus.OK:
                    break
                if state == pq.PollingStatus.FAILED:
                    raise DatabaseError(f"PostgreSQL: cannot connect: {_message(pgconn)}")
                left = deadline - runtime.monotonic()
                waiter = (
                    runtime.wait_readable
                    if state == pq.PollingStatus.READING
                    else runtime.wait_writable
                )
                if left <= 0 or not await waiter(pgconn.socket, left):
                    raise DatabaseError(f"PostgreSQL: connecting timed out after {timeout} s")
            pgconn.nonblocking = 1
        except BaseException:
            pgconn.finish()
            raise
        return cls(runtime, pgconn)

    async def execute(self, statement: Statement) -> Any:
        """Send one statement and return its result shaped by ``statement.fetch``."""
        results = await self._roundtrip(lambda: self.wire.send(statement))
        return self.wire.result(results[-1], statement.fetch)

    async def rows(self, statement: Statement) -> list[tuple[Any, ...]]:
        """A caller's own statement: its rows, or [] when it returns none."""
        results = await self._roundtrip(lambda: self.wire.send(statement))
        return self.wire.rows(results[-1])

    async def command(self, sql: str) -> None:
        """A parameterless command (BEGIN, COMMIT, LISTEN ...)."""
        results = await self._roundtrip(lambda: self.pgconn.send_query(self.wire.encode_sql(sql)))
        for res in results:
            check(res)

    async def _roundtrip(self, send: Any) -> list[pq.abc.PGresult]:
        if self.broken:
            raise DatabaseError("PostgreSQL: connection is broken")
        pgconn = self.pgconn
        try:
            send()
            await self._flush()
            results: list[pq.abc.PGresult] = []
            while True:
                while pgconn.is_busy():
                    await self._runtime.wait_readable(pgconn.socket, None)
                    pgconn.consume_input()
                res = pgconn.get_result()
                if res is None:
                    break
                results.append(res)
        except (psycopg.OperationalError, OSError) as exc:
            self.broken = True
            raise _conn_error(pgconn, exc) from exc
        except BaseException:
            # Cancelled mid-statement: the protocol state is unknown, so the
            # connection is dropped. Dropping it does not stop the server,
            # which would run the statement on (holding its transaction's
            # locks) until it next writes to us: ask it to cancel.
            self.broken = True
            with self._runtime.shield():
                await self._cancel_on_server()
            raise
        if not results:
            self.broken = pgconn.status != pq.ConnStatus.OK
            raise DatabaseError(f"PostgreSQL: no result: {_message(pgconn)}")
        if pgconn.status != pq.ConnStatus.OK:
            self.broken = True
        return results

    async def _cancel_on_server(self) -> None:
        """Send a cancel request for the statement in flight: best effort,
        bounded by ``CANCEL_TIMEOUT``, never raising."""
        runtime = self._runtime
        try:
            cancel = self.pgconn.cancel_conn()  # libpq 17+: nonblocking
        except psycopg.NotSupportedError:
            try:
                old = self.pgconn.get_cancel()
                await runtime.run_in_thread(old.cancel)
            except (psycopg.Error, OSError):
                pass
            return
        except (psycopg.Error, OSError):
            return
        deadline = runtime.monotonic() + CANCEL_TIMEOUT
        try:
            cancel.start()
            while True:
                state = cancel.poll()
                if state in (pq.PollingStatus.OK, pq.PollingStatus.FAILED):
                    return
                waiter = (
                    runtime.wait_readable
                    if state == pq.PollingStatus.READING
                    else runtime.wait_writable
                )
                left = deadline - runtime.monotonic()
                if left <= 0 or not await waiter(cancel.socket, left):
                    return
        except (psycopg.Error, OSError):
            return
        finally:
            cancel.finish()

    async def _flush(self) -> None:
        pgconn = self.pgconn
        while pgconn.flush() == 1:
            await self._runtime.wait_writable(pgconn.socket, None)

    def alive(self) -> bool:
        """Check an idle connection without a round trip: read what the
        server sent while it sat in the pool (a FATAL before a termination,
        then EOF). False, and broken, if the connection is gone."""
        if self.broken:
            return False
        try:
            # The first read takes the FATAL message, the second sees EOF.
            self.pgconn.consume_input()
            self.pgconn.consume_input()
        except psycopg.OperationalError:
            self.broken = True
            return False
        if self.pgconn.status != pq.ConnStatus.OK:
            self.broken = True
        return not self.broken

    def close(self) -> None:
        self.broken = True
        self.pgconn.finish()


def _message(pgconn: pq.abc.PGconn) -> str:
    return pgconn.error_message.decode("utf-8", "replace").strip() or "unknown error"


def _conn_error(pgconn: pq.abc.PGconn, exc: BaseException) -> DatabaseError:
    return DatabaseError(f"PostgreSQL: connection failed: {_message(pgconn) or exc}")


__all__ = ["Fetch", "PgConnection"]
