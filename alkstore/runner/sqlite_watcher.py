"""Turns commits from other processes into local wakes.

``PRAGMA data_version`` changes on a connection whenever another connection
commits. Checking it costs microseconds, so it runs on the event loop thread.
The watcher sleeps on inotify (Linux) and looks only when the file changed;
elsewhere it polls with an adaptive cadence (fast after activity, slow when
idle). A slow backstop tick covers anything inotify could miss.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

from ..engines.sqlite import SqliteDialect
from ..protocol.plan import run_sync
from ..protocol.wakes import PollCadence, foreign_notifications, last_notification_id
from . import sqlite_conn
from .hub import WakeHub
from .inotify import Inotify, open_inotify
from .runtime import Runtime


@dataclass
class WatcherOptions:
    # Fast re-checks after a file event: a writer's WAL frames land before its
    # commit is visible in the wal-index, so one look may come too early.
    fastest: float = 0.0005
    # Idle cadence when polling without inotify.
    slowest_poll: float = 0.05
    # Backstop when sleeping on inotify.
    backstop: float = 1.0
    use_inotify: bool = True


# Re-checks after a file event before sleeping on inotify again (~25 ms).
_FAST_CHECKS = 8


class SqliteWatcher:
    def __init__(
        self,
        runtime: Runtime,
        path: str,
        conn: sqlite3.Connection,
        hub: WakeHub,
        origin: str,
        options: WatcherOptions,
    ) -> None:
        self._runtime = runtime
        self._path = path
        self._conn = conn
        self._hub = hub
        self._origin = origin
        self._options = options
        self._dialect = SqliteDialect()
        self.checks = 0  # data_version reads, for tests and tuning

    def _read(self) -> tuple[int, frozenset[str]]:
        result = run_sync(
            foreign_notifications(self._dialect, self._last_id, self._origin),
            lambda s: sqlite_conn.execute(self._conn, s),
        )
        return result.last_id, result.channels

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            # The contract on SQLite: if the watcher dies, receivers close.
            self._hub.close_all()
            sqlite_conn.close(self._conn)

    async def _run(self) -> None:
        self._last_id = run_sync(
            last_notification_id(self._dialect), lambda s: sqlite_conn.execute(self._conn, s)
        )
        version = sqlite_conn.data_version(self._conn)
        notifier = open_inotify() if self._options.use_inotify else None
        if notifier is not None and not self._watch_files(notifier):
            notifier.close()
            notifier = None
        cadence = PollCadence(
            fastest=self._options.fastest,
            slowest=self._options.slowest_poll if notifier is None else self._options.backstop,
            current=self._options.fastest,
        )
        fast_window = 0
        try:
            while True:
                if notifier is not None and fast_window == 0:
                    await self._runtime.wait_readable(notifier.fd, self._options.backstop)
                else:
                    await self._runtime.sleep(cadence.current)
                if notifier is not None and notifier.drain():
                    fast_window = _FAST_CHECKS
                    cadence.activity()
                self.checks += 1
                current = sqlite_conn.data_version(self._conn)
                if current != version:
                    version = current
                    self._last_id, channels = self._read()
                    if channels:
                        self._hub.wake(channels)
                    cadence.activity()
                else:
                    cadence.idle()
                    if fast_window:
                        fast_window -= 1
        finally:
            if notifier is not None:
                notifier.close()

    def _watch_files(self, notifier: Inotify) -> bool:
        watched = False
        for suffix in ("-wal", ""):
            candidate = self._path + suffix
            if os.path.exists(candidate):
                watched = notifier.watch(candidate) or watched
        return watched
