"""Opening a SQLite store: connections, schema, watcher, background tasks."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from ..api.housekeeping import run_housekeeping
from ..api.store import Store
from ..engines.sqlite import control
from ..protocol.errors import DatabaseError, InvalidArgument, brief
from ..protocol.housekeeping import NOTIFICATION_RETENTION_S
from ..protocol.ints import check_bool, check_int
from ..protocol.plan import run_sync
from ..protocol.timeconv import check_seconds
from . import sqlite_conn
from .hub import WakeHub
from .runtime import Clock, Runtime, SystemClock
from .sqlite_executor import SqliteExecutor
from .sqlite_file import DatabaseFile, file_path, read_only_uri
from .sqlite_readers import SqliteReaders
from .sqlite_watcher import SqliteWatcher, WatcherOptions

# Lock wait for the watcher's reads, which run on the event-loop thread.
WATCHER_BUSY_TIMEOUT = 0.05


@dataclass
class SqliteOptions:
    """Engine options for SQLite (not contract: see docs/engines.md)."""

    # How long a write waits for another process's write lock before giving
    # up with DatabaseError. Writers in this process queue in the writer slot.
    busy_timeout: float = 5.0
    pragmas: dict[str, str] = field(default_factory=dict)
    watcher: WatcherOptions = field(default_factory=WatcherOptions)
    # Notification rows older than this are pruned by housekeeping (wakes
    # are hints; see docs/wakes.md).
    notification_retention: float = NOTIFICATION_RETENTION_S
    # Seconds between housekeeping passes (Store.prune) in the background;
    # None: none (run store.prune() yourself, or `alkstore prune`).
    housekeeping_interval: float | None = 10.0
    # Reader connections for read-only operations (stats, get_job,
    # read_since, ...), which then never wait for the write lock.
    readers: int = 4

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Refuse a setting out of range with ``InvalidArgument`` (again at
        open: the fields may have been changed since)."""
        check_seconds(self.busy_timeout, "busy_timeout", allow_zero=True)
        control.check_pragmas(self.pragmas)
        if not isinstance(self.watcher, WatcherOptions):
            raise InvalidArgument(f"watcher must be a WatcherOptions, got {brief(self.watcher)}")
        self.watcher.check()
        check_seconds(self.notification_retention, "notification_retention")
        if self.housekeeping_interval is not None:
            check_seconds(self.housekeeping_interval, "housekeeping_interval")
        check_int(self.readers, "readers", lo=1, hi=256)


@asynccontextmanager
async def open_sqlite_store(
    runtime: Runtime,
    path: str | os.PathLike[str],
    *,
    options: SqliteOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> AsyncIterator[Store]:
    opts, target, read_only, memory = resolve(path, options, read_only)

    def connect() -> sqlite3.Connection:
        return sqlite_conn.connect(
            target, busy_timeout=opts.busy_timeout, pragmas=opts.pragmas, read_only=read_only
        )

    def open_main() -> sqlite3.Connection:
        return open_main_connection(target, opts, read_only)

    def open_inline() -> sqlite3.Connection:
        # Set up with the store's busy timeout (another opener may hold the
        # file while it migrates), then never wait: the inline path gives up
        # on a busy file and hands the plan to the writer thread instead.
        inline = connect()
        return sqlite_conn.set_up(inline, control.busy_timeout(0), control.NO_AUTOCHECKPOINT)

    conn = await runtime.run_in_thread(open_main)
    hub = WakeHub(runtime)
    file_at = file_path(target)
    file = None if file_at is None else DatabaseFile(file_at)
    # A private in-memory database is invisible to other connections: there
    # every read and write goes through the writer thread.
    readers = None if memory else SqliteReaders(runtime, connect, size=opts.readers, file=file)
    inline_conn = None
    if not memory:
        try:
            inline_conn = await runtime.run_in_thread(open_inline)
        except BaseException:
            conn.close()
            raise
    executor = SqliteExecutor(runtime, conn, readers, file, inline_conn)
    store = Store(
        executor=executor,
        runtime=runtime,
        clock=clock or SystemClock(),
        hub=hub,
        seed=seed,
        read_only=read_only,
        notification_retention=opts.notification_retention,
    )
    watch_conn: sqlite3.Connection | None = None
    try:
        async with runtime.task_group() as group:
            store._background = group
            if not memory:
                # The watcher only reads: a read-only store has it too, so
                # its receivers see other processes' commits. It watches
                # the file itself (``target`` may be a URI).
                watch_conn = await runtime.run_in_thread(
                    lambda: _watcher_connection(target, opts, read_only)
                )
                watched = target if file_at is None else file_at
                watcher = SqliteWatcher(
                    runtime, watched, watch_conn, hub, store._origin, opts.watcher, file
                )
                group.start_soon(watcher.run)
                store._watcher = watcher  # type: ignore[attr-defined]
            if not read_only and opts.housekeeping_interval is not None:
                group.start_soon(run_housekeeping, store, opts.housekeeping_interval)
            try:
                yield store
            finally:
                group.cancel()
    finally:
        try:
            with runtime.shield():
                await store.aclose()
        finally:
            # The watcher closes its connection when it ends, but an asyncio
            # task cancelled before its first step never runs at all (a trio
            # task runs to its first checkpoint): closing is the opener's job.
            if watch_conn is not None:
                sqlite_conn.close(watch_conn)


def resolve(
    path: object, options: object, read_only: object
) -> tuple[SqliteOptions, str, bool, bool]:
    """An opener's arguments, checked: the options, what to open (a path or
    a ``file:`` URI; a private in-memory database for ``":memory:"``),
    ``read_only``, and whether it is that private in-memory database. Shared
    by every SQLite opener (async and ``alkstore.sync``)."""
    opts = SqliteOptions() if options is None else options
    if not isinstance(opts, SqliteOptions):
        raise InvalidArgument(f"options must be a SqliteOptions, got {brief(options)}")
    opts.check()
    if not isinstance(path, str | os.PathLike):
        raise InvalidArgument(f"path must be a str or a path, got {brief(path)}")
    target = os.fspath(path)
    if not isinstance(target, str):
        raise InvalidArgument(f"path must be text, got {brief(target)}")
    read_only = check_bool(read_only, "read_only")
    memory = target == ":memory:" or target == ""
    if memory:
        if read_only:
            raise InvalidArgument("a read-only store opens an existing database file")
        # One private in-memory database: a single connection and no watcher,
        # since no other process can see it.
        target = f"file:alkstore-{uuid.uuid4().hex}?mode=memory"
    if read_only:
        target = read_only_uri(target)
        if file_path(target) is None:
            raise InvalidArgument("a read-only store opens an existing database file")
    return opts, target, read_only, memory


def open_main_connection(target: str, opts: SqliteOptions, read_only: bool) -> sqlite3.Connection:
    """The store's main connection, its schema migrated (or, read-only,
    checked). Blocking."""
    at = file_path(target)
    if read_only and at is not None and not os.path.exists(at):
        raise DatabaseError(f"cannot open SQLite database {at!r} read-only: no such file")
    conn = sqlite_conn.connect(
        target, busy_timeout=opts.busy_timeout, pragmas=opts.pragmas, read_only=read_only
    )
    try:
        if read_only:
            # Checked, never migrated: a read-only store writes nothing.
            sqlite_conn.check_schema(conn, f"SQLite database {at!r}")
        else:
            sqlite_conn.ensure_schema(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _watcher_connection(
    target: str, opts: SqliteOptions, read_only: bool = False
) -> sqlite3.Connection:
    """The watcher reads on the event-loop thread: once opened (with the full
    busy timeout, as every connection), it waits at most 50 ms for a lock, so
    a database in recovery can never stall the loop; the watcher retries."""
    conn = sqlite_conn.connect(
        target, busy_timeout=opts.busy_timeout, pragmas=opts.pragmas, read_only=read_only
    )
    return sqlite_conn.set_up(conn, control.busy_timeout(WATCHER_BUSY_TIMEOUT))


__all__ = ["SqliteOptions", "open_sqlite_store", "run_sync"]
