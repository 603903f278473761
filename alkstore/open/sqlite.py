"""Opening a SQLite store: connections, schema, watcher, background tasks."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..api.core.handle import StoreCore, new_origin
from ..api.store import Store
from ..engines.sqlite import control
from ..protocol.values.timeconv import US_PER_S
from ..runner.hub import WakeHub
from ..runner.runtime import Clock, Runtime, SystemClock
from ..runner.sqlite import conn as sqlite_conn
from ..runner.sqlite.executor import SqliteExecutor
from ..runner.sqlite.file import DatabaseFile, file_path
from ..runner.sqlite.opening import (
    SqliteOptions,
    open_main_connection,
    resolve,
    watcher_connection,
)
from ..runner.sqlite.readers import SqliteReaders
from ..runner.sqlite.watcher import SqliteWatcher
from ..services.housekeeping import run_housekeeping


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
        # Opened (and migrated) with the store's busy timeout, then 0: the
        # writer thread waits for the lock itself, in finer steps.
        main = open_main_connection(target, opts, read_only)
        return sqlite_conn.set_up(main, control.busy_timeout(0))

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
    origin = new_origin()
    watcher: SqliteWatcher | None = None
    watch_conn: sqlite3.Connection | None = None
    try:
        if not memory:
            # The watcher only reads: a read-only store has it too, so its
            # receivers see other processes' commits. It watches the file
            # itself (``target`` may be a URI).
            watch_conn = await runtime.run_in_thread(
                lambda: watcher_connection(target, opts, read_only)
            )
            watched = target if file_at is None else file_at
            watcher = SqliteWatcher(runtime, watched, watch_conn, hub, origin, opts.watcher, file)
    except BaseException:
        conn.close()
        if inline_conn is not None:
            inline_conn.close()
        raise
    executor = SqliteExecutor(
        runtime, conn, readers, file, inline_conn, watcher=watcher, busy_timeout=opts.busy_timeout
    )
    core = StoreCore(
        executor=executor, runtime=runtime, clock=clock or SystemClock(), hub=hub, seed=seed,
        read_only=read_only, origin=origin,
        notification_retention_us=round(opts.notification_retention * US_PER_S),
    )  # fmt: skip
    try:
        async with runtime.task_group() as group:
            core.background = group
            if watcher is not None:
                group.start_soon(watcher.run)
            if not read_only and opts.housekeeping_interval is not None:
                group.start_soon(run_housekeeping, core, opts.housekeeping_interval)
            try:
                yield Store(core)
            finally:
                group.cancel()
    finally:
        try:
            with runtime.shield():
                await core.close()
        finally:
            # The watcher closes its connection when it ends, but an asyncio
            # task cancelled before its first step never runs at all (a trio
            # task runs to its first checkpoint): closing is the opener's job.
            if watch_conn is not None:
                sqlite_conn.close(watch_conn)


__all__ = ["open_sqlite_store"]
