"""Backoff: how long to wait before trying again, the one way alkstore
decides it.

``Backoff`` is the delay itself: exponential from a base, capped, with
jitter. A job's retry uses it with its attempt count; every loop that must
outlive failing round trips (a worker's claims, a subscriber's reads, the
Postgres listener's reconnects, SQLite's busy set-up, the scheduler's ticks,
the watcher's looks) counts its failures in a row with ``ErrorBackoff``.

The random draw is an argument (a float in [0, 1)), so a seeded source
replays the same delays in tests. Pure: the caller sleeps.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from .errors import InvalidArgument
from .timeconv import Duration, duration_us


@dataclass(frozen=True, slots=True)
class Backoff:
    """``delay = min(cap, base * factor ** (attempt - 1))``, then jittered.

    ``jitter`` is the fraction of the delay that is randomised: 0 gives exact
    exponential delays, 1 gives "full jitter" (uniform in [0, delay]).
    """

    base_us: int = 1_000_000
    cap_us: int = 300_000_000
    factor: float = 2.0
    jitter: float = 0.5

    @classmethod
    def of(
        cls,
        base: Duration = 1.0,
        cap: Duration = 300.0,
        factor: float = 2.0,
        jitter: float = 0.5,
    ) -> Backoff:
        """A backoff from seconds (or ``timedelta``): the first delay ``base``, at most ``cap``,
        growing by ``factor`` per attempt, ``jitter`` of it randomised. Raises
        ``InvalidArgument`` out of range."""
        for what, value in (("jitter", jitter), ("factor", factor)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                kind = type(value).__name__
                raise InvalidArgument(f"backoff {what} must be a number, not {kind}")
        if not 0.0 <= jitter <= 1.0:
            raise InvalidArgument("jitter must be within [0, 1]")
        if not factor >= 1.0:  # NaN included
            raise InvalidArgument("factor must be >= 1")
        base_us = duration_us(base, "backoff base")
        return cls(base_us, duration_us(cap, "backoff cap"), factor, jitter)

    def delay_us(self, attempt: int, draw: float) -> int:
        """Delay before attempt ``attempt + 1`` given ``attempt`` failures so far."""
        if not 0.0 <= draw < 1.0:
            raise InvalidArgument("draw must be within [0, 1)")
        exponent = max(0, attempt - 1)
        # Cap before multiplying out so large attempt counts cannot overflow.
        raw = float(self.cap_us)
        if exponent < 64:
            # A float power past 1.8e308 overflows: then the cap applies.
            with contextlib.suppress(OverflowError):
                raw = min(raw, self.base_us * self.factor**exponent)
        fixed = raw * (1.0 - self.jitter)
        # float(cap_us) may round up past a cap above 2**53: clamp to the int.
        return min(self.cap_us, int(fixed + raw * self.jitter * draw))


def exact(base_us: int, cap_us: int, factor: float = 2.0) -> Backoff:
    """A backoff without jitter: ``factor`` 1 for a constant pause."""
    return Backoff(base_us=base_us, cap_us=max(base_us, cap_us), factor=factor, jitter=0.0)


# 50 ms, doubling, at most 5 s: a blip costs little, an outage no hot loop.
ROUND_TRIP_BACKOFF = exact(50_000, 5_000_000)
# A SQLite writer waiting for another process's write lock tries again after
# 250 us, doubling, at most 2 ms apart (until the store's busy_timeout): a
# transaction holds it for a few hundred microseconds to a few ms, and
# SQLite's own busy handler sleeps 1 ms, then 2, 5, 10, 15 ... so the lock
# sat free while every waiter slept (four worker processes on one file were
# slower than one). Shorter pauses hand the lock back and forth more often,
# and each process then reads again what the others changed: with 50 us,
# four bare claim/ack loops slowed by a fifth (docs/benchmarks.md).
LOCK_WAIT_BACKOFF = exact(250, 2_000)


@dataclass(frozen=True, slots=True)
class Pause:
    """The last attempt failed: sleep ``seconds`` before the next (an action
    of the machines that retry on their own: the listener, the subscriber)."""

    seconds: float


@dataclass
class ErrorBackoff:
    """Failures in a row of one thing, and the pause before its next try: the
    first failure waits the base, each further one ``factor`` times longer,
    up to the cap; a success starts over."""

    backoff: Backoff = field(default=ROUND_TRIP_BACKOFF)
    failures: int = 0

    def failed(self) -> int:
        """One more failure in a row: microseconds to wait before the next try."""
        self.failures += 1
        return self.backoff.delay_us(self.failures, 0.0)

    def succeeded(self) -> None:
        self.failures = 0
