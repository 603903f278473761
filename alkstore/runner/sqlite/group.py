"""Running several plans in one SQLite transaction, synchronously.

A group commits its plans together: one ``BEGIN``, a savepoint per plan (a
plan that fails rolls back alone and its neighbours still commit), one
``COMMIT``. Used by the writer thread for what queued up while it was busy,
and on the event-loop thread for what callers submitted in the same tick
(``sqlite_inline.py``). The outcome of each plan is a value, never raised:
``Done(value, wakes)`` or ``Failed(error)``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...engines.sqlite import control
from ...protocol.plan import Plan
from ...protocol.values.errors import (
    AlkstoreError,
    CommitUnknown,
    DatabaseError,
    TransactionConflict,
)
from . import conn as sqlite_conn
from .file import DatabaseFile


@dataclass(slots=True)
class Done:
    value: Any
    wakes: list[str]


@dataclass(slots=True)
class Failed:
    error: BaseException


Outcome = Done | Failed


class Busy(Exception):
    """``BEGIN`` found the lock taken (past the connection's busy timeout,
    which may be 0): nothing ran, so the plans may go to a connection that
    waits. ``conflict`` is the error to report if none will."""

    def __init__(self, conflict: TransactionConflict) -> None:
        super().__init__(str(conflict))
        self.conflict = conflict


def run_group(
    conn: sqlite3.Connection,
    plans: Sequence[Plan[Any]],
    *,
    write: bool,
    file: DatabaseFile | None,
) -> list[Outcome]:
    """Run ``plans`` in one transaction; one outcome per plan, in order.
    Raises ``Busy`` (and runs nothing) when ``BEGIN`` cannot have the lock."""
    # Known lost: fail before running anything. Otherwise the file is
    # checked after the work (one stat a group): what ran in a lost file is
    # reported failed, never done.
    if file is not None and file.lost is not None:
        for plan in plans:
            plan.close()
        return [Failed(DatabaseError(file.lost)) for _ in plans]
    try:
        conn.execute(control.BEGIN_WRITE if write else control.BEGIN_READ)
    except sqlite3.Error as exc:
        error = sqlite_conn.error(exc)
        error.__cause__ = exc
        if isinstance(error, TransactionConflict):
            raise Busy(error) from exc  # nothing has run: the plans can go elsewhere
        for plan in plans:
            plan.close()
        return [Failed(error) for _ in plans]
    if len(plans) == 1:
        # Alone: its own transaction, no savepoint.
        try:
            value, wakes = sqlite_conn.run_begun(conn, plans[0])
        except BaseException as exc:
            return [Failed(exc)]
        lost = _file_lost(file)
        return [Failed(lost) if lost is not None else Done(value, wakes)]
    results: list[Outcome] = []
    for index, plan in enumerate(plans):
        try:
            value, wakes = sqlite_conn.run_in_tx(conn, plan)
            results.append(Done(value, wakes))
        except BaseException as exc:
            results.append(Failed(exc))
        if not conn.in_transaction:
            # Some errors (disk full, I/O) make SQLite roll back the whole
            # transaction: nothing in this group committed, and the rest
            # must not run in autocommit mode behind our back.
            failed = results[-1]
            cause = failed.error if isinstance(failed, Failed) else None
            for rest in plans[index + 1 :]:
                rest.close()
            out: list[Outcome] = [
                r if isinstance(r, Failed) else Failed(rolled_back(cause)) for r in results
            ]
            return out + [Failed(rolled_back(cause)) for _ in plans[index + 1 :]]
    try:
        sqlite_conn.commit(conn)
    except CommitUnknown as exc:
        # Each plan's own wakes: it may have committed, so look again.
        return [r if isinstance(r, Failed) else Failed(_unknown(exc, r.wakes)) for r in results]
    except AlkstoreError as exc:
        return [r if isinstance(r, Failed) else Failed(exc) for r in results]
    lost = _file_lost(file)
    if lost is not None:
        return [r if isinstance(r, Failed) else Failed(lost) for r in results]
    return results


def _file_lost(file: DatabaseFile | None) -> DatabaseError | None:
    if file is None:
        return None
    try:
        file.check()
    except DatabaseError as exc:
        return exc
    return None


def _unknown(exc: CommitUnknown, wakes: list[str]) -> CommitUnknown:
    error = CommitUnknown(str(exc), tuple(wakes))
    error.__cause__ = exc.__cause__
    return error


def rolled_back(cause: BaseException | None) -> DatabaseError:
    """The error of work lost because SQLite rolled back its transaction."""
    # Chain the driver's error (the contract's __cause__), not our wrapper.
    if isinstance(cause, AlkstoreError) and cause.__cause__ is not None:
        cause = cause.__cause__
    error = DatabaseError(f"SQLite rolled back the whole transaction after an error: {cause}")
    error.__cause__ = cause
    return error


def as_error(exc: BaseException) -> BaseException:
    """``exc`` as the taxonomy has it: a raw ``sqlite3`` error becomes its
    ``DatabaseError`` (chained); anything else is left as it is."""
    if isinstance(exc, sqlite3.Error):
        error = sqlite_conn.error(exc)
        error.__cause__ = exc
        return error
    return exc


class CallerTx:
    """A caller's transaction on ``conn``, driven synchronously step by step:
    by the writer thread for ``store.transaction()``, and on the caller's
    own thread by ``alkstore.sync``. Each step runs in a savepoint
    (``sqlite_conn.run_in_tx`` / ``execute_user``); its errors are the
    taxonomy's.

    Once SQLite rolled the whole transaction back after a failed step, later
    steps would run in autocommit mode and a COMMIT would report success for
    work that is gone: both fail instead."""

    __slots__ = ("_conn", "_file", "_lost")

    def __init__(self, conn: sqlite3.Connection, file: DatabaseFile | None) -> None:
        self._conn = conn
        self._file = file
        self._lost: BaseException | None = None

    def begin(self) -> None:
        """BEGIN (the write lock), unless the file is known lost."""
        gone = _file_lost(self._file)
        if gone is not None:
            raise gone
        try:
            sqlite_conn.begin(self._conn)
        except BaseException as exc:
            raise as_error(exc)  # noqa: B904 (chained to the driver error by as_error)

    def step(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """``fn(conn)`` inside the transaction."""
        if self._lost is not None:
            raise rolled_back(self._lost)
        try:
            return fn(self._conn)
        except BaseException as exc:
            if not self._conn.in_transaction:
                self._lost = exc
            raise as_error(exc)  # noqa: B904 (chained to the driver error by as_error)

    def finish(self, commit: bool) -> None:
        """COMMIT (then check the file is still there) or ROLLBACK. A failed
        COMMIT leaves nothing half-done: it rolls back."""
        conn = self._conn
        if self._lost is not None and commit:
            raise rolled_back(self._lost)
        try:
            sqlite_conn.finish(conn, commit)
            gone = _file_lost(self._file) if commit else None
        except BaseException as exc:
            with contextlib.suppress(AlkstoreError):
                sqlite_conn.finish(conn, False)
            raise as_error(exc)  # noqa: B904 (chained to the driver error by as_error)
        if gone is not None:
            raise gone
