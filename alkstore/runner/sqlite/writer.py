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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...engines.sqlite import control
from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.plan import Plan
from ...protocol.values.backoff import LOCK_WAIT_BACKOFF, ErrorBackoff
from ...protocol.values.errors import Closed, DatabaseError, TransactionConflict
from ...protocol.values.timeconv import US_PER_S
from ..runtime import Completion
from . import group as sqlite_group
from .file import DatabaseFile

T = TypeVar("T")

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


class Checkpoint:
    """Checkpoint the WAL (for the event-loop thread's connection, which
    never does it itself); best effort, nobody waits for it. Set on the
    writer thread, read on the loop's: ``done`` once it ran, ``frames`` the
    log's frames it found (-1: it failed), ``complete`` whether it copied them
    all. The asker's notes: ``commits`` it counted since its last ask,
    ``blocking`` whether its writes wait for this one."""

    __slots__ = ("blocking", "commits", "complete", "done", "frames")

    def __init__(self) -> None:
        self.done = False
        self.frames = -1
        self.complete = False
        self.commits = 0
        self.blocking = False


Item = PlanItem | TxItem | Checkpoint | _Stop


class SqliteWriter:
    def __init__(
        self,
        conn: sqlite3.Connection,
        name: str = "alkstore-sqlite-writer",
        file: DatabaseFile | None = None,
        busy_timeout: float = 0.0,
    ) -> None:
        # ``busy_timeout``: how long a write waits for another connection's
        # lock (``conn``'s own busy timeout must be 0: see _waiting_for_the_lock).
        self._conn = conn
        self._busy_timeout = busy_timeout
        # Checked after every commit: a commit into a deleted file is lost.
        self._file = file
        self._inbox: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self._lifecycle = Lifecycle("store")
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    # -- event-loop side ---------------------------------------------------
    def submit(self, item: PlanItem | TxItem | Checkpoint) -> None:
        with self._lock:
            self._lifecycle.check()
            self._inbox.put(item)

    def stop(self) -> None:
        with self._lock:
            if not self._lifecycle.close():
                return
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
                if isinstance(item, Checkpoint):
                    self._checkpoint(item)
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
                if isinstance(pending, Checkpoint):
                    self._checkpoint(pending)
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

    def _checkpoint(self, item: Checkpoint) -> None:
        with contextlib.suppress(sqlite3.Error):
            # fetchall: a statement left unfinished would hold a read
            # transaction open, and the log could never start over.
            rows = self._conn.execute(control.CHECKPOINT).fetchall()
            if rows:
                row = rows[0]
                busy, frames, copied = row
                item.frames = int(frames)
                item.complete = not busy and frames == copied
        item.done = True

    def _file_lost(self) -> DatabaseError | None:
        if self._file is None:
            return None
        try:
            self._file.check()
        except DatabaseError as exc:
            return exc
        return None

    def _run_group(self, group: list[PlanItem]) -> None:
        plans = [item.plan for item in group]
        try:
            outcomes = self._waiting_for_the_lock(
                lambda: sqlite_group.run_group(self._conn, plans, write=True, file=self._file)
            )
        except sqlite_group.Busy as busy:
            # Refused for the whole busy timeout: nothing of the group ran.
            for item in group:
                item.plan.close()
                item.done.reject(busy.conflict)
            return
        for item, outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, sqlite_group.Done):
                item.done.resolve((outcome.value, outcome.wakes))
            else:
                item.done.reject(_as_error(outcome.error))

    def _waiting_for_the_lock(self, attempt: Callable[[], T]) -> T:
        """``attempt`` (which raises ``Busy`` having done nothing while
        another connection holds the write lock), again and again after
        ``LOCK_WAIT_BACKOFF``'s short pauses, for up to the busy timeout.
        The connection's own busy timeout is 0: SQLite's busy handler
        sleeps whole milliseconds, growing, while the lock goes free in a
        fraction of one."""
        deadline = time.monotonic() + self._busy_timeout
        waits = ErrorBackoff(LOCK_WAIT_BACKOFF)
        while True:
            try:
                return attempt()
            except (sqlite_group.Busy, TransactionConflict):
                pause = waits.failed() / US_PER_S
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)

    def _transaction(self, tx: TxItem) -> None:
        caller = sqlite_group.CallerTx(self._conn, self._file)
        try:
            self._waiting_for_the_lock(caller.begin)
        except BaseException as exc:
            tx.done.reject(exc)
            return
        tx.done.resolve(None)
        while True:
            step = tx.steps.get()
            if step.kind == "run":
                assert step.fn is not None
                try:
                    step.done.resolve(caller.step(step.fn))
                except BaseException as exc:
                    step.done.reject(exc)
                continue
            try:
                caller.finish(step.kind == "commit")
            except BaseException as exc:
                step.done.reject(exc)
            else:
                step.done.resolve(None)
            return


_as_error = sqlite_group.as_error
