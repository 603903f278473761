"""Schedule values: cron and interval expressions read in a time zone,
and when they fire next (``Expression``); the options of the jobs a
schedule enqueues (``ScheduleOptions``); its catch-up policy (``CatchUp``).

croniter does the cron arithmetic: it is pure (the start instant is an
argument), handles 5- and 6-field expressions and the usual aliases. A cron
expression is read in the schedule's IANA time zone (``zoneinfo``: tz data,
read, not a clock); ``Expression.next_after`` states what a daylight-saving
change does to its fire times.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from typing import Any, Literal, TypeGuard
from zoneinfo import ZoneInfo

import orjson
from croniter import croniter

from . import codec
from .errors import CodecError, InvalidArgument, brief
from .timeconv import (
    MAX_DURATION_US,
    US_PER_S,
    instant_us,
    to_datetime,
)
from .types import check_max_attempts, check_priority

_UNITS = {
    "ms": 1_000,
    "s": US_PER_S,
    "m": 60 * US_PER_S,
    "h": 3600 * US_PER_S,
    "d": 86400 * US_PER_S,
}


_EVERY = re.compile(r"^@every\s+((?:\d+(?:\.\d+)?(?:ms|s|m|h|d)\s*)+)$")


_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


# The Gregorian calendar (weekdays included) repeats every 400 years: an
# expression that fires at all fires within any 400-year window.
_CALENDAR_CYCLE_YEARS = 400


# croniter's "R" field draws a new random value each time it is expanded, so
# every process (and every tick) would compute different fire times.
_RANDOM_FIELD = re.compile(r"r(?:\(\d+-\d+\))?(?:/\d+)?", re.ASCII | re.IGNORECASE)


# Zone names that load on some machines but are not IANA zones: each
# machine would read its own local time into them.
_NOT_IANA = frozenset({"localtime", "posixrules", "Factory"})


_ZONE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*$")


DEFAULT_TZ = "UTC"


_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)  # a start for croniter, never the clock


@lru_cache(maxsize=256)
def _zone(name: str) -> tzinfo:
    return UTC if name == DEFAULT_TZ else ZoneInfo(name)


def check_tz(name: object) -> str:
    """An IANA time zone name (``Europe/Paris``, ``UTC``); ``InvalidArgument``
    for anything the tz database does not know."""
    if not isinstance(name, str) or not _ZONE_NAME.match(name) or name in _NOT_IANA:
        raise InvalidArgument(
            f"unknown time zone {brief(name)}: use an IANA name such as 'Europe/Paris'"
        )
    try:
        _zone(name)
    except Exception as exc:  # ZoneInfoNotFoundError, or a file that is not tz data
        raise InvalidArgument(
            f"unknown time zone {brief(name)}: use an IANA name such as 'Europe/Paris'"
        ) from exc
    return name


@lru_cache(maxsize=256)
def _parsed(text: str, six_field: bool) -> croniter:
    """A parsed cron expression, to copy (never to step: it is shared)."""
    return croniter(
        text,
        _EPOCH_UTC,
        second_at_beginning=six_field,
        max_years_between_matches=_CALENDAR_CYCLE_YEARS,
    )


@dataclass(frozen=True, slots=True)
class Expression:
    """A parsed expression. A cron expression is read in the wall-clock time
    of ``tz``; an ``@every`` interval is a plain duration (no zone changes it).

    Daylight-saving changes, for cron (croniter's own rules, plus one):

    - spring forward: a wall time the change skips fires once, at the first
      instant after the gap (``30 2 * * *`` fires at 03:00 that day), unless
      the hour field is ``*`` (the expression fires by the clock through the
      day: ``10 * * * *`` simply has no 02:10 that day);
    - fall back: a wall time that happens twice fires once, at its first
      occurrence, unless the hour field is ``*`` (``*/15 * * * *`` keeps
      firing every 15 minutes of real time through the repeated hour).
      croniter alone would fire ``30 1 * * *`` twice that night.
    """

    text: str
    every_us: int | None  # set for "@every <duration>"
    six_field: bool
    tz: str = DEFAULT_TZ
    hour_wildcard: bool = False  # cron whose hour field is "*"

    def _iter(self, start_us: int) -> croniter:
        # A copy of a parsed iterator: parsing costs more than stepping.
        it = copy.copy(_parsed(self.text, self.six_field))
        it.set_current(to_datetime(start_us).astimezone(_zone(self.tz)), force=True)
        return it

    def _repeated(self, at_us: int) -> bool:
        """``at_us`` is the second occurrence of a wall time that a fall-back
        repeats, and this expression fires only at the first one."""
        if self.hour_wildcard or self.tz == DEFAULT_TZ:
            return False
        local = to_datetime(at_us).astimezone(_zone(self.tz))
        return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()

    def next_after(self, after_us: int) -> int:
        """The first fire time strictly after ``after_us``."""
        if self.every_us is not None:
            # Intervals are anchored to the epoch, so every process computes
            # the same fire times whatever moment it registered the schedule.
            return (after_us // self.every_us + 1) * self.every_us
        it = self._iter(after_us)
        while True:
            nxt = instant_us(it.get_next(datetime).astimezone(UTC))
            if not self._repeated(nxt):
                return nxt

    def prev_before(self, before_us: int) -> int:
        """The last fire time strictly before ``before_us`` (the one that
        ``next_after`` would have returned just before it)."""
        if self.every_us is not None:
            return (before_us - 1) // self.every_us * self.every_us
        zone = _zone(self.tz)
        probe = before_us
        while True:
            # croniter's previous wall time (plain calendar arithmetic), at
            # its earliest instant; next_after then decides whether it is a
            # fire time here (a gap or a repeated hour may say no: then the
            # one before it is looked at).
            wall = to_datetime(probe).astimezone(zone).replace(tzinfo=None)
            it = copy.copy(_parsed(self.text, self.six_field))
            it.set_current(wall, force=True)
            prev = it.get_prev(datetime)
            cand = min(
                instant_us(prev.replace(tzinfo=zone, fold=fold).astimezone(UTC)) for fold in (0, 1)
            )
            if cand >= probe:  # a wall time the clocks skipped: look an hour earlier
                probe -= 3600 * US_PER_S
                continue
            fire = self.next_after(cand - 1)
            if fire < before_us:
                while (later := self.next_after(fire)) < before_us:
                    fire = later
                return fire
            probe = cand


def _duration_us(text: str) -> int | None:
    """``1h30m``-style text already matched by the grammar, in microseconds
    (None: longer than any duration alkstore stores)."""
    parts = [float(n) * _UNITS[u] for n, u in _PART.findall(text)]
    total = sum(round(p) for p in parts) if all(map(math.isfinite, parts)) else None
    return None if total is None or total > MAX_DURATION_US else total


_DURATION = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d)\s*)+$")


def parse_duration(text: object) -> int:
    """A duration written as in ``@every``: ``90s``, ``1h30m``, ``7d``,
    ``250ms``; in microseconds. Raises ``InvalidArgument``."""
    if not isinstance(text, str) or not _DURATION.match(text.strip()):
        raise InvalidArgument(
            f"bad duration {brief(text)}: use e.g. '90s', '15m', '1h30m' or '7d'"
        )
    total = _duration_us(text.strip())
    if total is None:
        raise InvalidArgument(f"duration {brief(text)} is too long")
    return total


def parse(text: object, tz: object = DEFAULT_TZ) -> Expression:
    """Parse ``@every 30s``/``@every 1h30m``, a 5-field cron (minutes) or a
    6-field cron (seconds first), or an alias such as ``@hourly``; a cron
    expression is read in time zone ``tz`` (an IANA name)."""
    if isinstance(text, str) and isinstance(tz, str):
        return _parse(text, tz)  # every tick parses its due rows: cached
    return _parse_checked(text, tz)


@lru_cache(maxsize=1024)
def _parse(text: str, tz: str) -> Expression:
    return _parse_checked(text, tz)


def _parse_checked(text: object, tz: object) -> Expression:
    zone = check_tz(tz)
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"schedule expression must be a non-empty string, got {brief(text)}")
    expr = " ".join(text.split())
    every = _EVERY.match(expr)
    if every:
        total = _duration_us(every.group(1))
        if total is None:
            raise InvalidArgument(f"@every interval is too long: {brief(text)}")
        if total < 1_000:
            raise InvalidArgument("@every interval must be at least 1 ms")
        return Expression(expr, total, False, zone)
    if expr.startswith("@every"):
        raise InvalidArgument(
            f"bad @every expression {brief(text)}: use e.g. '@every 30s' or '@every 1h30m'"
        )
    fields = len(expr.split())
    if not expr.startswith("@") and fields not in (5, 6):
        raise InvalidArgument(f"cron expression {brief(text)} must have 5 or 6 fields")
    six = fields == 6
    if any(_RANDOM_FIELD.fullmatch(field) for field in expr.split()):
        raise InvalidArgument(f"random 'R' cron fields are not supported: {brief(text)}")
    try:
        ok = croniter.is_valid(expr, second_at_beginning=six)
    except Exception:  # croniter raises assorted types on odd input
        ok = False
    if not ok:
        raise InvalidArgument(f"invalid cron expression {brief(text)}")
    try:
        hours = croniter(expr, _EPOCH_UTC, second_at_beginning=six).expanded[1]
    except Exception as exc:  # is_valid said yes; croniter raises assorted types
        raise InvalidArgument(f"invalid cron expression {brief(text)}") from exc
    parsed = Expression(expr, None, six, zone, hours == ["*"])
    # An expression may be well-formed and still never fire ("0 0 30 2 *").
    # The calendar repeats every 400 years, so one probe from any instant
    # tells: if it finds no fire time, there is none at any instant.
    try:
        parsed.next_after(0)
    except Exception as exc:  # croniter's CroniterBadDateError, or odd input
        raise InvalidArgument(f"cron expression {brief(text)} never fires") from exc
    return parsed


@dataclass(frozen=True, slots=True)
class ScheduleOptions:
    priority: int = 0
    max_attempts: int | None = None
    expires_after_us: int | None = None  # deadline for the job, counted from its fire time

    @classmethod
    def of(
        cls, priority: int = 0, max_attempts: int | None = None, expires_after: Any = None
    ) -> ScheduleOptions:
        from ..values.timeconv import duration_us

        attempts = None if max_attempts is None else check_max_attempts(max_attempts)
        expires = (
            None
            if expires_after is None
            else duration_us(expires_after, "expires_after", allow_zero=False)
        )
        return cls(check_priority(priority), attempts, expires)

    def encode(self) -> str:
        return orjson.dumps(
            {
                "priority": self.priority,
                "max_attempts": self.max_attempts,
                "expires_after_us": self.expires_after_us,
            }
        ).decode()

    @classmethod
    def decode(cls, text: str) -> ScheduleOptions:
        """Options read back from a schedule row; a corrupt row is a ``CodecError``."""
        raw = codec.decode(text)
        if not isinstance(raw, dict):
            raise CodecError("stored schedule options are not an object")
        priority = raw.get("priority", 0)
        attempts = raw.get("max_attempts")
        expires = raw.get("expires_after_us")
        for name, value, optional in (
            ("priority", priority, False),
            ("max_attempts", attempts, True),
            ("expires_after_us", expires, True),
        ):
            if (value is None and not optional) or (
                value is not None and (isinstance(value, bool) or not isinstance(value, int))
            ):
                raise CodecError(f"stored schedule option {name} is not an integer")
        return cls(priority, attempts, expires)


CatchUpPolicy = Literal["latest", "all", "skip"]


CATCH_UP_POLICIES: tuple[CatchUpPolicy, ...] = ("latest", "all", "skip")


DEFAULT_CATCH_UP_MAX = 10  # "all" without a cap given


MAX_CATCH_UP_MAX = 10_000  # one tick enqueues them in one transaction


DEFAULT_CATCH_UP_GRACE_US = 60 * US_PER_S  # "skip" without a grace given


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Which of the fire times that passed before a tick saw them get a job.

    - ``latest`` (the default): one job, for the latest fire time that has
      passed, however many did;
    - ``all``: one job per fire time that passed, the latest ``cap`` of them
      (the older ones get none);
    - ``skip``: a job only for a fire time the tick sees within ``grace_us``
      of it; any later, it was missed and gets none.

    Either way the schedule then goes on from its first fire time after now.
    """

    policy: CatchUpPolicy = "latest"
    cap: int | None = None  # "all": at most this many jobs per tick
    grace_us: int | None = None  # "skip": how late a fire time may still be enqueued

    @classmethod
    def of(cls, policy: object = "latest", cap: object = None, grace: Any = None) -> CatchUp:
        """Checked user input: ``cap`` only with ``all`` (default
        ``DEFAULT_CATCH_UP_MAX``), ``grace`` (seconds or ``timedelta``) only
        with ``skip`` (default 60 s). Raises ``InvalidArgument``."""
        from ..values.timeconv import duration_us

        if policy not in CATCH_UP_POLICIES:
            raise InvalidArgument(
                f"catch_up must be 'latest', 'all' or 'skip', got {brief(policy)}"
            )
        if cap is not None and policy != "all":
            raise InvalidArgument("catch_up_max applies to catch_up='all' only")
        if grace is not None and policy != "skip":
            raise InvalidArgument("catch_up_grace applies to catch_up='skip' only")
        if policy == "all":
            cap = DEFAULT_CATCH_UP_MAX if cap is None else cap
            if not _is_int(cap) or not 1 <= cap <= MAX_CATCH_UP_MAX:
                raise InvalidArgument(
                    f"catch_up_max must be an integer from 1 to {MAX_CATCH_UP_MAX}, "
                    f"got {brief(cap)}"
                )
            return cls("all", cap)
        if policy == "skip":
            us = (
                DEFAULT_CATCH_UP_GRACE_US
                if grace is None
                else duration_us(grace, "catch_up_grace", allow_zero=True)
            )
            return cls("skip", None, us)
        return cls()

    @classmethod
    def decode(cls, policy: object, cap: object, grace_us: object) -> CatchUp:
        """The policy read back from a schedule row; a corrupt row is a ``CodecError``."""
        if policy == "latest" and cap is None and grace_us is None:
            return cls()
        if policy == "all" and _is_int(cap) and cap >= 1 and grace_us is None:
            return cls("all", cap)
        if policy == "skip" and cap is None and _is_int(grace_us) and grace_us >= 0:
            return cls("skip", None, grace_us)
        raise CodecError(
            f"stored catch-up policy is corrupt: {brief(policy)}, {brief(cap)}, {brief(grace_us)}"
        )

    def fire_times(self, expr: Expression, fire_at_us: int, now_us: int) -> list[int]:
        """The fire times a tick at ``now_us`` enqueues, oldest first, for a
        schedule due since ``fire_at_us`` (``fire_at_us <= now_us``): each a
        fire time of ``expr`` from ``fire_at_us`` to now."""
        return self.plan(expr, fire_at_us, now_us)[0]

    def plan(self, expr: Expression, fire_at_us: int, now_us: int) -> tuple[list[int], int]:
        """``fire_times``, and the schedule's next fire time (the first after now)."""
        following = expr.next_after(fire_at_us)
        if following > now_us:
            latest = fire_at_us  # on time: the one fire time that passed
            nxt = following
        else:
            latest = max(fire_at_us, expr.prev_before(now_us + 1))
            nxt = expr.next_after(now_us)
        return self._choose(expr, fire_at_us, now_us, latest), nxt

    def _choose(self, expr: Expression, fire_at_us: int, now_us: int, latest: int) -> list[int]:
        if self.policy == "skip":
            assert self.grace_us is not None
            return [latest] if now_us - latest <= self.grace_us else []
        if self.policy == "latest":
            return [latest]
        assert self.cap is not None
        times = [latest]
        while len(times) < self.cap:
            earlier = expr.prev_before(times[-1])
            if earlier < fire_at_us:
                break
            times.append(earlier)
        return times[::-1]
