from __future__ import annotations

from datetime import timedelta

from ..protocol.errors import InvalidArgument


def check_timeout(seconds: float | timedelta) -> float:
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
        raise InvalidArgument(f"timeout must be seconds >= 0, got {seconds!r}")
    if seconds != seconds:
        raise InvalidArgument("timeout must not be NaN")
    return float(seconds)
