"""Schedules: when a cron or interval expression fires next, and the tick plan.

A schedule is a row (name, queue, expression, payload, next_fire_at). The tick
enqueues a job for a due row only if it can move that row's ``next_fire_at``
from the value it read to the next one (compare-and-set in the same
transaction), so any number of processes may tick at once and each fire time
enqueues exactly one job. Fire times missed while nobody ticked collapse into
one job (catch-up fires once), then the schedule continues from now.

croniter does the cron arithmetic: it is pure (the start instant is an
argument), handles 5- and 6-field expressions and the usual aliases.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from croniter import croniter

from . import codec
from .backoff import ErrorBackoff, exact
from .dialect import Dialect
from .errors import CodecError, InvalidArgument, brief
from .names import queue_channel
from .plan import Plan, fetch_all, fetch_count, fetch_one, fetch_row, reads
from .rows import schedule_info
from .timeconv import (
    MAX_DURATION_US,
    MAX_INSTANT_US,
    US_PER_S,
    check_seconds,
    instant_us,
    to_datetime,
)
from .types import NewJob, NewSchedule, ScheduleInfo, check_max_attempts, check_priority

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


@dataclass(frozen=True, slots=True)
class Expression:
    text: str
    every_us: int | None  # set for "@every <duration>"
    six_field: bool

    def next_after(self, after_us: int) -> int:
        """The first fire time strictly after ``after_us``."""
        if self.every_us is not None:
            # Intervals are anchored to the epoch, so every process computes
            # the same fire times whatever moment it registered the schedule.
            return (after_us // self.every_us + 1) * self.every_us
        start = to_datetime(after_us)
        it = croniter(
            self.text,
            start,
            second_at_beginning=self.six_field,
            max_years_between_matches=_CALENDAR_CYCLE_YEARS,
        )
        nxt = it.get_next(datetime)
        return instant_us(nxt.astimezone(UTC))


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


def parse(text: object) -> Expression:
    """Parse ``@every 30s``/``@every 1h30m``, a 5-field cron (minutes) or a
    6-field cron (seconds first), or an alias such as ``@hourly``."""
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
        return Expression(expr, total, False)
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
    parsed = Expression(expr, None, six)
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
        from .timeconv import duration_us

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


def register(
    d: Dialect,
    name: str,
    queue: str,
    expr: Expression,
    payload_json: str,
    options: ScheduleOptions,
    now_us: int,
) -> Plan[None]:
    """Create or update a schedule. Re-registering the same expression keeps
    its next fire time, so every process may register at start-up."""
    next_fire = expr.next_after(now_us)
    encoded = options.encode()
    yield d.upsert_schedule(
        NewSchedule(name, queue, expr.text, payload_json, encoded, next_fire, now_us)
    )


def unregister(d: Dialect, name: str) -> Plan[bool]:
    count = yield from fetch_count(d.delete_schedule(name))
    return bool(count)


def pause(d: Dialect, name: str) -> Plan[bool]:
    """Pause schedule ``name``: it fires nothing until resumed (its fire
    time stays where it was). False when there is no such schedule."""
    count = yield from fetch_count(d.pause_schedule(name))
    return bool(count)


def resumed_fire_time(expression: str, now_us: int) -> int:
    """The next fire time of a schedule resumed at ``now_us``: the first one
    after now. The fire times that passed while it was paused are dropped,
    not caught up (a pause means "not now", not "later")."""
    return parse(expression).next_after(now_us)


def resume(d: Dialect, name: str, now_us: int) -> Plan[bool]:
    """Resume schedule ``name`` from its first fire time after ``now_us``;
    a schedule that is not paused is left as it is. False when there is no
    such schedule."""
    row = yield from fetch_one(d.schedule_state(name))
    if row is None:
        return False
    expression, fire_at, paused = row
    if not paused:
        return True
    nxt = resumed_fire_time(expression, now_us)
    # The row is ours (Postgres: locked by the read; SQLite: the write
    # lock), so the compare-and-set on the fire time read always moves it.
    yield from fetch_count(d.resume_schedule(name, int(fire_at), nxt))
    return True


@reads
def list_schedules(d: Dialect) -> Plan[list[ScheduleInfo]]:
    """Every registered schedule, by name."""
    rows = yield from fetch_all(d.list_schedules())
    return [schedule_info(r, ScheduleOptions.decode) for r in rows]


@dataclass(frozen=True, slots=True)
class Fired:
    schedule: str
    queue: str
    fire_at_us: int
    job_id: int


# Due schedules one tick handles per transaction; a full batch means more
# may be due, so the caller ticks again at once.
TICK_BATCH = 100


def tick(
    d: Dialect, now_us: int, origin: str, default_max_attempts: int, limit: int = TICK_BATCH
) -> Plan[list[Fired]]:
    """Enqueue one job per due schedule, each guarded by compare-and-set."""
    rows = yield from fetch_all(d.due_schedules(now_us, limit))
    fired: list[Fired] = []
    woken: set[str] = set()
    for name, queue, text, payload_json, options_json, fire_at in rows:
        expr = parse(text)
        nxt = expr.next_after(max(int(fire_at), now_us))
        moved = yield from fetch_count(d.advance_schedule(name, int(fire_at), nxt))
        if not moved:
            continue  # another ticker took this fire time
        opts = ScheduleOptions.decode(options_json)
        expires = (
            None
            if opts.expires_after_us is None
            # Past what a datetime holds, the job could no longer be read.
            else min(int(fire_at) + opts.expires_after_us, MAX_INSTANT_US)
        )
        job = NewJob(
            queue=queue,
            payload_json=payload_json,
            priority=opts.priority,
            run_at_us=int(fire_at),
            max_attempts=opts.max_attempts or default_max_attempts,
            expires_at_us=expires,
        )
        row = yield from fetch_row(d.enqueue(job, now_us))
        fired.append(Fired(name, queue, int(fire_at), int(row[0])))
        woken.add(queue)
    for queue in sorted(woken):
        yield d.notify(queue_channel(queue), origin, now_us)
    return fired


@reads
def next_fire(d: Dialect) -> Plan[int | None]:
    row = yield from fetch_one(d.next_schedule_time())
    return None if row is None or row[0] is None else int(row[0])


# -- the scheduler loop ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Tick:
    """Enqueue every due fire time (``tick`` until a batch comes back short),
    then read when the next one is."""


@dataclass(frozen=True, slots=True)
class Sleep:
    """Sleep this many seconds, then tick."""

    seconds: float


SchedulerAction = Tick | Sleep


class SchedulerLoop:
    """The decisions of ``run_scheduler``: tick, then sleep until the next
    fire time but at most ``max_sleep`` (schedules added elsewhere meanwhile
    are noticed by then), and tick again. A failed tick is tried again after
    ``retry_after`` (at most ``max_sleep``), not after a whole ``max_sleep``.

    The sleeps are durations, not instants: each one ends in a tick whatever
    the store's clock says, so a schedule added elsewhere is still seen
    within ``max_sleep`` of real time.
    """

    def __init__(self, max_sleep: float, retry_after: float) -> None:
        self.max_sleep = check_seconds(max_sleep, "max_sleep")
        retry_after = check_seconds(retry_after, "retry_after")
        pause_us = min(MAX_DURATION_US, round(min(retry_after, self.max_sleep) * US_PER_S))
        self.failures = ErrorBackoff(exact(pause_us, pause_us, factor=1.0))
        self._sleep: float | None = None  # None: tick next

    def next_action(self) -> SchedulerAction:
        return Tick() if self._sleep is None else Sleep(self._sleep)

    def ticked(self, now_us: int, next_fire_us: int | None) -> None:
        """A tick went through; the earliest next fire time (None: no schedule)."""
        self.failures.succeeded()
        wait = self.max_sleep
        if next_fire_us is not None:
            wait = min(self.max_sleep, max(0.0, (next_fire_us - now_us) / US_PER_S))
        self._sleep = wait

    def tick_failed(self) -> float:
        """A tick's round trip failed: seconds until the next try."""
        self._sleep = self.failures.failed() / US_PER_S
        return self._sleep

    def slept(self) -> None:
        self._sleep = None
