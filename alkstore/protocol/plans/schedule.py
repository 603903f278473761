"""Schedules: when a cron or interval expression fires next, and the tick plan.

A schedule is a row (name, queue, expression, time zone, catch-up policy,
payload, next_fire_at). The tick enqueues the jobs of a due row only if it
can move that row's ``next_fire_at`` from the value it read to the next one
(compare-and-set in the same transaction), so any number of processes may
tick at once and each fire time enqueues at most one job. Which of the fire
times missed while nobody ticked get a job is the schedule's catch-up policy
(``CatchUp``): the latest one (the default), all of them up to a cap, or none;
then the schedule continues from now.

The expressions, options and policies are values (``values/schedules.py``);
the loop that ticks and sleeps is a machine (``machines/scheduler.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dialect import SCHEDULE_COLUMNS, Dialect
from ..plan import Plan, fetch_all, fetch_count, fetch_inserted_id, fetch_one, reads
from ..rows import _str, schedule_info
from ..values.names import queue_channel
from ..values.schedules import DEFAULT_TZ, CatchUp, Expression, ScheduleOptions, parse
from ..values.timeconv import (
    MAX_INSTANT_US,
)
from ..values.types import NewJob, NewSchedule, ScheduleInfo

# The default policy: the latest missed fire time gets a job.
_LATEST = CatchUp()


def register(
    d: Dialect,
    name: str,
    queue: str,
    expr: Expression,
    payload_json: str,
    options: ScheduleOptions,
    now_us: int,
    catch_up: CatchUp = _LATEST,
) -> Plan[None]:
    """Create or update a schedule. Re-registering the same expression in
    the same time zone keeps its next fire time, so every process may
    register at start-up."""
    next_fire = expr.next_after(now_us)
    encoded = options.encode()
    yield d.upsert_schedule(
        NewSchedule(
            name, queue, expr.text, payload_json, encoded, next_fire, now_us,
            expr.tz, catch_up.policy, catch_up.cap, catch_up.grace_us,
        )
    )  # fmt: skip


def unregister(d: Dialect, name: str) -> Plan[bool]:
    count = yield from fetch_count(d.delete_schedule(name))
    return bool(count)


def pause(d: Dialect, name: str) -> Plan[bool]:
    """Pause schedule ``name``: it fires nothing until resumed (its fire
    time stays where it was). False when there is no such schedule."""
    count = yield from fetch_count(d.pause_schedule(name))
    return bool(count)


def resumed_fire_time(expression: str, now_us: int, tz: str = DEFAULT_TZ) -> int:
    """The next fire time of a schedule resumed at ``now_us``: the first one
    after now. The fire times that passed while it was paused are dropped,
    not caught up (a pause means "not now", not "later"), whatever its
    catch-up policy."""
    return parse(expression, tz).next_after(now_us)


def resume(d: Dialect, name: str, now_us: int) -> Plan[bool]:
    """Resume schedule ``name`` from its first fire time after ``now_us``;
    a schedule that is not paused is left as it is. False when there is no
    such schedule."""
    row = yield from fetch_one(d.schedule_state(name))
    if row is None:
        return False
    expression, tz, fire_at, paused = row
    if not paused:
        return True
    nxt = resumed_fire_time(expression, now_us, tz)
    # The row is ours (Postgres: locked by the read; SQLite: the write
    # lock), so the compare-and-set on the fire time read always moves it.
    yield from fetch_count(d.resume_schedule(name, int(fire_at), nxt))
    return True


@reads
def list_schedules(d: Dialect) -> Plan[list[ScheduleInfo]]:
    """Every registered schedule, by name."""
    rows = yield from fetch_all(d.list_schedules())
    return [schedule_info(r, ScheduleOptions.decode, CatchUp.decode) for r in rows]


@dataclass(frozen=True, slots=True)
class Fired:
    schedule: str
    queue: str
    fire_at_us: int
    job_id: int


# Due schedules one tick handles per transaction; a full batch means more
# may be due, so the caller ticks again at once.
TICK_BATCH = 100


def tick_rows(
    d: Dialect, now_us: int, origin: str, default_max_attempts: int, limit: int = TICK_BATCH
) -> Plan[tuple[list[Fired], int]]:
    """Enqueue each due schedule's jobs (its catch-up policy says for which
    fire times), each schedule guarded by one compare-and-set that moves its
    fire time on past now; returns the jobs and how many due rows it read
    (``limit`` of them: more may be due)."""
    rows = yield from fetch_all(d.due_schedules(now_us, limit))
    fired: list[Fired] = []
    woken: set[str] = set()
    for row in rows:
        name, queue, text, tz, payload_json, options_json, fire_at = row[:7]
        fire_at = int(fire_at)
        policy = CatchUp.decode(*row[7:10])
        expr = parse(text, tz)
        # Computed before the move: the move commits only with their jobs.
        times, nxt = policy.plan(expr, fire_at, now_us)
        last = times[-1] if times else None
        moved = yield from fetch_count(d.advance_schedule(name, fire_at, nxt, last))
        if not moved:
            continue  # another ticker took these fire times
        opts = ScheduleOptions.decode(options_json)
        for at in times:
            job = _fired_job(queue, payload_json, opts, at, default_max_attempts)
            created = yield from fetch_inserted_id(d.enqueue(job, now_us))
            fired.append(Fired(name, queue, at, created))
            woken.add(queue)
    for queue in sorted(woken):
        yield d.notify(queue_channel(queue), origin, now_us)
    return fired, len(rows)


def _fired_job(
    queue: str, payload_json: str, opts: ScheduleOptions, at_us: int, default_max_attempts: int
) -> NewJob:
    """The job a schedule's fire at ``at_us`` enqueues."""
    expires = (
        None
        if opts.expires_after_us is None
        # Past what a datetime holds, the job could no longer be read.
        else min(at_us + opts.expires_after_us, MAX_INSTANT_US)
    )
    return NewJob(
        queue=queue,
        payload_json=payload_json,
        priority=opts.priority,
        run_at_us=at_us,
        max_attempts=opts.max_attempts or default_max_attempts,
        expires_at_us=expires,
    )


_NAME, _QUEUE = SCHEDULE_COLUMNS.index("name"), SCHEDULE_COLUMNS.index("queue")
_PAYLOAD, _OPTIONS = SCHEDULE_COLUMNS.index("payload"), SCHEDULE_COLUMNS.index("options")


def run_now(
    d: Dialect, name: str, now_us: int, origin: str, default_max_attempts: int
) -> Plan[int | None]:
    """Enqueue schedule ``name``'s job now, with its payload and job
    options, as a fire would; its fire times stay as they were (a paused
    schedule's too: someone asked for this one run). The new job's id, or
    None when there is no such schedule."""
    rows = yield from fetch_all(d.list_schedules())
    found = [r for r in rows if r[_NAME] == name]
    if not found:
        return None
    row = found[0]
    queue, payload_json = _str(row[_QUEUE], "queue"), _str(row[_PAYLOAD], "payload")
    opts = ScheduleOptions.decode(_str(row[_OPTIONS], "options"))
    job = _fired_job(queue, payload_json, opts, now_us, default_max_attempts)
    job_id = yield from fetch_inserted_id(d.enqueue(job, now_us))
    yield d.notify(queue_channel(queue), origin, now_us)
    return job_id


def tick(
    d: Dialect, now_us: int, origin: str, default_max_attempts: int, limit: int = TICK_BATCH
) -> Plan[list[Fired]]:
    """``tick_rows``, the jobs alone."""
    fired, _ = yield from tick_rows(d, now_us, origin, default_max_attempts, limit)
    return fired


@reads
def next_fire(d: Dialect) -> Plan[int | None]:
    row = yield from fetch_one(d.next_schedule_time())
    return None if row is None or row[0] is None else int(row[0])


