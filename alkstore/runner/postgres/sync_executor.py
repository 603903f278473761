"""The blocking Postgres executor of ``alkstore.sync``: plans run on the
calling thread, on one psycopg (sync) connection guarded by a lock.

The connection is out of autocommit mode: psycopg opens each transaction
itself before its first statement (``BEGIN ISOLATION LEVEL REPEATABLE
READ, READ ONLY`` for a ``ReadPlan``: one snapshot for all its statements,
as the async executor's reads), and the executor commits or rolls back. A
plan's statements go through a cursor as in ``join`` (``pg_join``), errors
become the taxonomy's as on every path (``pg_wire.wrap_error``), and a
COMMIT whose answer never came is a ``CommitUnknown``. A connection found
broken is replaced at the next call; a read that failed on one runs again,
once, on a fresh one (it changed nothing), as the async executor's do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...engines.postgres import control
from ...protocol.dialect import Dialect
from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.plan import Plan, is_read_only
from ...protocol.values.errors import CommitUnknown, DatabaseError, InvalidArgument
from ..sync_session import Session, StoreLock, transaction_block
from .join import JoinedSyncTx, drive_cursor, user_statement
from .wire import wrap_error

T = TypeVar("T")


def connect(
    dsn: str, connect_timeout: float, prepare_threshold: int | None = None
) -> psycopg.Connection[Any]:
    """A sync connection out of autocommit mode; ``connect_timeout`` unless
    the DSN sets its own; psycopg prepares what it has sent
    ``prepare_threshold`` times (``PostgresOptions.prepare_threshold``)."""
    extra = {}
    if "connect_timeout" not in conninfo_to_dict(dsn):
        # libpq's unit is whole seconds (and it treats 1 as 2).
        extra["connect_timeout"] = str(max(2, round(connect_timeout)))
    try:
        return psycopg.connect(
            make_conninfo(dsn, **extra), autocommit=False, prepare_threshold=prepare_threshold
        )
    except psycopg.Error as exc:
        raise DatabaseError(f"PostgreSQL: cannot connect: {exc}") from exc


def _failed(exc: psycopg.Error) -> DatabaseError:
    return wrap_error(exc, exc.sqlstate)


def _rollback(conn: psycopg.Connection[Any]) -> None:
    """Best effort: a connection that cannot roll back is broken, and
    replaced at the next call (the server rolls back when it notices)."""
    if conn.closed or conn.broken:
        return
    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def _commit(conn: psycopg.Connection[Any]) -> None:
    """COMMIT, telling a refused commit (``DatabaseError``, rolled back)
    from one whose answer never came (``CommitUnknown``)."""
    try:
        conn.commit()
    except psycopg.Error as exc:
        if conn.closed or conn.broken:
            raise CommitUnknown(
                f"PostgreSQL: connection lost while committing; it may or may not have committed "
                f"({exc})"
            ) from exc
        _rollback(conn)
        raise _failed(exc) from exc


class PgTx(Session):
    """A caller's transaction on the store's connection: each step in a
    savepoint (as the async ``PgTx``), so a failed step is undone alone and
    the transaction stays usable."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        super().__init__()
        self._conn = conn

    def _step(self, body: Callable[[psycopg.Cursor[Any]], T]) -> T:
        conn = self._conn
        try:
            with conn.cursor() as cur:
                cur.execute(control.STEP_SAVEPOINT)  # psycopg BEGINs first, if need be
                try:
                    value = body(cur)
                except BaseException:
                    if not conn.broken:
                        cur.execute(control.STEP_ROLLBACK)
                        cur.execute(control.STEP_RELEASE)
                    raise
                cur.execute(control.STEP_RELEASE)
        except psycopg.Error as exc:
            raise _failed(exc) from exc
        return value

    def run(self, plan: Plan[T]) -> T:
        self.lifecycle.check(plan)
        return self._step(lambda cur: drive_cursor(cur, plan))

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if isinstance(params, dict):
            raise InvalidArgument("on Postgres, tx.execute takes positional $1, $2 ... params")
        self.lifecycle.check()
        plan = user_statement(sql, params)
        return self._step(lambda cur: drive_cursor(cur, plan))

    def _end(self, commit: bool) -> None:
        if commit:
            _commit(self._conn)
        else:
            _rollback(self._conn)


class PgBlocking:
    """One connection, one thread at a time."""

    def __init__(
        self,
        dsn: str,
        dialect: Dialect,
        connect_timeout: float,
        prepare_threshold: int | None = None,
    ) -> None:
        self._dsn = dsn
        self._dialect = dialect
        self._connect_timeout = connect_timeout
        self._prepare_threshold = prepare_threshold
        self._lock = StoreLock()
        self._lifecycle = Lifecycle("store")
        self._conn: psycopg.Connection[Any] | None = connect(
            dsn, connect_timeout, prepare_threshold
        )

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    def _connection(self, *, read_only: bool) -> psycopg.Connection[Any]:
        """The store's connection (a fresh one if it broke), set so that its
        next transaction is a read in one snapshot (``control.BEGIN_READ``)
        or a read-write one at the server's default isolation."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self._conn = None
            if conn is not None:
                conn.close()
            conn = self._conn = connect(
                self._dsn, self._connect_timeout, self._prepare_threshold
            )
        if conn.read_only != read_only:
            conn.read_only = read_only
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if read_only else None
        return conn

    def run(self, plan: Plan[T], bulk: bool = False) -> T:
        self._lifecycle.check(plan)
        with self._lock.held(plan):
            self._lifecycle.check(plan)
            if not is_read_only(plan):
                return self._run(self._connection(read_only=False), plan)
            for last in (False, True):
                conn = self._connection(read_only=True)
                try:
                    return self._run(conn, plan)
                except DatabaseError:
                    if last or not conn.broken:
                        raise
                plan = plan.again()
        raise AssertionError("unreachable")  # pragma: no cover

    def _run(self, conn: psycopg.Connection[Any], plan: Plan[T]) -> T:
        try:
            with conn.cursor() as cur:
                value = drive_cursor(cur, plan)
        except BaseException as exc:
            plan.close()
            _rollback(conn)
            if isinstance(exc, psycopg.Error):
                raise _failed(exc) from exc
            raise
        _commit(conn)
        return value

    @contextmanager
    def transaction(self) -> Iterator[PgTx]:
        self._lifecycle.check()
        with self._lock.held():
            self._lifecycle.check()
            with transaction_block(PgTx(self._connection(read_only=False))) as tx:
                yield tx

    def join(self, connection: Any) -> JoinedSyncTx:
        return JoinedSyncTx(connection)

    def close(self) -> None:
        if not self._lifecycle.close():
            return
        with self._lock.held():
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
