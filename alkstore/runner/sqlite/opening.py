"""Opening a SQLite store, below the facades: its options, the opener's
arguments checked, the main connection with its schema migrated (or
checked), the watcher's connection. Shared by every SQLite opener (async
and ``alkstore.sync``)."""

from __future__ import annotations

import os
import sqlite3
import uuid
from dataclasses import dataclass, field

from ...engines.sqlite import control
from ...protocol.plans.housekeeping import NOTIFICATION_RETENTION_S
from ...protocol.values.errors import DatabaseError, InvalidArgument, brief
from ...protocol.values.ints import check_bool, check_int
from ...protocol.values.timeconv import check_seconds
from . import conn as sqlite_conn
from .file import file_path, read_only_uri
from .watcher import WatcherOptions

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


def watcher_connection(
    target: str, opts: SqliteOptions, read_only: bool = False
) -> sqlite3.Connection:
    """The watcher reads on the event-loop thread: once opened (with the full
    busy timeout, as every connection), it waits at most 50 ms for a lock, so
    a database in recovery can never stall the loop; the watcher retries."""
    conn = sqlite_conn.connect(
        target, busy_timeout=opts.busy_timeout, pragmas=opts.pragmas, read_only=read_only
    )
    return sqlite_conn.set_up(conn, control.busy_timeout(WATCHER_BUSY_TIMEOUT))
