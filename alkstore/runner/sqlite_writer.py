"""The writer slot: one long-lived thread that owns the SQLite connection.

Every plan of the store runs here, whole, in one hop from the event loop.
Plans that arrive while the thread is busy are committed together: one
transaction, a savepoint per plan, so a plan that fails rolls back alone and
its neighbours still commit. A caller's transaction takes the thread for
itself until it commits or rolls back.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..engines.sqlite import control
from ..protocol.errors import AlkstoreError, Closed, CommitUnknown, DatabaseError
from ..protocol.plan import Plan
from . import sqlite_conn
from .runtime import Completion
from .sqlite_file import DatabaseFile

# Plans committed together at most; bounds the latency a group adds.
MAX_GROUP = 64


@dataclass(slots=True)
class PlanItem:
    plan: Plan[Any]
    done: Completion[tuple[Any, list[str]]]


@dataclass(slots=True)
class TxItem:
    """Begin a caller transaction; its steps then come through ``steps``."""

    done: Completion[None]
    steps: queue.SimpleQueue[TxStep] = field(default_factory=queue.SimpleQueue)


@dataclass(slots=True)
class TxStep:
    # "run": fn(conn) -> value; "commit"/"rollback": end the transaction.
    kind: str
    done: Completion[Any]
    fn: Callable[[sqlite3.Connection], Any] | None = None


class _Stop:
    pass


Item = PlanItem | TxItem | _Stop


class SqliteWriter:
    def __init__(
        self,
        conn: sqlite3.Connection,
        name: str = "alkstore-sqlite-writer",
        file: DatabaseFile | None = None,
    ) -> None:
        self._conn = conn
        # Checked after every commit: a commit into a deleted file is lost.
        self._file = file
        self._inbox: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    # -- event-loop side ---------------------------------------------------
    def submit(self, item: PlanItem | TxItem) -> None:
        with self._lock:
            if self._closed:
                raise Closed("store is closed")
            self._inbox.put(item)

    def stop(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._inbox.put(_Stop())

    def join(self) -> None:
        self._thread.join()

    # -- writer thread -------------------------------------------------------
    def _main(self) -> None:
        try:
            while True:
                item = self._inbox.get()
                if isinstance(item, _Stop):
                    return
                if isinstance(item, TxItem):
                    self._transaction(item)
                    continue
                group = [item]
                pending: Item | None = None
                while len(group) < MAX_GROUP:
                    try:
                        nxt = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if isinstance(nxt, PlanItem):
                        group.append(nxt)
                    else:
                        pending = nxt
                        break
                self._run_group(group)
                if isinstance(pending, _Stop):
                    return
                if isinstance(pending, TxItem):
                    self._transaction(pending)
        finally:
            self._drain_after_stop()
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()

    def _drain_after_stop(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, PlanItem | TxItem):
                item.done.reject(Closed("store is closed"))

    def _file_lost(self) -> DatabaseError | None:
        if self._file is None:
            return None
        try:
            self._file.check()
        except DatabaseError as exc:
            return exc
        return None

    def _run_group(self, group: list[PlanItem]) -> None:
        conn = self._conn
        lost = self._file_lost()
        if lost is not None:
            for item in group:
                item.plan.close()
                item.done.reject(lost)
            return
        if len(group) == 1:
            item = group[0]
            try:
                result = sqlite_conn.run_plan(conn, item.plan, write=True)
            except BaseException as exc:
                item.done.reject(_as_error(exc))
                return
            lost = self._file_lost()
            if lost is not None:
                item.done.reject(lost)
            else:
                item.done.resolve(result)
            return
        results: list[tuple[PlanItem, Any, BaseException | None]] = []
        try:
            conn.execute(control.BEGIN_WRITE)
        except sqlite3.Error as exc:
            for item in group:
                item.done.reject(_as_error(exc))
            return
        for index, item in enumerate(group):
            try:
                results.append((item, sqlite_conn.run_in_tx(conn, item.plan), None))
            except BaseException as exc:
                results.append((item, None, _as_error(exc)))
            if not conn.in_transaction:
                # Some errors (disk full, I/O) make SQLite roll back the whole
                # transaction: nothing in this group committed, and the rest
                # must not run in autocommit mode behind our back.
                cause = results[-1][2]
                for done_item, _, failure in results:
                    done_item.done.reject(failure or _rolled_back(cause))
                for rest in group[index + 1 :]:
                    rest.plan.close()
                    rest.done.reject(_rolled_back(cause))
                return
        try:
            sqlite_conn.commit(conn)
        except CommitUnknown as exc:
            for item, value, failure in results:
                # Each plan's own wakes: it may have committed, so look again.
                item.done.reject(failure or _unknown(exc, value[1]))
            return
        except AlkstoreError as exc:
            for item, _, failure in results:
                item.done.reject(failure or exc)
            return
        lost = self._file_lost()
        for item, value, failure in results:
            error = failure if failure is not None else lost
            if error is None:
                item.done.resolve(value)
            else:
                item.done.reject(error)

    def _transaction(self, tx: TxItem) -> None:
        conn = self._conn
        gone = self._file_lost()
        if gone is not None:
            tx.done.reject(gone)
            return
        try:
            sqlite_conn.begin(conn)
        except BaseException as exc:
            tx.done.reject(_as_error(exc))
            return
        tx.done.resolve(None)
        # Set when SQLite rolled the whole transaction back after a failed
        # step: later steps would run in autocommit mode, and a COMMIT would
        # report success for work that is gone. Both fail instead.
        lost: BaseException | None = None
        while True:
            step = tx.steps.get()
            if step.kind == "run":
                assert step.fn is not None
                if lost is not None:
                    step.done.reject(_rolled_back(lost))
                    continue
                try:
                    step.done.resolve(step.fn(conn))
                except BaseException as exc:
                    step.done.reject(_as_error(exc))
                    if not conn.in_transaction:
                        lost = exc
                continue
            if lost is not None and step.kind == "commit":
                step.done.reject(_rolled_back(lost))
                return
            try:
                sqlite_conn.finish(conn, step.kind == "commit")
                gone = self._file_lost() if step.kind == "commit" else None
                if gone is not None:
                    step.done.reject(gone)
                else:
                    step.done.resolve(None)
            except BaseException as exc:
                # A failed COMMIT leaves nothing half-done: roll back.
                with contextlib.suppress(AlkstoreError):
                    sqlite_conn.finish(conn, False)
                step.done.reject(_as_error(exc))
            return


def _unknown(exc: CommitUnknown, wakes: list[str]) -> CommitUnknown:
    error = CommitUnknown(str(exc), tuple(wakes))
    error.__cause__ = exc.__cause__
    return error


def _rolled_back(cause: BaseException | None) -> DatabaseError:
    """The error of work lost because SQLite rolled back its transaction."""
    # Chain the driver's error (the contract's __cause__), not our wrapper.
    if isinstance(cause, AlkstoreError) and cause.__cause__ is not None:
        cause = cause.__cause__
    error = DatabaseError(f"SQLite rolled back the whole transaction after an error: {cause}")
    error.__cause__ = cause
    return error


def _as_error(exc: BaseException) -> BaseException:
    if isinstance(exc, sqlite3.Error):
        error = sqlite_conn.error(exc)
        error.__cause__ = exc
        return error
    return exc
