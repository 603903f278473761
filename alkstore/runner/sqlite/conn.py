"""Running plans on a sqlite3 connection, synchronously, on the caller's thread.

The async executor hands a whole plan to a worker thread in one hop; this
module is what runs there. It owns the mapping from sqlite3's exceptions to
the taxonomy: nothing raw escapes.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

from ...engines.sqlite import SCHEMA_VERSION, control, migrate, needs_migration, schema_version
from ...protocol.plan import Fetch, FinalStatementError, Plan, Statement, shape
from ...protocol.rows import require_schema
from ...protocol.values.backoff import ErrorBackoff, exact
from ...protocol.values.errors import (
    AlkstoreError,
    CommitUnknown,
    DatabaseError,
    TransactionConflict,
)
from ...protocol.values.timeconv import US_PER_S

T = TypeVar("T")

# A busy set-up statement is tried again after 1 ms, doubling to 50 ms: soon
# after the other opener is done, without spinning while it is not.
_BUSY_BACKOFF = exact(1_000, 50_000)


def error(exc: sqlite3.Error, what: str = "SQLite") -> DatabaseError:
    """The taxonomy's error for ``exc`` (not raised; the caller chains it)."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    kind = TransactionConflict if code in control.CONFLICT_CODES else DatabaseError
    return kind(f"{what}: {exc}")


def connect(
    path: str, *, busy_timeout: float, pragmas: dict[str, str], read_only: bool = False
) -> sqlite3.Connection:
    """A connection set up for alkstore; ``read_only``: one that leaves the
    file as it is (``path`` is then a ``mode=ro`` URI)."""
    try:
        conn = sqlite3.connect(
            path,
            timeout=busy_timeout,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # serialised by the executor's writer slot
            cached_statements=256,
            uri=path.startswith("file:"),
        )
    except sqlite3.Error as exc:
        raise error(exc, f"cannot open SQLite database {shown(path)!r}") from exc
    try:
        for statement in control.setup_statements(busy_timeout, pragmas, read_only=read_only):
            _execute_retrying_busy(conn, statement, busy_timeout)
    except AlkstoreError:
        conn.close()
        raise
    except sqlite3.Error as exc:
        conn.close()
        raise error(exc, f"cannot configure SQLite database {shown(path)!r}") from exc
    return conn


def shown(path: str) -> str:
    """``path`` as its user gave it: a ``file:`` URI of a read-only open
    shows as the file's path, not the URI alkstore made of it."""
    if not path.startswith("file:"):
        return path
    return unquote(path.removeprefix("file:").split("?", 1)[0])


def _execute_retrying_busy(conn: sqlite3.Connection, sql: str, timeout: float) -> None:
    """Run a set-up statement, retrying SQLITE_BUSY for up to ``timeout`` seconds.

    Switching a new database file to WAL returns SQLITE_BUSY without calling
    the busy handler while another connection is doing the same, so two
    processes opening a fresh database at once would otherwise fail.
    """
    deadline = time.monotonic() + timeout
    busy = ErrorBackoff(_BUSY_BACKOFF)
    while True:
        try:
            conn.execute(sql)
            return
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            if time.monotonic() >= deadline:
                raise
        time.sleep(busy.failed() / US_PER_S)


def execute(conn: sqlite3.Connection, statement: Statement) -> Any:
    cursor = conn.execute(statement.sql, statement.params)
    fetch = statement.fetch
    if fetch is Fetch.NONE:
        return None
    # Rows first: for DML with RETURNING, rowcount is known once they are read.
    rows = cursor.fetchall() if fetch.reads_rows else ()
    return shape(fetch, rows, cursor.rowcount, cursor.lastrowid)


def drive(conn: sqlite3.Connection, plan: Plan[T], wakes: list[str]) -> T:
    """Run ``plan`` on ``conn``; collect the channels its statements notify.

    ``run_sync(plan, noting_wakes(execute))`` written out as one loop: it
    runs every statement of every plan, and the layers of calls cost about
    as much as a small statement's SQL."""
    run = conn.execute
    try:
        statement = next(plan)
        while True:
            if statement.wakes:
                wakes.extend(statement.wakes)
            cursor = run(statement.sql, statement.params)
            fetch = statement.fetch
            # Rows first: for DML with RETURNING, rowcount is known once they are read.
            rows = cursor.fetchall() if fetch.reads_rows else ()
            final = statement.final
            statement = plan.send(shape(fetch, rows, cursor.rowcount, cursor.lastrowid))
            if final:
                plan.close()
                raise FinalStatementError(statement)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def commit(conn: sqlite3.Connection, wakes: Sequence[str] = ()) -> None:
    """COMMIT, telling a refused commit (``DatabaseError``: rolled back) from
    one whose outcome is unknown (``CommitUnknown``): an I/O error while
    committing, such as a failed fsync, may leave the transaction's frames in
    the WAL, where recovery after a crash finds them committed."""
    try:
        conn.execute(control.COMMIT)
    except sqlite3.Error as exc:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute(control.ROLLBACK)
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code == control.IOERR:
            raise CommitUnknown(
                f"SQLite: I/O error while committing ({exc}); the transaction may or may "
                "not have committed (it may reappear after a crash)",
                tuple(wakes),
            ) from exc
        raise error(exc) from exc


def run_plan(conn: sqlite3.Connection, plan: Plan[T], *, write: bool) -> tuple[T, list[str]]:
    """One plan, one transaction. Any failure rolls the whole plan back."""
    guarded(conn.execute, control.BEGIN_WRITE if write else control.BEGIN_READ)
    return run_begun(conn, plan)


def run_begun(conn: sqlite3.Connection, plan: Plan[T]) -> tuple[T, list[str]]:
    """The rest of ``run_plan`` once its transaction has begun."""
    wakes: list[str] = []
    try:
        try:
            value = drive(conn, plan, wakes)
        except BaseException:
            if conn.in_transaction:
                conn.execute(control.ROLLBACK)
            raise
    except sqlite3.Error as exc:
        raise error(exc) from exc
    commit(conn, wakes)
    return value, wakes


def begin(conn: sqlite3.Connection) -> None:
    guarded(conn.execute, control.BEGIN_WRITE)


def run_in_tx(conn: sqlite3.Connection, plan: Plan[T]) -> tuple[T, list[str]]:
    """A plan inside a caller's open transaction; a failure leaves the tx open."""
    wakes: list[str] = []
    value = in_step(conn, lambda: drive(conn, plan, wakes))
    return value, wakes


def in_step(conn: sqlite3.Connection, body: Callable[[], T]) -> T:
    """``body`` in a savepoint of the open transaction, so that a failed step
    undoes only itself: no partial write of it survives, and the caller
    decides about the rest. SQLite's errors become the taxonomy's."""
    try:
        conn.execute(control.STEP_SAVEPOINT)
        try:
            value = body()
        except BaseException:
            _undo_step(conn)
            raise
        conn.execute(control.STEP_RELEASE)
    except sqlite3.Error as exc:
        raise error(exc) from exc
    return value


def _undo_step(conn: sqlite3.Connection) -> None:
    """Undo a failed step's savepoint, if SQLite has not already undone more.

    Some errors (SQLITE_FULL outside a statement journal, I/O errors) make
    SQLite roll back the whole transaction, savepoints included: then there
    is nothing left to undo here, and the step's own error must surface, not
    "no such savepoint". The caller sees ``conn.in_transaction`` is false.
    """
    if conn.in_transaction:
        conn.execute(control.STEP_ROLLBACK)
        conn.execute(control.STEP_RELEASE)


def execute_user(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any] | dict[str, Any]
) -> list[tuple[Any, ...]]:
    """The caller's own SQL inside a transaction; returns any rows."""
    rows: list[tuple[Any, ...]] = in_step(conn, lambda: conn.execute(sql, params).fetchall())
    return rows


def finish(conn: sqlite3.Connection, committing: bool) -> None:
    if not conn.in_transaction:
        return
    if committing:
        commit(conn)
    else:
        guarded(conn.execute, control.ROLLBACK)


def set_up(conn: sqlite3.Connection, *statements: str) -> sqlite3.Connection:
    """``conn`` after running ``statements`` on it (a pragma for its role);
    closed instead when one fails, so no half-made connection is left open."""
    try:
        for statement in statements:
            guarded(conn.execute, statement)
    except BaseException:
        conn.close()
        raise
    return conn


def guarded(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except sqlite3.Error as exc:
        raise error(exc) from exc


def ensure_schema(conn: sqlite3.Connection) -> int:
    """Read the schema version and claim generation; migrate (a write) only
    when either is behind, so opening a current database never waits for
    the write lock."""
    behind, _ = run_plan(conn, needs_migration(), write=False)
    if not behind:
        return SCHEMA_VERSION
    value, _ = run_plan(conn, migrate(), write=True)
    return value


def check_schema(conn: sqlite3.Connection, where: str) -> int:
    """Read the schema version and refuse any but this code's
    (``SchemaMismatch``): what a read-only store does instead of migrating."""
    version, _ = run_plan(conn, schema_version(where), write=False)
    return require_schema(version, SCHEMA_VERSION, where)


def data_version(conn: sqlite3.Connection) -> int:
    row = guarded(lambda: conn.execute(control.DATA_VERSION).fetchone())
    return int(row[0])


def close(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error as exc:  # pragma: no cover - close rarely fails
        raise error(exc) from exc

