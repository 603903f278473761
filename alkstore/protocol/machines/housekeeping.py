"""The housekeeping loop: a pass of prunes, then sleep until the next,
backing off after errors. Pure: ``services/housekeeping.py`` performs it."""

from __future__ import annotations

from ..values.backoff import ErrorBackoff, exact
from ..values.timeconv import US_PER_S, check_seconds


class HousekeepingLoop:
    """When the background housekeeping runs its next pass.

    Passes are ``interval`` seconds apart on average, each wait drawn
    uniformly within 25% of it (``draw`` in [0, 1) is the caller's), so
    stores opened together spread their passes out. The first pass comes
    one such wait after opening, not at once. A failed pass is tried again
    sooner (1 s, doubling), but never later than a normal wait; a success
    starts over.
    """

    def __init__(self, interval: float) -> None:
        self.interval = check_seconds(interval, "housekeeping_interval")
        interval_us = round(self.interval * US_PER_S)
        self._failures = ErrorBackoff(exact(min(US_PER_S, interval_us), interval_us))

    def next_wait(self, draw: float) -> float:
        """Seconds until the next pass, after a pass that went through (or at start)."""
        self._failures.succeeded()
        return self.interval * (0.75 + 0.5 * draw)

    def failed(self) -> float:
        """A pass failed: seconds until it is tried again."""
        return min(self.interval, self._failures.failed() / US_PER_S)

    @property
    def first_failure(self) -> bool:
        """The last failure was the first in a row (the one worth a traceback;
        the rest of an outage is a line each)."""
        return self._failures.failures == 1
