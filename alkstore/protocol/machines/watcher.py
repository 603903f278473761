"""The SQLite watcher's decisions: when to look at ``PRAGMA data_version``,
and when to give up on looks that fail.

Pure: events in (a file event, a look that found or did not find a commit,
a look that failed, the current time), the next wait out.
``alkstore/runner/sqlite/watcher.py`` performs the waits and looks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..values.backoff import Backoff, ErrorBackoff, exact
from ..values.errors import InvalidArgument
from ..values.ints import check_bool
from ..values.timeconv import MAX_DURATION_US, US_PER_S, check_seconds

# While looks fail (and the watcher has not given up), look again this often.
_RETRY_LOOK_US = 100_000


def _us(seconds: float) -> int:
    return min(MAX_DURATION_US, round(seconds * US_PER_S))


@dataclass
class WatcherOptions:
    # The fast cadence (seconds). Event loops sleep in whole milliseconds.
    """How the SQLite watcher notices other processes' commits (see docs/engines.md); checked when
    made and again at open (``InvalidArgument``)."""
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
    # inotify: while the commits found bring no wake for this process (its
    # own commits, which woke it directly), rest longer after each look,
    # growing by ``fastest`` per such look up to this: a store writing
    # thousands of commits a second does not look thousands of times, and a
    # foreign wake then waits at most this long.
    busy_rest: float = 0.004

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Refuse a setting out of range with ``InvalidArgument``."""
        for name in ("fastest", "slowest_poll", "backstop"):
            check_seconds(getattr(self, name), f"watcher {name}")
        for name in ("spin", "give_up_after", "busy_rest"):
            check_seconds(getattr(self, name), f"watcher {name}", allow_zero=True)
        if self.window is not None:
            check_seconds(self.window, "watcher window", allow_zero=True)
        check_bool(self.use_inotify, "watcher use_inotify")
        if isinstance(self.growth, bool) or not isinstance(self.growth, int | float) or not (
            1.0 <= self.growth < float("inf")
        ):
            raise InvalidArgument(f"watcher growth must be a number >= 1, got {self.growth!r}")


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
    busy_rest: float = 0.0
    # Looks in a row that found commits but nothing to wake here.
    quiet_finds: int = 0
    # Idle looks since the cadence was last reset to ``fastest``: it slows
    # as a backoff does, ``fastest * growth ** n`` up to ``slowest``.
    idle_looks: int = 0
    _slowing: Backoff = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._slowing = exact(_us(self.fastest), _us(self.slowest), factor=self.growth)

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
            busy_rest=max(fastest, options.busy_rest),
        )

    def _reset(self) -> None:
        self.idle_looks = 0
        self.current = self.fastest

    def event(self, now: float) -> None:
        """A file event: a commit is landing, or just landed."""
        self.spin_until = now + self.spin
        self.active_until = now + self.window
        self._reset()

    def changed(self, now: float, woke: bool = True) -> None:
        """A look found a commit, and delivered wakes (``woke``) or had none
        to deliver (this process's own commits, or foreign ones that notify
        nobody here)."""
        self.last_look = now
        self.spin_until = float("-inf")  # the commit we were waiting for is in
        self.active_until = max(self.active_until, now + self.window)
        self._reset()
        self.quiet_finds = 0 if woke else self.quiet_finds + 1
        if self.inotify:
            rest = min(self.busy_rest, self.fastest * (1 + self.quiet_finds))
            self.rest_until = now + rest

    def unchanged(self, now: float) -> None:
        """A look found nothing new."""
        self.last_look = now
        if self.inotify or now >= self.active_until:
            # Polling lingers at the fast cadence through the window; inotify
            # backs off within it (a new event resets it).
            self.idle_looks += 1
            delay = self._slowing.delay_us(self.idle_looks + 1, 0.0) / US_PER_S
            self.current = min(self.slowest, delay)
        else:
            self._reset()

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


# -- looks that fail --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LookAgain:
    """Sleep ``seconds``, then look again; ``warn``: say so (the first
    failure of a run)."""

    seconds: float
    warn: bool


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Stop watching: every receiver of the store closes (``warn``: log the
    failure as a first one before)."""

    warn: bool


class LookFailures:
    """When a failing watcher gives up: at once when the database file is
    gone (there is nothing left to watch), otherwise once its looks have
    failed for ``give_up_after`` seconds without one succeeding; until then
    it looks again every 0.1 s (or ``give_up_after``, if shorter). Times are
    monotonic seconds."""

    def __init__(self, give_up_after: float) -> None:
        self.give_up_after = give_up_after
        pause_us = min(_RETRY_LOOK_US, _us(give_up_after))
        self.failures = ErrorBackoff(exact(pause_us, pause_us, factor=1.0))
        self.failing_since: float | None = None

    def failed(self, now: float, *, file_lost: bool) -> LookAgain | GiveUp:
        if file_lost:
            return GiveUp(warn=False)
        first = self.failing_since is None
        if self.failing_since is None:
            self.failing_since = now
        if now - self.failing_since >= self.give_up_after:
            return GiveUp(warn=first)
        return LookAgain(self.failures.failed() / US_PER_S, warn=first)

    def succeeded(self) -> None:
        self.failing_since = None
        self.failures.succeeded()
