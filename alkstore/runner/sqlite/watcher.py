"""Turns commits from other processes into local wakes.

``PRAGMA data_version`` changes on a connection whenever another connection
commits. Reading it costs about 3 us, so it runs on the event loop thread;
only when it moved are new notification rows read (one indexed range scan)
and their channels woken.

When to look is decided by ``WatchCadence`` (pure, as is ``LookFailures``,
which decides when failing looks give up; both in
``alkstore/protocol/machines/watcher.py``):

What a look reads: the notification rows written since the last look
(other stores' notifies, and queue wakes that are not new jobs: a release,
a resume, a requeued dead letter), and, for each queue a receiver here
waits on, whether it gained a pending job with an id above the newest the
last look saw. An enqueue writes no notification row: job ids only grow,
so the jobs table is its own log.

- inotify (Linux, the default): sleep on the file descriptor until a write
  lands in the database or its WAL, and look at once. A writer's WAL frames
  hit the file a few microseconds *before* its commit becomes visible in the
  wal-index (shared memory, which raises no file event), so a look that
  finds nothing re-looks, only yielding to the loop in between, for ``spin``
  seconds. Looks then go on at a fast, growing cadence (still cut short by
  new events) until ``window`` seconds after the last activity: they catch
  a commit that was late (a descheduled writer) or drained with an earlier
  one. After a look that found a commit the watcher rests ``fastest``, so a
  stream of commits (this process's included) costs about one successful
  look per ``fastest``. A slow ``backstop`` look covers anything inotify
  could miss (a network file system, a replaced file).
- polling (elsewhere, or ``use_inotify=False``): look at the ``fastest``
  cadence for ``window`` seconds after the last change, then back off
  geometrically to ``slowest_poll`` while idle.

While no receiver of the store is open (a process that only produces),
the watcher parks: it drops its watches and looks at nothing, since a wake
would reach nobody. The first receiver's ``listen`` takes a fresh baseline
before it returns (``attach``), so every commit after that is woken for,
and none from before it is.

``python bench/watcher_latency.py`` measures both.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from typing import TypeVar

from ...engines.sqlite import SqliteDialect
from ...protocol.machines.watcher import GiveUp, LookFailures, WatchCadence, WatcherOptions
from ...protocol.plan import Plan, run_sync
from ...protocol.plans.wakes import (
    foreign_notifications,
    last_job_id,
    last_notification_id,
    new_jobs,
)
from ...protocol.values.errors import AlkstoreError
from ...protocol.values.names import queue_channel, queue_of_channel
from ..hub import WakeHub
from ..runtime import Runtime
from . import conn as sqlite_conn
from .file import DatabaseFile
from .inotify import Inotify, Waiter, open_inotify

log = logging.getLogger("alkstore.watcher")
T = TypeVar("T")

# Notification rows read per query; a fuller page means read again.
_PAGE = 10_000


class SqliteWatcher:
    def __init__(
        self,
        runtime: Runtime,
        path: str,
        conn: sqlite3.Connection,
        hub: WakeHub,
        origin: str,
        options: WatcherOptions,
        file: DatabaseFile | None = None,
    ) -> None:
        self._runtime = runtime
        self._file = file
        self._path = path
        self._conn = conn
        self._hub = hub
        self._origin = origin
        self._options = options
        self._dialect = SqliteDialect()
        # For tests and tuning.
        self.checks = 0  # data_version reads
        self.events = 0  # inotify wake-ups that found file events
        self.changes = 0  # reads that found a commit
        self.inotify = False
        # The baseline is taken now, before the store is handed out, so a
        # commit made after ``open`` returns is never mistaken for history.
        self._last_id = 0
        self._last_job_id = 0
        self._version = 0
        self._primed = False
        self.parked = False
        self._attached = runtime.signal()
        try:
            self._prime()
        except AlkstoreError:
            log.warning("watcher could not read its baseline yet; retrying", exc_info=True)

    def attach(self) -> None:
        """A receiver opened. A parked watcher takes a fresh baseline now
        (synchronously: before the receiver's ``listen`` returns) and wakes
        up; otherwise there is nothing to do."""
        if not self.parked:
            return
        self.parked = False
        try:
            self._prime()
        except AlkstoreError:
            # The old baseline stays: the next look reads from there, which
            # may wake the receiver for a commit it did not wait for (a hint
            # too many), never miss one.
            log.warning("watcher could not take a fresh baseline", exc_info=True)
        self._attached.set()

    async def _park(self, waiter: Waiter | None) -> None:
        """Until ``attach``: no looks, no watches (a write raises no event)."""
        if waiter is not None and not waiter.notifier.paused:
            waiter.notifier.pause()
        self._attached = self._runtime.signal()
        self.parked = True
        await self._attached.wait()

    def _run_plan(self, plan: Plan[T]) -> T:
        """A read plan on the watcher's connection; errors as ``DatabaseError``."""
        result: T = sqlite_conn.guarded(
            run_sync, plan, lambda s: sqlite_conn.execute(self._conn, s)
        )
        return result

    def _prime(self) -> None:
        self._last_id = self._run_plan(last_notification_id(self._dialect))
        self._last_job_id = self._run_plan(last_job_id(self._dialect))
        self._version = sqlite_conn.data_version(self._conn)
        self._primed = True

    async def run(self) -> None:
        try:
            await self._run()
        except AlkstoreError:
            log.exception("SQLite watcher gave up; wake receivers of this store close")
        finally:
            # The contract on SQLite: if the watcher dies, receivers close.
            self._hub.close_all()
            sqlite_conn.close(self._conn)

    async def _run(self) -> None:
        notifier = open_inotify() if self._options.use_inotify else None
        if notifier is not None and not self._watch_files(notifier):
            notifier.close()
            notifier = None
        waiter = Waiter(notifier) if notifier is not None else None
        self.inotify = waiter is not None
        cadence = WatchCadence.from_options(self._options, inotify=self.inotify)
        runtime = self._runtime
        failures = LookFailures(self._options.give_up_after)
        try:
            while True:
                if self._hub.empty:
                    await self._park(waiter)
                    if waiter is not None and waiter.notifier.paused:
                        waiter.notifier.resume()
                # Look first: commits may have landed between the baseline
                # (taken at open) and the inotify watch being set up.
                try:
                    if not self._primed:
                        self._prime()
                    found, woke = self._look()
                except AlkstoreError:
                    lost = self._file is not None and self._file.lost is not None
                    failed = failures.failed(runtime.monotonic(), file_lost=lost)
                    if failed.warn:
                        log.warning("SQLite watcher look failed; retrying", exc_info=True)
                    if isinstance(failed, GiveUp):
                        raise
                    await runtime.sleep(failed.seconds)
                    continue
                failures.succeeded()
                now = runtime.monotonic()
                if found:
                    cadence.changed(now, woke)
                else:
                    cadence.unchanged(now)
                wait, kind = cadence.next_wait(now)
                if waiter is None:
                    await runtime.sleep(wait)
                    continue
                # Timers are descriptors here (see inotify.py): no event-loop
                # timeout on this path, however often it waits.
                if kind == "rest":
                    # Nobody reads file events while resting, but every
                    # write still raises them (this process's own commits
                    # too): drop the watches, and look once they are back.
                    waiter.notifier.pause()
                while kind == "rest":
                    waiter.timer.arm(wait)
                    await runtime.wait_readable(waiter.timer.fd, None)
                    waiter.timer.drain()
                    wait, kind = cadence.next_wait(runtime.monotonic())
                if waiter.notifier.paused:
                    waiter.notifier.resume()
                    continue
                if kind == "fd":
                    waiter.timer.arm(wait)
                    await runtime.wait_readable(waiter.fd, None)
                elif wait > 0:
                    waiter.timer.arm(wait)
                    await runtime.wait_readable(waiter.timer.fd, None)
                else:
                    await runtime.checkpoint()
                if waiter.settle():
                    self.events += 1
                    cadence.event(runtime.monotonic())
        finally:
            if waiter is not None:
                waiter.close()

    def _look(self) -> tuple[bool, bool]:
        """One look: deliver wakes for commits since the last. Returns
        whether anything committed, and whether it woke anyone here."""
        self.checks += 1
        if self._file is not None:
            self._file.check()
        current = sqlite_conn.data_version(self._conn)
        if current == self._version:
            return False, False
        self._version = current
        self.changes += 1
        channels: set[str] = set()
        while True:
            before = self._last_id
            result = self._run_plan(
                foreign_notifications(self._dialect, before, self._origin, _PAGE)
            )
            self._last_id = result.last_id
            channels |= result.channels
            # Ids only grow, so a page that came back full spans >= _PAGE ids.
            if result.last_id - before < _PAGE:
                break
        # An enqueue writes no notification row: the new jobs are the log.
        waited = [q for ch in self._hub.channels() if (q := queue_of_channel(ch)) is not None]
        jobs = self._run_plan(new_jobs(self._dialect, self._last_job_id, waited))
        self._last_job_id = jobs.last_id
        channels.update(queue_channel(q) for q in jobs.queues)
        if channels:
            self._hub.wake(channels)
        return True, bool(channels)

    def _watch_files(self, notifier: Inotify) -> bool:
        watched = False
        for suffix in ("-wal", ""):
            candidate = self._path + suffix
            if os.path.exists(candidate):
                watched = notifier.watch(candidate) or watched
        return watched


__all__ = ["SqliteWatcher", "WatchCadence", "WatcherOptions"]
