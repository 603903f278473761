"""How long to wait after a failed round trip before trying again.

For loops that must outlive a database that is briefly unwell (a stream
subscriber, say): the first retry comes soon, consecutive failures double
the pause up to a cap, and a success starts over. Pure: the caller sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .backoff import Backoff

# 50 ms, doubling, at most 5 s: a blip costs little, an outage no hot loop.
ROUND_TRIP_BACKOFF = Backoff(base_us=50_000, cap_us=5_000_000, factor=2.0, jitter=0.0)


@dataclass
class ErrorBackoff:
    backoff: Backoff = field(default=ROUND_TRIP_BACKOFF)
    failures: int = 0

    def failed(self) -> int:
        """One more failure in a row: microseconds to wait before the next try."""
        self.failures += 1
        return self.backoff.delay_us(self.failures, 0.0)

    def succeeded(self) -> None:
        self.failures = 0
