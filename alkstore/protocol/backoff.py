"""Retry backoff: exponential from a base, capped, with full jitter.

The random draw is an argument (a float in [0, 1)), so a seeded source
replays the same delays in tests.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

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
