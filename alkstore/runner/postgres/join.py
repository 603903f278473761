"""Joining a transaction the application already holds on its own psycopg
connection: alkstore's writes ride along and commit or roll back with it.

Statements go through the application's connection with psycopg's own
cursor API (so its locks and state stay consistent). Each step runs in a
savepoint, as in ``store.transaction()``. Local wakes are not fired (this
side never learns when the application commits); the NOTIFY sent inside the
transaction reaches every listener, this store's included, once it commits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar

import psycopg

from ...engines.postgres import control
from ...protocol.plan import Fetch, Plan, Row, Statement, fetch_all, run_async, run_sync, shape
from ...protocol.values.errors import InvalidArgument
from ..executor import Session
from ..runtime import Runtime
from ..sync_session import Session as BlockingSession
from .wire import wrap_error

T = TypeVar("T")
_PLACEHOLDER = re.compile(r"\$(\d+)")


def to_psycopg(sql: str, params: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    """``$1``-style SQL to psycopg's ``%(p1)s`` style (literal % doubled)."""
    text = _PLACEHOLDER.sub(lambda m: f"%(p{m.group(1)})s", sql.replace("%", "%%"))
    return text, {f"p{i}": value for i, value in enumerate(params, start=1)}


def _shape(cur: Any, fetch: Fetch) -> Any:
    reads = fetch.reads_rows and cur.description is not None
    return shape(fetch, [tuple(r) for r in cur.fetchall()] if reads else [], cur.rowcount)


# On a connection with no transaction open yet (the application has run
# nothing since its last commit), ``conn.transaction()`` would BEGIN and
# COMMIT a transaction of its own, committing alkstore's writes behind the
# application's back. A first statement opens the application's implicit
# transaction (psycopg sends BEGIN before it), so each step is a savepoint in
# it, committed or rolled back by the application.
_OPEN_IMPLICIT = control.OPEN_IMPLICIT


async def _shape_async(cur: Any, fetch: Fetch) -> Any:
    """``_shape`` for an ``AsyncCursor``, whose ``fetchall`` is a coroutine."""
    reads = fetch.reads_rows and cur.description is not None
    rows = [tuple(r) for r in await cur.fetchall()] if reads else []
    return shape(fetch, rows, cur.rowcount)


def drive_cursor(cur: psycopg.Cursor[Any], plan: Plan[T]) -> T:
    """Run ``plan``'s statements on a sync psycopg cursor, in whatever
    transaction its connection has open."""

    def execute(statement: Statement) -> Any:
        cur.execute(*to_psycopg(statement.sql, statement.params))
        return _shape(cur, statement.fetch)

    return run_sync(plan, execute)


def drive_sync(conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
    """``plan`` in a savepoint of the application's transaction on ``conn``
    (opened first if none is: see ``_OPEN_IMPLICIT``)."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        conn.execute(_OPEN_IMPLICIT)
    with conn.transaction(), conn.cursor() as cur:
        return drive_cursor(cur, plan)


async def _drive_async(conn: psycopg.AsyncConnection[Any], plan: Plan[T]) -> T:
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        await conn.execute(_OPEN_IMPLICIT)
    async with conn.transaction(), conn.cursor() as cur:

        async def execute(statement: Statement) -> Any:
            await cur.execute(*to_psycopg(statement.sql, statement.params))
            return await _shape_async(cur, statement.fetch)

        return await run_async(plan, execute)


def user_statement(sql: str, params: Sequence[Any] | dict[str, Any]) -> Plan[list[Row]]:
    """The caller's own SQL (``tx.execute``) as a plan of its rows (none for
    a statement that returns none)."""
    if isinstance(params, dict):
        raise InvalidArgument("tx.execute takes positional $1, $2 ... params on Postgres")
    return fetch_all(Statement(sql, tuple(params), Fetch.ALL))


def check_joinable(conn: Any, *, allow_async: bool) -> bool:
    """``InvalidArgument`` unless ``conn`` is a psycopg connection (an
    ``AsyncConnection`` too when ``allow_async``) out of autocommit mode;
    whether it is an async one."""
    if allow_async and isinstance(conn, psycopg.AsyncConnection):
        is_async = True
    elif isinstance(conn, psycopg.Connection):
        is_async = False
    else:
        kinds = "a psycopg Connection or AsyncConnection" if allow_async else "a psycopg Connection"
        raise InvalidArgument(f"join() takes {kinds}, not {type(conn).__name__}")
    if conn.autocommit:
        raise InvalidArgument("join() needs a connection in a transaction (autocommit is on)")
    return is_async


class JoinedTx(Session):
    """A ``TxSession`` over the application's psycopg connection."""

    def __init__(self, runtime: Runtime, conn: Any) -> None:
        self._async = check_joinable(conn, allow_async=True)
        super().__init__()
        self._runtime = runtime
        self._conn = conn

    async def _end(self, commit: bool) -> None:
        """Never called: the handle refuses (the application owns the commit)."""
        raise AssertionError("a joined transaction is finished by the application")

    async def run(self, plan: Plan[T]) -> T:
        self.check_open(plan)
        try:
            if self._async:
                return await _drive_async(self._conn, plan)
            return await self._runtime.run_in_thread(lambda: drive_sync(self._conn, plan))
        except psycopg.Error as exc:
            raise wrap_error(exc, exc.sqlstate) from exc

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        return await self.run(user_statement(sql, params))


class JoinedSyncTx(BlockingSession):
    """``JoinedTx`` for ``alkstore.sync``: the same steps on the application's
    sync psycopg connection, on the calling thread."""

    def __init__(self, conn: Any) -> None:
        check_joinable(conn, allow_async=False)
        super().__init__()
        self._conn = conn

    def _end(self, commit: bool) -> None:
        raise AssertionError("a joined transaction is finished by the application")

    def run(self, plan: Plan[T]) -> T:
        self.lifecycle.check(plan)
        try:
            return drive_sync(self._conn, plan)
        except psycopg.Error as exc:
            raise wrap_error(exc, exc.sqlstate) from exc

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        return self.run(user_statement(sql, params))
