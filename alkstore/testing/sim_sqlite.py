"""The simulation's SQLite backend: one database file per run.

Each actor has its own connection with ``busy_timeout`` 0, so a writer that
finds the write lock taken is told at once (and the simulation runs someone
else) instead of sleeping. ``BEGIN IMMEDIATE`` takes the write lock up front,
so once a write transaction is open none of its statements can block: a
statement here always finishes in the step that sends it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from ..engines.sqlite import SqliteDialect, migrate
from ..engines.sqlite import control as sql
from ..protocol.dialect import Dialect
from ..protocol.plan import Fetch, Statement, run_sync
from ..protocol.values import codec
from ..protocol.values.errors import DatabaseError
from ..runner.sqlite import conn as sqlite_conn
from .sim_backend import SimConn, Snapshot

_RUN_IDS = itertools.count()


@functools.cache
def _workdir() -> str:
    folder = tempfile.mkdtemp(prefix="alkstore-sim-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


@functools.cache
def _template() -> str:
    """An empty, migrated database file, copied for each run rather than
    migrated: exhaustive exploration opens thousands of them."""
    path = str(Path(_workdir()) / "template.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(sql.BEGIN_WRITE)
    run_sync(migrate(), lambda s: sqlite_conn.execute(conn, s))
    conn.execute(sql.COMMIT)
    conn.close()
    return path


class SqliteSimConn:
    waiting = False

    def __init__(self, path: str) -> None:
        # No fsync: a simulated crash is a closed connection, not a lost disk cache.
        self._conn = sqlite_conn.connect(path, busy_timeout=0, pragmas={"synchronous": "OFF"})
        self.in_flight = False
        self._value: Any = None
        self._error: DatabaseError | None = None

    def begin(self, write: bool) -> bool:
        try:
            self._conn.execute(sql.BEGIN_WRITE if write else sql.BEGIN_READ)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise DatabaseError(f"SQLite: {exc}") from exc
        return True

    def send(self, statement: Statement) -> None:
        self.in_flight = True
        self._value, self._error = None, None
        try:
            self._value = sqlite_conn.execute(self._conn, statement)
        except sqlite3.Error as exc:
            self._error = DatabaseError(f"SQLite: {exc}")
            self._error.__cause__ = exc

    def result(self, fetch: Fetch) -> Any:
        self.in_flight = False
        if self._error is not None:
            raise self._error
        return self._value

    def finish(self, commit: bool) -> None:
        self._conn.execute(sql.COMMIT if commit else sql.ROLLBACK)

    def crash(self) -> None:
        self._conn.close()  # an open transaction rolls back

    def query(self, text: str) -> list[tuple[Any, ...]]:
        return self._conn.execute(text).fetchall()


class SqliteSimRun:
    exclusive_writer = True

    def __init__(self, dialect: Dialect, path: str | None) -> None:
        self.dialect = dialect
        self._own_file = path is None
        self.path = path or str(Path(_workdir()) / f"sim-{next(_RUN_IDS)}.db")
        shutil.copyfile(_template(), self.path)
        self._observer = SqliteSimConn(self.path)
        self._conns = [self._observer]

    def connect(self) -> SimConn:
        conn = SqliteSimConn(self.path)
        self._conns.append(conn)
        return conn

    def settle(self, conns: list[SimConn]) -> None:
        """Nothing to wait for: every statement finished when it was sent."""

    def snapshot(self) -> Snapshot:
        q = self._observer.query
        rows = q(
            "SELECT id, payload FROM __alkstore_jobs UNION ALL "
            "SELECT id, payload FROM __alkstore_dead"
        )
        waiting = q("SELECT id, payload FROM __alkstore_waiting")
        return Snapshot(
            job_ids={int(r[0]) for r in rows},
            job_markers={codec.decode(r[1]).get("marker") for r in [*rows, *waiting]},
            event_markers={
                codec.decode(r[0]).get("marker")
                for r in q("SELECT payload FROM __alkstore_events WHERE stream = 'events'")
            },
            woken_channels={str(r[0]) for r in q("SELECT channel FROM __alkstore_notifications")},
            history_ids={int(r[0]) for r in q("SELECT id FROM __alkstore_history")},
            live_unique_keys=[
                str(r[0])
                for r in q("SELECT unique_key FROM __alkstore_jobs WHERE unique_key IS NOT NULL")
            ],
            dead_ids={int(r[0]) for r in q("SELECT id FROM __alkstore_dead")},
            waiting_ids=[int(r[0]) for r in waiting],
            history=[
                (int(r[0]), str(r[1]), r[2])
                for r in q("SELECT id, outcome, result FROM __alkstore_history")
            ],
            attempt_job_ids={int(r[0]) for r in q("SELECT job_id FROM __alkstore_attempts")},
        )

    def live_job_ids(self) -> list[int]:
        return [int(r[0]) for r in self._observer.query("SELECT id FROM __alkstore_jobs")]

    def close(self) -> None:
        for conn in self._conns:
            conn.crash()
        if self._own_file:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path + suffix)


class SqliteSimBackend:
    """A fresh file per run, copied from a migrated template. ``dialect``
    lets a test run the simulation against a deliberately broken engine."""

    name = "sqlite"

    def __init__(self, dialect: Dialect | None = None, path: Path | None = None) -> None:
        self.dialect: Dialect = dialect or SqliteDialect()
        self._path = str(path) if path is not None else None

    def open_run(self, channels: list[str]) -> SqliteSimRun:
        """A run on a fresh migrated SQLite file (the backend's path, or a temporary one)."""
        return SqliteSimRun(self.dialect, self._path)

    def close(self) -> None:
        """Each run's file is removed when the run closes."""

    def __enter__(self) -> SqliteSimBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
