"""The blocking SQLite executor of ``alkstore.sync``: plans run on the
calling thread, on one connection guarded by a lock.

Nothing here is new logic: a plan runs as the writer thread runs a group of
one (``sqlite_group.run_group``: BEGIN IMMEDIATE, the plan, COMMIT, the
file's loss checked, a busy file reported as ``TransactionConflict``), and a
caller's transaction steps as the writer thread steps it
(``sqlite_group.CallerTx``). ``join`` rides in an application's own
``sqlite3`` connection, each step in a savepoint of its transaction.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ...engines.sqlite import SqliteDialect, control
from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.plan import Plan, is_read_only
from ...protocol.values.errors import InvalidArgument, UsageError
from ..sync_session import Session, StoreLock, transaction_block
from . import conn as sqlite_conn
from . import group as sqlite_group
from .file import DatabaseFile

T = TypeVar("T")


class SqliteTx(Session):
    """A transaction on the store's own connection (``store.transaction()``)."""

    def __init__(self, caller: sqlite_group.CallerTx) -> None:
        super().__init__()
        self._caller = caller

    def run(self, plan: Plan[T]) -> T:
        self.lifecycle.check(plan)
        value, _ = self._caller.step(lambda conn: sqlite_conn.run_in_tx(conn, plan))
        return value  # type: ignore[no-any-return]

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        self.lifecycle.check()
        return self._caller.step(lambda conn: sqlite_conn.execute_user(conn, sql, params))  # type: ignore[no-any-return]

    def _end(self, commit: bool) -> None:
        self._caller.finish(commit)


class JoinedSqliteTx(Session):
    """Steps in the application's transaction on its own connection. Rows
    are read through a cursor of alkstore's own (plain tuples whatever the
    connection's ``row_factory``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__()
        self._conn = conn
        self._caller = sqlite_group.CallerTx(conn, None)

    def _cursor(self) -> sqlite3.Cursor:
        cursor = self._conn.cursor()
        cursor.row_factory = None
        return cursor

    def run(self, plan: Plan[T]) -> T:
        self.lifecycle.check(plan)
        wakes: list[str] = []

        def step(conn: sqlite3.Connection) -> T:
            cursor = self._cursor()
            try:
                return sqlite_conn.in_step(conn, lambda: sqlite_conn.drive(cursor, plan, wakes))  # type: ignore[arg-type]
            finally:
                cursor.close()

        return self._caller.step(step)  # type: ignore[no-any-return]

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        self.lifecycle.check()
        return self._caller.step(lambda conn: sqlite_conn.execute_user(conn, sql, params))  # type: ignore[no-any-return]

    def _end(self, commit: bool) -> None:
        raise AssertionError("a joined transaction is finished by the application")


class SqliteBlocking:
    """One connection (WAL, the store's pragmas and busy timeout), one
    thread at a time."""

    dialect = SqliteDialect()

    def __init__(self, conn: sqlite3.Connection, file: DatabaseFile | None) -> None:
        self._conn = conn
        self._file = file
        self._lock = StoreLock()
        self._lifecycle = Lifecycle("store")

    def run(self, plan: Plan[T], bulk: bool = False) -> T:
        self._lifecycle.check(plan)
        with self._lock.held(plan):
            self._lifecycle.check(plan)  # closed while this thread waited
            try:
                (outcome,) = sqlite_group.run_group(
                    self._conn, [plan], write=not is_read_only(plan), file=self._file
                )
            except sqlite_group.Busy as busy:
                # The connection waited its busy timeout for the lock already.
                plan.close()
                raise busy.conflict from busy.conflict.__cause__
        if isinstance(outcome, sqlite_group.Failed):
            raise sqlite_group.as_error(outcome.error)
        return outcome.value  # type: ignore[no-any-return]

    @contextmanager
    def transaction(self) -> Iterator[SqliteTx]:
        self._lifecycle.check()
        with self._lock.held():
            self._lifecycle.check()
            caller = sqlite_group.CallerTx(self._conn, self._file)
            caller.begin()
            with transaction_block(SqliteTx(caller)) as tx:
                yield tx

    def join(self, connection: Any) -> JoinedSqliteTx:
        """A session in the transaction ``connection`` holds; see docs/sync.md."""
        if not isinstance(connection, sqlite3.Connection):
            raise InvalidArgument(
                "join() on a SQLite store takes a sqlite3.Connection, not "
                f"{type(connection).__name__}"
            )
        self._check_same_file(connection)
        _open_transaction(connection)
        return JoinedSqliteTx(connection)

    def _check_same_file(self, connection: sqlite3.Connection) -> None:
        try:
            rows = connection.execute(control.DATABASE_LIST).fetchall()
        except sqlite3.Error as exc:
            raise sqlite_conn.error(exc, "join(): cannot read the connection's database") from exc
        theirs = next((str(r[2]) for r in rows if r[1] == "main"), "")
        ours = None if self._file is None else self._file.path
        if not theirs or ours is None or not _same_file(theirs, ours):
            raise UsageError(
                f"join() needs a connection to this store's database file ({ours or 'in memory'}); "
                f"this one is to {theirs or 'an in-memory database'}"
            )

    def close(self) -> None:
        if not self._lifecycle.close():
            return
        # Waits for a thread running a plan or holding a transaction.
        with self._lock.held():
            sqlite_conn.close(self._conn)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _open_transaction(conn: sqlite3.Connection) -> None:
    """Make sure ``conn`` is in a transaction alkstore's steps can ride in.

    In a transaction already: nothing to do. In Python's legacy implicit
    mode (``isolation_level`` not None, the default, and what SQLAlchemy's
    pysqlite uses), with no transaction open yet: open the one Python would
    open before the application's next write (``BEGIN`` of its
    ``isolation_level``), committed or rolled back by the application's
    ``commit()``/``rollback()``. Otherwise (``isolation_level=None``, as
    Django sets it, outside ``atomic()``; or ``autocommit=True``): a
    ``UsageError``, since each statement would commit on its own."""
    if conn.in_transaction:
        return
    legacy = getattr(conn, "autocommit", -1) == getattr(sqlite3, "LEGACY_TRANSACTION_CONTROL", -1)
    level = conn.isolation_level
    if legacy and level is not None:
        begin = control.BEGIN_AS.get(level.upper())
        if begin is not None:
            sqlite_conn.guarded(conn.execute, begin)
            return
    raise UsageError(
        "join() needs the connection inside a transaction: it is in autocommit mode with none "
        "open, so every statement would commit on its own (open one first; with Django, join "
        "inside transaction.atomic())"
    )
