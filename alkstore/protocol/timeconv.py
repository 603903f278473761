"""Durations and instants at the API edge, microseconds inside.

Every timestamp the core stores is an integer count of microseconds since the
Unix epoch, so sub-second values survive exactly and ordering is exact on
every engine. The clock itself is an input: nothing here reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .errors import InvalidArgument

Duration = float | int | timedelta
US_PER_S = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def duration_us(value: Duration, what: str = "duration", *, allow_zero: bool = True) -> int:
    """Seconds (float) or timedelta to whole microseconds; negative values are refused."""
    if isinstance(value, timedelta):
        us = (value.days * 86_400 + value.seconds) * US_PER_S + value.microseconds
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{what} must be seconds or a timedelta, not {type(value).__name__}")
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgument(f"{what} must be finite")
        us = round(value * US_PER_S)
    if us < 0 or (us == 0 and not allow_zero):
        raise InvalidArgument(f"{what} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return us


def instant_us(value: datetime, what: str = "instant") -> int:
    """A timezone-aware datetime to microseconds since the epoch."""
    if not isinstance(value, datetime):
        raise InvalidArgument(f"{what} must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{what} must be timezone-aware")
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * US_PER_S + delta.microseconds


def to_datetime(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def maybe_datetime(us: int | None) -> datetime | None:
    return None if us is None else to_datetime(us)
