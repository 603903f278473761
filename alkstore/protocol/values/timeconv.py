"""Durations and instants at the API edge, microseconds inside.

Every timestamp the core stores is an integer count of microseconds since the
Unix epoch, so sub-second values survive exactly and ordering is exact on
every engine. The clock itself is an input: nothing here reads it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .errors import InvalidArgument, brief

Duration = float | int | timedelta
US_PER_S = 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
# Instants a datetime can hold (years 1 to 9999), and the longest duration:
# the span between them. An instant plus a duration then always fits in a
# signed 64-bit column, and every stored instant reads back as a datetime.
MIN_INSTANT_US = (datetime.min.replace(tzinfo=UTC) - _EPOCH) // _US
MAX_INSTANT_US = (datetime.max.replace(tzinfo=UTC) - _EPOCH) // _US
MAX_DURATION_US = MAX_INSTANT_US - MIN_INSTANT_US


def duration_us(value: Duration, what: str = "duration", *, allow_zero: bool = True) -> int:
    """Seconds (float) or timedelta to whole microseconds; negative values are refused."""
    if isinstance(value, timedelta):
        us = (value.days * 86_400 + value.seconds) * US_PER_S + value.microseconds
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{what} must be seconds or a timedelta, not {type(value).__name__}")
    else:
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgument(f"{what} must be finite")
        # Checked before scaling: a huge float would overflow to infinity.
        if abs(value) > MAX_DURATION_US // US_PER_S + 1:
            raise InvalidArgument(f"{what} is too long: {brief(value)}")
        us = round(value * US_PER_S)
    if us < 0 or (us == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InvalidArgument(f"{what} must be {bound}, got {brief(value)}")
    if us > MAX_DURATION_US:
        raise InvalidArgument(f"{what} is too long: {brief(value)}")
    return us


def check_seconds(value: object, what: str, *, allow_zero: bool = False) -> float:
    """A setting in seconds (a number or a timedelta), finite and >= 0 (or > 0)."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(f"{what} must be seconds (a number or a timedelta), got "
                              f"{brief(value)}")  # fmt: skip
    if isinstance(value, int) and value > MAX_DURATION_US // US_PER_S + 1:
        # Checked before converting: an int past a float's range overflows.
        raise InvalidArgument(f"{what} is too long: {brief(value)}")
    if isinstance(value, int) and value < 0:
        raise InvalidArgument(f"{what} must be {'>= 0' if allow_zero else '> 0'} seconds, got "
                              f"{brief(value)}")  # fmt: skip
    seconds = float(value)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise InvalidArgument(f"{what} must be finite, got {brief(value)}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise InvalidArgument(f"{what} must be {'>= 0' if allow_zero else '> 0'} seconds, got "
                              f"{brief(value)}")  # fmt: skip
    if seconds > MAX_DURATION_US / US_PER_S:
        raise InvalidArgument(f"{what} is too long: {brief(value)}")
    return seconds


def check_instant_us(us: int, what: str = "instant") -> int:
    """Refuse an instant outside what a datetime can hold (years 1 to 9999)."""
    if not MIN_INSTANT_US <= us <= MAX_INSTANT_US:
        raise InvalidArgument(f"{what} is outside the years 1 to 9999")
    return us


def held_until_us(now_us: int, duration_us: int) -> int:
    """The end of a claim made with a queue's visibility timeout, capped at
    the latest instant a datetime can hold: held until the year 9999 is held
    for good, and every stored instant must read back as a datetime (past
    it, the row could no longer be read)."""
    return min(now_us + duration_us, MAX_INSTANT_US)


def until_us(now_us: int, duration_us: int, what: str) -> int:
    """``now + duration`` for a duration given to the call (a delay, a TTL,
    an extension): refused, like an enqueue's ``run_at``, when it ends past
    what a datetime can hold."""
    end = now_us + duration_us
    if end > MAX_INSTANT_US:
        raise InvalidArgument(f"{what} is too long: it would end after the year 9999")
    return end


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


def human_duration(seconds: float | None) -> str:
    """``3d 4h``, ``12m 5s``, ``0.4s``: the two largest units (never
    negative); ``-`` for None. How the CLI and the dashboard show spans."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{max(0.0, seconds):.1f}s"
    s = int(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if s >= size or (unit == "s" and not parts):
            parts.append(f"{s // size}{unit}")
            s %= size
        if len(parts) == 2:
            break
    return " ".join(parts)
