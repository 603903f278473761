"""One PostgreSQL connection, driven through libpq in nonblocking mode.

psycopg has no trio support, so this drives psycopg's public ``pq.PGconn``
directly and waits on its socket through the runtime seam (trio's
``wait_readable``/``wait_writable``, asyncio's reader/writer callbacks): the
same code serves both drivers. Measured faster than psycopg's own asyncio
connection and far faster than trio-asyncio or threads (docs/engines.md).

Cancellation: a task cancelled while a statement is in flight asks the
server to stop it, reads the rest of the answer and rolls back before the
cancellation goes on (so nothing the transaction locked outlives the call),
then the connection is marked broken and discarded by the pool.

Pipelining (the pool's connections): a connection in libpq's pipeline mode
can carry several statements in one round trip. The executor uses it for
statements whose results nobody waits for: ``BEGIN`` goes out with the
transaction's first statement, a statement fetched with ``Fetch.NONE`` (a
``pg_notify``, say) goes out with the next one, and ``COMMIT`` with a plan's
``last`` statement (``execute_then``), so an enqueue is one round trip
instead of four. Nothing else changes: the
statements run in the same order in the same transaction, and an error in a
deferred statement fails the round trip that carried it (the statements after
it in that trip are skipped by the server, ``COMMIT`` included).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg import pq

from ...engines.postgres import control
from ...protocol.plan import Fetch, Statement
from ...protocol.values.errors import DatabaseError
from ..runtime import Runtime
from . import prepared
from .wire import OK_STATUSES, Wire, check, error_from_result

# Longest a cancelled task waits for the server to stop and roll back.
CANCEL_TIMEOUT = 5.0

# Transaction states in which the server still holds the transaction's locks.
_OPEN = (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR)

# What one send put in the pipeline, a mark per command: None for a
# statement or command of the caller's, whose results the round trip
# returns; a name for the prepare of that name, ``_CLOSE`` for the close of
# an evicted one (the connection's own bookkeeping, never returned).
Marks = tuple["bytes | None", ...]
_MINE: Marks = (None,)
_CLOSE = b""


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
        # Pipeline mode: statements sent with the next round trip, unanswered.
        self.pipelined = False
        self._deferred: list[Callable[[], Marks]] = []
        # The statements prepared on this connection (pipeline mode only;
        # None: none are, ``PostgresOptions.prepare_threshold``).
        self._prepared: prepared.Prepared | None = None
        # The last round trip failed in a deferred statement, so the server
        # skipped its own statement (a COMMIT among them: not committed).
        self.skipped_last = False
        # Round trips made so far: a caller can tell whether anything it
        # deferred has gone out yet.
        self.roundtrips = 0
        # The last pipelined round trip's results, a list per statement.
        self._groups: list[list[pq.abc.PGresult]] = []
        self.begun_at = 0  # ``roundtrips`` when the open transaction began
        # Longest alkstore's own round trip waits for an answer (None: no
        # bound); ``timed_out`` records that one went unanswered, which makes
        # every connection on the same path suspect.
        self.response_timeout: float | None = None
        self.timed_out = False

    @classmethod
    async def connect(
        cls,
        runtime: Runtime,
        dsn: str,
        *,
        timeout: float,
        pipeline: bool = False,
        prepare_threshold: int | None = None,
    ) -> PgConnection:
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
            conn = cls(runtime, pgconn)
            if pipeline:
                pgconn.enter_pipeline_mode()
                conn.pipelined = True
                if prepare_threshold is not None:
                    can_close = hasattr(pgconn, "send_close_prepared") and pq.version() >= 170000
                    conn._prepared = prepared.Prepared(
                        prepare_threshold, prepared.CAPACITY, can_close=can_close
                    )
        except BaseException:
            pgconn.finish()
            raise
        return conn

    async def execute(self, statement: Statement, *, defer: bool = False) -> Any:
        """Send one statement and return its result shaped by ``statement.fetch``.

        ``defer`` (pipeline mode, ``Fetch.NONE`` only): send it with the next
        round trip instead, and return ``None`` now."""
        if defer and self.pipelined and statement.fetch is Fetch.NONE:
            self._defer(lambda: self._send(statement))
            return None
        results = await self._roundtrip(lambda: self._send(statement))
        return self.wire.result(results[-1], statement.fetch)

    async def execute_then(self, statement: Statement, sql: str) -> Any:
        """``statement`` then the command ``sql`` (a ``COMMIT``) in one round
        trip, with whatever was deferred (pipeline mode only): the
        statement's result. A failure before ``sql`` makes the server skip
        it (``skipped_last``, as for any round trip); ``sql``'s own failure
        raises after it."""
        assert self.pipelined
        self._defer(lambda: self._send(statement))
        results = await self._roundtrip(lambda: self._send_command(sql))
        for res in results:
            check(res)
        return self.wire.result(self._groups[-2][-1], statement.fetch)

    async def rows(self, statement: Statement) -> list[tuple[Any, ...]]:
        """A caller's own statement: its rows, or [] when it returns none.
        Not bounded by ``response_timeout``: the caller's query may rightly
        run for as long as it needs."""
        results = await self._roundtrip(lambda: self._send_unprepared(statement), bounded=False)
        return self.wire.rows(results[-1])

    async def command(self, sql: str, *, bounded: bool = True) -> None:
        """A parameterless command (BEGIN, COMMIT, LISTEN ...). ``bounded``:
        by ``response_timeout`` (not for maintenance, which takes as long as
        its table)."""
        results = await self._roundtrip(lambda: self._send_command(sql), bounded=bounded)
        for res in results:
            check(res)

    def defer_command(self, sql: str) -> None:
        """``command``, sent with the next round trip (pipeline mode; at once
        otherwise is not possible, so the caller must use ``command``)."""
        assert self.pipelined
        self._defer(lambda: self._send_command(sql))

    def drop_deferred(self) -> bool:
        """Forget what waits for the next round trip; whether anything did."""
        had = bool(self._deferred)
        self._deferred.clear()
        return had

    def _defer(self, send: Callable[[], Marks]) -> None:
        if self.broken:
            raise DatabaseError("PostgreSQL: connection is broken")
        self._deferred.append(send)

    def _send(self, statement: Statement) -> Marks:
        """One of alkstore's statements, by the name it is prepared under
        once it has been sent often enough (``prepared.py``)."""
        cache = self._prepared
        if cache is None:
            return self._send_unprepared(statement)
        values, types, formats = self.wire.dump(statement.params)
        use = cache.use((statement.sql, types))
        if use.name is None:
            self.wire.send_dumped(statement.sql, values, types, formats)
            return _MINE
        pgconn = self.pgconn
        marks: list[bytes | None] = []
        if use.close is not None:
            pgconn.send_close_prepared(use.close)
            marks.append(_CLOSE)
        if use.prepare is not None:
            pgconn.send_prepare(use.prepare, self.wire.encode_sql(statement.sql), types)
            marks.append(use.prepare)
        pgconn.send_query_prepared(use.name, values, formats)
        marks.append(None)
        return tuple(marks)

    def _send_unprepared(self, statement: Statement) -> Marks:
        self.wire.send(statement)
        return _MINE

    def _send_command(self, sql: str) -> Marks:
        if self.pipelined:
            # The simple query protocol is not allowed in pipeline mode.
            self.pgconn.send_query_params(self.wire.encode_sql(sql), None)
        else:
            self.pgconn.send_query(self.wire.encode_sql(sql))
        return _MINE

    def _mine(self, groups: list[list[pq.abc.PGresult]], marks: list[bytes | None]) -> list[
        list[pq.abc.PGresult]
    ]:
        """The groups of the caller's statements, the connection's own taken
        out: a prepare that failed (or was skipped after an earlier failure)
        is forgotten, and its failure raised (the statement it was for was
        skipped)."""
        if len(marks) == len(groups) and all(mark is None for mark in marks):
            return groups
        mine = []
        for group, mark in zip(groups, marks, strict=True):
            if mark is None:
                mine.append(group)
                continue
            failed = next((r for r in group if r.status not in OK_STATUSES), None)
            if failed is not None and mark != _CLOSE:
                assert self._prepared is not None
                self._prepared.lost(mark)
                if failed.status != pq.ExecStatus.PIPELINE_ABORTED:
                    self.skipped_last = True
                    raise error_from_result(failed)
        return mine

    async def _roundtrip(
        self, send: Callable[[], Marks], *, bounded: bool = True
    ) -> list[pq.abc.PGresult]:
        if self.broken:
            raise DatabaseError("PostgreSQL: connection is broken")
        self.skipped_last = False
        self.roundtrips += 1
        pgconn = self.pgconn
        deferred, self._deferred = self._deferred, []
        bound = self.response_timeout if bounded else None
        deadline = None if bound is None else self._runtime.monotonic() + bound
        try:
            if self.pipelined:
                marks: list[bytes | None] = []
                for early in deferred:
                    marks += early()
                marks += send()
                pgconn.pipeline_sync()
                await self._flush(deadline)
                groups = await self._pipeline_results(deadline)
                groups = self._groups = self._mine(groups, marks)
                for group in groups[:-1]:
                    failed = next((r for r in group if r.status not in OK_STATUSES), None)
                    if failed is not None:
                        self.skipped_last = True
                        raise error_from_result(failed)
                results = groups[-1] if groups else []
            else:
                send()
                await self._flush(deadline)
                results = []
                while (res := await self._next_result(deadline)) is not None:
                    results.append(res)
        except _Unanswered:
            self.broken = self.timed_out = True
            with self._runtime.shield():
                await self._cancel_on_server()
            raise DatabaseError(
                f"PostgreSQL: no answer from the server within {bound} s (response_timeout); "
                "the connection was dropped"
            ) from None
        except DatabaseError:
            raise
        except (psycopg.OperationalError, OSError) as exc:
            self.broken = True
            raise _conn_error(pgconn, exc) from exc
        except BaseException:
            # Cancelled mid-statement: the connection is dropped, but only
            # once the server has let go of what the transaction holds.
            self.broken = True
            await self._settle()
            raise
        if not results:
            self.broken = pgconn.status != pq.ConnStatus.OK
            raise DatabaseError(f"PostgreSQL: no result: {_message(pgconn)}")
        if pgconn.status != pq.ConnStatus.OK:
            self.broken = True
        return results

    async def _settle(self) -> None:
        """After a cancel mid-round-trip: stop the statement on the server,
        read the rest of the round trip's answer and roll back the open
        transaction, before the cancellation goes on. Dropping the
        connection alone frees the transaction's locks only once the server
        notices, which can be after the caller's next operation has run
        elsewhere (and skipped those rows as another's). Best effort,
        bounded by ``CANCEL_TIMEOUT``, never raising; the connection stays
        broken either way (the caller's transaction is over)."""
        with self._runtime.shield(CANCEL_TIMEOUT):
            await self._cancel_on_server()
            try:
                await self._finish_roundtrip()
                # A cancel request that arrives late can interrupt the
                # ROLLBACK instead: the transaction is then still open, so
                # one more try.
                for _ in range(2):
                    if self.pgconn.transaction_status not in _OPEN:
                        return
                    self._send_command(control.ROLLBACK)
                    if self.pipelined:
                        self.pgconn.pipeline_sync()
                    await self._finish_roundtrip()
            except (psycopg.Error, OSError):
                return

    async def _finish_roundtrip(self) -> None:
        """Send what is unsent and read, discarding, every result up to the
        end of the round trip in flight."""
        await self._flush()
        if self.pipelined:
            await self._pipeline_results(None)
        else:
            while await self._next_result() is not None:
                pass

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

    async def _next_result(self, deadline: float | None = None) -> pq.abc.PGresult | None:
        """libpq's next result, once it has arrived (None: the statement's
        results are over). Raises ``_Unanswered`` past ``deadline``."""
        pgconn = self.pgconn
        while pgconn.is_busy():
            await self._wait(self._runtime.wait_readable, deadline)
            pgconn.consume_input()
        return pgconn.get_result()

    async def _pipeline_results(self, deadline: float | None) -> list[list[pq.abc.PGresult]]:
        """Every result up to the pipeline's sync point, one list per statement."""
        groups: list[list[pq.abc.PGresult]] = []
        current: list[pq.abc.PGresult] = []
        while True:
            res = await self._next_result(deadline)
            if res is None:
                if current:
                    groups.append(current)
                    current = []
                continue
            if res.status == pq.ExecStatus.PIPELINE_SYNC:
                if current:
                    groups.append(current)
                return groups
            current.append(res)

    async def _flush(self, deadline: float | None = None) -> None:
        pgconn = self.pgconn
        while pgconn.flush() == 1:
            await self._wait(self._runtime.wait_writable, deadline)

    async def _wait(
        self, waiter: Callable[[int, float | None], Awaitable[bool]], deadline: float | None
    ) -> None:
        """Wait for the socket with ``waiter``; ``_Unanswered`` past ``deadline``."""
        if deadline is None:
            await waiter(self.pgconn.socket, None)
            return
        left = deadline - self._runtime.monotonic()
        if left <= 0 or not await waiter(self.pgconn.socket, left):
            raise _Unanswered

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


class _Unanswered(Exception):
    """A round trip's deadline passed with no answer."""


def _message(pgconn: pq.abc.PGconn) -> str:
    return pgconn.error_message.decode("utf-8", "replace").strip() or "unknown error"


def _conn_error(pgconn: pq.abc.PGconn, exc: BaseException) -> DatabaseError:
    return DatabaseError(f"PostgreSQL: connection failed: {_message(pgconn) or exc}")


__all__ = ["Fetch", "PgConnection"]
