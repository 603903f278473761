"""Turns commits from other processes into local wakes.

``PRAGMA data_version`` changes on a connection whenever another connection
commits. Reading it costs about 3 us, so it runs on the event loop thread;
only when it moved are new notification rows read (one indexed range scan)
and their channels woken.

When to look is decided by ``WatchCadence`` (pure):

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

``python bench/watcher_latency.py`` measures both.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from dataclasses import dataclass
from typing import Literal, TypeVar

from ..engines.sqlite import SqliteDialect
from ..protocol.errors import AlkstoreError
from ..protocol.plan import Plan, run_sync
from ..protocol.wakes import foreign_notifications, last_notification_id
from . import sqlite_conn
from .hub import WakeHub
from .inotify import Inotify, open_inotify
from .runtime import Runtime

log = logging.getLogger("alkstore.watcher")
T = TypeVar("T")

# Notification rows read per query; a fuller page means read again.
_PAGE = 10_000


@dataclass
class WatcherOptions:
    # The fast cadence (seconds). Event loops sleep in whole milliseconds.
    fastest: float = 0.001
    # Idle cadence when polling without inotify.
    slowest_poll: float = 0.05
    # Backstop look when sleeping on inotify.
    backstop: float = 1.0
    use_inotify: bool = True
    # After activity, keep looking at a fast cadence this long (seconds):
    # a commit becomes visible a little after its WAL write raised the file
    # event, later still if its writer was descheduled meanwhile.
    window: float | None = None  # default: 0.025 with inotify, 0.1 polling
    # inotify: after a file event whose commit is not visible yet, re-look
    # this long, only yielding to the loop in between (seconds).
    spin: float = 0.0005
    # Back-off factor per quiet look.
    growth: float = 2.0
    # Give up (closing every receiver) after failing this long without a
    # successful look; shorter failures are retried.
    give_up_after: float = 30.0


WaitKind = Literal["fd", "sleep", "rest"]


@dataclass
class WatchCadence:
    """When the watcher looks at ``data_version`` next. Pure: times are inputs.

    ``next_wait(now)`` gives ``(seconds, kind)``: ``"fd"``, wait that long on
    the inotify descriptor (a file event ends the wait early), then look;
    ``"sleep"``, sleep (``0.0``: just yield to the loop), then look;
    ``"rest"``, sleep, then ask again.
    """

    inotify: bool
    fastest: float
    slowest: float  # the idle cadence: backstop (inotify) or slowest poll
    window: float
    spin: float = 0.0
    growth: float = 2.0
    current: float = 0.0
    active_until: float = float("-inf")
    last_look: float = float("-inf")
    spin_until: float = float("-inf")
    # After a look that found a commit, rest this long whatever the file
    # events say. Every commit raises events (ours too: they touch the same
    # WAL), so under a stream of commits the looks that find something stay
    # at one per ``fastest``, and the wakes they deliver coalesce.
    rest_until: float = float("-inf")

    @classmethod
    def from_options(cls, options: WatcherOptions, *, inotify: bool) -> WatchCadence:
        window = options.window
        if window is None:
            window = 0.025 if inotify else 0.1
        fastest = max(0.0001, options.fastest)
        slowest = options.backstop if inotify else options.slowest_poll
        return cls(
            inotify=inotify,
            fastest=fastest,
            slowest=max(slowest, fastest),
            window=window,
            spin=max(0.0, options.spin) if inotify else 0.0,
            growth=max(1.0, options.growth),
            current=fastest,
        )

    def event(self, now: float) -> None:
        """A file event: a commit is landing, or just landed."""
        self.spin_until = now + self.spin
        self.active_until = now + self.window
        self.current = self.fastest

    def changed(self, now: float) -> None:
        """A look found a commit (and delivered its wakes)."""
        self.last_look = now
        self.spin_until = float("-inf")  # the commit we were waiting for is in
        self.active_until = max(self.active_until, now + self.window)
        self.current = self.fastest
        if self.inotify:
            self.rest_until = now + self.fastest

    def unchanged(self, now: float) -> None:
        """A look found nothing new."""
        self.last_look = now
        if self.inotify or now >= self.active_until:
            # Polling lingers at the fast cadence through the window; inotify
            # backs off within it (a new event resets it).
            self.current = min(self.slowest, self.current * self.growth)
        else:
            self.current = self.fastest

    def next_wait(self, now: float) -> tuple[float, WaitKind]:
        if not self.inotify:
            return self.current, "sleep"
        if now < self.rest_until:
            return self.rest_until - now, "rest"
        if now < self.spin_until:
            # A file event, and its commit not visible yet: it will be
            # within microseconds. Yield to the loop and look again.
            return 0.0, "sleep"
        if now < self.active_until:
            look_at = min(self.last_look + self.current, self.active_until)
            return max(0.0, look_at - now), "fd"
        return self.slowest, "fd"


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
        # For tests and tuning.
        self.checks = 0  # data_version reads
        self.events = 0  # inotify wake-ups that found file events
        self.changes = 0  # reads that found a commit
        self.inotify = False
        # The baseline is taken now, before the store is handed out, so a
        # commit made after ``open`` returns is never mistaken for history.
        self._last_id = 0
        self._version = 0
        self._primed = False
        try:
            self._prime()
        except AlkstoreError:
            log.warning("watcher could not read its baseline yet; retrying", exc_info=True)

    def _run_plan(self, plan: Plan[T]) -> T:
        """A read plan on the watcher's connection; errors as ``DatabaseError``."""
        result: T = sqlite_conn.guarded(
            run_sync, plan, lambda s: sqlite_conn.execute(self._conn, s)
        )
        return result

    def _prime(self) -> None:
        self._last_id = self._run_plan(last_notification_id(self._dialect))
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
        self.inotify = notifier is not None
        cadence = WatchCadence.from_options(self._options, inotify=self.inotify)
        runtime = self._runtime
        failing_since: float | None = None
        try:
            while True:
                # Look first: commits may have landed between the baseline
                # (taken at open) and the inotify watch being set up.
                try:
                    if not self._primed:
                        self._prime()
                    found = self._look()
                except AlkstoreError:
                    now = runtime.monotonic()
                    if failing_since is None:
                        failing_since = now
                        log.warning("SQLite watcher look failed; retrying", exc_info=True)
                    if now - failing_since >= self._options.give_up_after:
                        raise
                    await runtime.sleep(min(0.1, self._options.give_up_after))
                    continue
                failing_since = None
                now = runtime.monotonic()
                if found:
                    cadence.changed(now)
                else:
                    cadence.unchanged(now)
                wait, kind = cadence.next_wait(now)
                while kind == "rest":
                    await runtime.sleep(wait)
                    wait, kind = cadence.next_wait(runtime.monotonic())
                if notifier is not None and kind == "fd":
                    await runtime.wait_readable(notifier.fd, wait)
                else:
                    await runtime.sleep(wait)
                if notifier is not None and notifier.drain():
                    self.events += 1
                    cadence.event(runtime.monotonic())
        finally:
            if notifier is not None:
                notifier.close()

    def _look(self) -> bool:
        """One look: deliver wakes for commits since the last; True if any."""
        self.checks += 1
        current = sqlite_conn.data_version(self._conn)
        if current == self._version:
            return False
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
        if channels:
            self._hub.wake(channels)
        return True

    def _watch_files(self, notifier: Inotify) -> bool:
        watched = False
        for suffix in ("-wal", ""):
            candidate = self._path + suffix
            if os.path.exists(candidate):
                watched = notifier.watch(candidate) or watched
        return watched
