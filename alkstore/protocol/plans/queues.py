"""Queue plans that do not involve ownership: enqueue, inspect, cancel, dead letters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from ..dialect import STATE_PROCESSING, Dialect
from ..plan import (
    Plan,
    Row,
    Statement,
    fetch_all,
    fetch_count,
    fetch_inserted_id,
    fetch_one,
    fetch_row,
    last,
    reads,
    waking,
)
from ..rows import (
    _bool,
    _int,
    _opt_int,
    _shape,
    attempt,
    dead_info,
    history_info,
    job_info,
    queue_limits,
    waiting_info,
)
from ..values.errors import DatabaseError, InvalidArgument, brief
from ..values.ints import check_int
from ..values.names import cancel_channel, done_channel, queue_channel
from ..values.timeconv import held_until_us
from ..values.types import Enqueued, JobInfo, NewJob, QueueLimits, QueueStats, Rate
from . import dependencies
from .chunks import ENQUEUE_CHUNK, chunks


def enqueue(d: Dialect, job: NewJob, origin: str, now_us: int) -> Plan[int]:
    # One statement that also wakes workers of this queue, here and in
    # other processes, once it commits: a plan of one last statement, which
    # a driver may run as a transaction of its own (no BEGIN, no COMMIT).
    insert = d.enqueue_waking(job, queue_channel(job.queue), origin, now_us)
    return (yield from fetch_inserted_id(last(insert)))




def enqueue_many(d: Dialect, jobs: list[NewJob], origin: str, now_us: int) -> Plan[list[int]]:
    ids: list[int] = []
    wakes = [
        (channel, d.notify_new_jobs(channel, origin, now_us))
        for channel in dict.fromkeys(queue_channel(job.queue) for job in jobs)
    ]
    for start in range(0, len(jobs), ENQUEUE_CHUNK):
        chunk = jobs[start : start + ENQUEUE_CHUNK]
        insert = d.enqueue_many(chunk, now_us)
        if start == 0:
            # Channels whose wake is the new rows ride on the first insert.
            insert = waking(insert, *(channel for channel, wake in wakes if wake is None))
        rows = yield from fetch_all(insert)
        if len(rows) != len(chunk):
            raise DatabaseError(f"inserted {len(rows)} of {len(chunk)} jobs")
        # Ids are handed out in insertion order, which is the jobs' order, so
        # ascending ids line up with the jobs; RETURNING itself promises no
        # order on either engine.
        ids.extend(sorted(int(r[0]) for r in rows))
    for _, wake in wakes:
        if wake is not None:
            yield wake
    return ids


# -- unique jobs ------------------------------------------------------------------
# A round of a unique enqueue is lost when the key's holder settles between
# the insert that found it and the read that looks it up (a commit
# elsewhere); a few rounds always get through in practice.
UNIQUE_ROUNDS = 16


def enqueue_unique(
    d: Dialect, job: NewJob, key: str, unique_for_us: int | None, origin: str, now_us: int
) -> Plan[Enqueued]:
    """Insert ``job`` holding unique ``key`` in its queue, unless a live job
    holds it (or, with ``unique_for_us``, a job acked that recently and kept
    in history does): then nothing is inserted and that job's id comes back
    as a duplicate."""
    if unique_for_us is not None:
        yield from check_unique_for(d, job.queue, unique_for_us)
    result = yield from _insert_unique(d, job, key, unique_for_us, now_us)
    if not result.duplicate:
        yield d.notify(queue_channel(job.queue), origin, now_us)
    return result


def enqueue_unique_many(
    d: Dialect,
    jobs: Sequence[tuple[NewJob, str]],
    unique_for_us: int | None,
    origin: str,
    now_us: int,
) -> Plan[list[Enqueued]]:
    """``enqueue_unique`` for each (job, key) in order, in one transaction:
    a key that comes twice in the batch goes in once, and its later jobs are
    duplicates of the first."""
    queues_seen = dict.fromkeys(job.queue for job, _ in jobs)
    if unique_for_us is not None:
        for queue in queues_seen:
            yield from check_unique_for(d, queue, unique_for_us)
    results: list[Enqueued] = []
    for job, key in jobs:
        results.append((yield from _insert_unique(d, job, key, unique_for_us, now_us)))
    if not all(r.duplicate for r in results):
        for queue in queues_seen:
            yield d.notify(queue_channel(queue), origin, now_us)
    return results


def check_unique_for(d: Dialect, queue: str, unique_for_us: int) -> Plan[None]:
    """``unique_for`` needs the acked jobs kept in history at least that long:
    the key is looked up there once its job is gone."""
    history_us, _, _ = yield from retention(d, queue)
    if history_us is None:
        raise InvalidArgument(
            f"unique_for needs queue {queue!r} to keep history: "
            "set_retention(history=...) at least as long as unique_for"
        )
    if unique_for_us > history_us:
        raise InvalidArgument(
            f"unique_for ({unique_for_us / 1e6:g}s) is longer than queue {queue!r} keeps "
            f"history ({history_us / 1e6:g}s): the key would be freed early"
        )


def _insert_unique(
    d: Dialect, job: NewJob, key: str, unique_for_us: int | None, now_us: int
) -> Plan[Enqueued]:
    """One job's unique insert (no wake). The unique index decides; the rest
    reads who holds the key. The history check comes after the insert so it
    sees every ack committed before the insert got its slot (on Postgres an
    ack of the key's holder in flight makes the insert wait for it)."""
    for _ in range(UNIQUE_ROUNDS):
        row = yield from fetch_one(d.enqueue_unique(job, key, now_us))
        if row is not None:
            new_id = int(row[0])
            if unique_for_us is not None:
                kept = yield from fetch_one(d.unique_acked(job.queue, key, now_us - unique_for_us))
                if kept is not None:
                    # Taken back in the same transaction: nobody ever saw it.
                    yield from fetch_count(d.cancel(job.queue, new_id))
                    return Enqueued(int(kept[0]), True)
            if job.concurrency_key is not None:
                yield d.set_concurrency_keys([(new_id, job.concurrency_key)])
            return Enqueued(new_id, False)
        holder = yield from fetch_one(d.unique_holder(job.queue, key))
        if holder is None:
            continue  # the holder settled meanwhile: try again
        holder_id, state = int(holder[0]), int(holder[1])
        if state == STATE_PROCESSING:
            taken = yield from fetch_count(d.take_unique_key(job.queue, key, holder_id))
            if taken:
                continue  # its queue lets a processing job yield: the key is free
        return Enqueued(holder_id, True)
    raise DatabaseError(f"unique key {key!r} changed hands {UNIQUE_ROUNDS} times in one enqueue")


def set_limits(d: Dialect, queue: str, limits: QueueLimits) -> Plan[None]:
    """Record ``queue``'s limits, replacing what it had; a queue with none
    is claimed by the plain claim, as before limits existed."""
    yield d.set_limits(queue, limits.concurrency_per_key, _rate(limits.rate),
                       _rate(limits.rate_per_key))  # fmt: skip


def _rate(rate: Rate | None) -> tuple[int, int] | None:
    return None if rate is None else (rate.limit, rate.period_us)


@reads
def limits(d: Dialect, queue: str) -> Plan[QueueLimits]:
    """``queue``'s limits (all None: none)."""
    row = yield from fetch_one(d.queue_limits(queue))
    return queue_limits(row)


def set_unique_processing(d: Dialect, queue: str, blocks: bool) -> Plan[None]:
    """Record whether a processing job of ``queue`` keeps its unique key."""
    yield d.set_unique_processing(queue, blocks)


@reads
def get_job(d: Dialect, queue: str | None, job_id: int) -> Plan[JobInfo | None]:
    """The job ``job_id`` of ``queue`` (None: of any queue) where it is now:
    live, waiting, dead, or finished and kept in its queue's history; None
    when it is in none of them (never enqueued, or finished with no history
    kept). With its dependencies, dependents, workflow step and attempt
    history. One read transaction, so a job moving meanwhile is seen in one
    place."""
    job_id = check_job_id(job_id)
    info = yield from _where(d, queue, job_id)
    if info is None:
        return None
    deps = yield from fetch_all(d.dependencies(job_id))
    dependents = yield from fetch_all(d.dependents(job_id))
    step = yield from fetch_one(d.workflow_of(job_id))
    attempts = yield from fetch_all(d.job_attempts(job_id))
    return replace(
        info,
        attempt_history=tuple(attempt(r) for r in attempts),
        dependencies=tuple(_int(r[0], "dep_id") for r in deps),
        dependents=tuple(_int(r[0], "job_id") for r in dependents),
        workflow_id=None if step is None else _int(step[0], "workflow_id"),
        step=None if step is None else str(step[1]),
    )


def _where(d: Dialect, queue: str | None, job_id: int) -> Plan[JobInfo | None]:
    row = yield from fetch_one(d.get_job(queue, job_id))
    if row is not None:
        return job_info(row)
    row = yield from fetch_one(d.get_waiting(queue, job_id))
    if row is not None:
        return waiting_info(row)
    row = yield from fetch_one(d.get_dead(queue, job_id))
    if row is not None:
        return dead_info(row)
    row = yield from fetch_one(d.get_history(queue, job_id))
    return None if row is None else history_info(row)


def cancel(d: Dialect, queue: str, job_id: int, origin: str, now_us: int) -> Plan[bool]:
    """Remove a live or waiting job; a worker's later ack returns False. The
    job moves into history (outcome ``cancelled``) when its queue keeps
    history, read in the same transaction, or when it is kept (a job in a
    dependency graph, or awaited), whose cancel then cancels what waits for
    it (``dependencies.settle_dependents``). A job removed notifies the
    queue's cancel channel when it was processing: a worker running it (here
    or in another process) looks, finds it gone, and cancels its handler. A
    pending job is nobody's, so its cancel wakes no worker (and, on a full
    database, needs no new row to free space)."""
    job_id = check_job_id(job_id)
    target = yield from fetch_one(d.cancel_target(queue, job_id))
    if target is None:
        waiting = yield from fetch_one(d.get_waiting(queue, job_id))
        if waiting is None:
            return False
        cancelled = yield from dependencies.cancel_waiting_jobs(d, [job_id], None, now_us)
        if not cancelled:
            return False
        yield from _cancelled_kept(d, queue, job_id, origin, now_us)
        return True
    if _bool(target[1], "keep"):
        first, *rest = d.cancel_kept(queue, job_id, None, now_us)
        count = len((yield from moved_rows([first, *rest])))
    else:
        history_us, _, _ = yield from retention(d, queue)
        if history_us is None:
            count = yield from fetch_count(d.cancel(queue, job_id))
            if count:
                yield d.forget_attempts([job_id])
        else:
            moves = d.cancel_history(queue, job_id, now_us, kept_until(now_us, history_us))
            count = yield from moved(moves)
    if count and _int(target[0], "state") == STATE_PROCESSING:
        yield d.notify(cancel_channel(queue), origin, now_us)
    if count and _bool(target[1], "keep"):
        yield from _cancelled_kept(d, queue, job_id, origin, now_us)
    return bool(count)


def _cancelled_kept(d: Dialect, queue: str, job_id: int, origin: str, now_us: int) -> Plan[None]:
    """A kept job was cancelled: cancel what waits for it, wake its awaiters."""
    why = f"dependency job {job_id} was cancelled"
    yield from dependencies.settle_dependents(d, [], [(job_id, why)], origin, now_us)
    yield d.notify(done_channel(queue), origin, now_us)


@reads
def cancelled_among(d: Dialect, queue: str, job_ids: Sequence[int]) -> Plan[list[int]]:
    """Which of ``job_ids`` (jobs a worker holds) were cancelled: no longer
    live, not dead, and not in history as acked. One statement for all of
    them, so one round trip and one snapshot however many jobs the worker
    holds (a job moving between the tables meanwhile is seen in one place).

    Only the worker can ack a job it holds, and it asks only about jobs it
    has not settled, so a job gone from the live table and not swept to the
    dead letters was cancelled. Without history, a job whose claim lapsed
    and that another worker then claimed and acked looks the same: the
    caller's claim was lost either way."""
    if not job_ids:
        return []
    rows = yield from fetch_all(d.cancelled_among(queue, job_ids))
    gone = {_int(row[0], "id") for row in rows}
    return [job_id for job_id in job_ids if job_id in gone]  # in the caller's order


def kept_until(now_us: int, retention_us: int) -> int:
    """When a job finished at ``now_us`` leaves history: its queue's
    retention later, capped like a claim (every stored instant must read
    back as a datetime)."""
    return held_until_us(now_us, retention_us)


def moved(statements: Sequence[Statement]) -> Plan[int]:
    """Move rows between tables; how many moved. The first statement's row
    count says (one statement on an engine that deletes and inserts in one);
    the rest, on an engine that copies first, delete the same rows in the
    same transaction, and run only if anything moved."""
    first, *rest = statements
    count = yield from fetch_count(first)
    if count:
        for statement in rest:
            yield statement
    return int(count)


def moved_rows(statements: Sequence[Statement]) -> Plan[list[Row]]:
    """``moved`` for a move whose first statement returns the rows moved."""
    first, *rest = statements
    rows = yield from fetch_all(first)
    if rows:
        for statement in rest:
            yield statement
    return rows


def set_retention(
    d: Dialect,
    queue: str,
    history_us: int | None,
    dead_us: int | None,
    results_us: int | None = None,
) -> Plan[None]:
    """Record how long ``queue`` keeps finished jobs, dead letters and kept
    jobs' results, for every process (its pause flag stays)."""
    yield d.set_retention(queue, history_us, dead_us, results_us)


RETENTIONS = ("history", "dead", "results")


def update_retention(d: Dialect, queue: str, changes: dict[str, int | None]) -> Plan[None]:
    """Set the retentions named in ``changes`` (``RETENTIONS``), keeping
    the others as they are, in one transaction."""
    unknown = set(changes) - set(RETENTIONS)
    if unknown:
        raise InvalidArgument(f"unknown retention {min(unknown)!r}")
    current = yield from retention(d, queue)
    merged = dict(zip(RETENTIONS, current, strict=True)) | changes
    yield d.set_retention(queue, merged["history"], merged["dead"], merged["results"])


@reads
def retention(d: Dialect, queue: str) -> Plan[tuple[int | None, int | None, int | None]]:
    """``queue``'s (history, dead, results) retention in microseconds (None:
    finished jobs are not kept / dead letters stay until purged / results
    are kept ``RESULTS_RETENTION_US``; so for a queue never configured)."""
    row = yield from fetch_one(d.queue_retention(queue))
    if row is None:
        return None, None, None
    _shape(row, 3, "queue retention")
    return (
        _opt_int(row[0], "history_us"), _opt_int(row[1], "dead_us"),
        _opt_int(row[2], "results_us"),
    )  # fmt: skip


@reads
def stats(d: Dialect, queue: str, now_us: int) -> Plan[QueueStats]:
    ready, scheduled, processing = yield from fetch_row(d.queue_counts(queue, now_us))
    (dead,) = yield from fetch_row(d.dead_count(queue))
    paused = yield from is_paused(d, queue)
    (waiting,) = yield from fetch_row(d.waiting_count(queue))
    return QueueStats(int(ready), int(scheduled), int(processing), int(dead), paused,
                      int(waiting))  # fmt: skip


@reads
def oldest_ready(d: Dialect, queue: str, now_us: int) -> Plan[int | None]:
    """When the ready job that became due first did (None: no job is ready:
    no row, or a NULL minimum)."""
    row = yield from fetch_one(d.oldest_ready(queue, now_us))
    return None if row is None or row[0] is None else int(row[0])


@reads
def depth(d: Dialect, queue: str, now_us: int) -> Plan[tuple[QueueStats, int | None]]:
    """The queue's counts and when its oldest ready job became due, read
    together (what a monitor samples)."""
    counts = yield from stats(d, queue, now_us)
    oldest = yield from oldest_ready(d, queue, now_us)
    return counts, oldest


def set_paused(d: Dialect, queue: str, paused: bool, origin: str, now_us: int) -> Plan[None]:
    """Pause or resume ``queue``. Resuming wakes its workers, here and in
    other processes, so they claim at once rather than at their poll."""
    yield d.set_paused(queue, paused)
    if not paused:
        yield d.notify(queue_channel(queue), origin, now_us)


@reads
def is_paused(d: Dialect, queue: str) -> Plan[bool]:
    row = yield from fetch_one(d.queue_paused(queue))
    return row is not None and bool(row[0])


@reads
def dead_letters(d: Dialect, queue: str, limit: int) -> Plan[list[JobInfo]]:
    rows = yield from fetch_all(d.dead_letters(queue, check_limit(limit)))
    return [dead_info(r) for r in rows]


def requeue_dead(d: Dialect, queue: str, job_id: int, origin: str, now_us: int) -> Plan[bool]:
    """Back to pending, due now, with fresh attempts and no deadline."""
    job_id = check_job_id(job_id)
    # The first statement's row count says whether the job moved; an engine
    # that can move it in one statement returns just that one.
    first, *rest = d.requeue_dead(queue, job_id, now_us)
    moved = yield from fetch_count(first)
    if not moved:
        return False
    for statement in rest:
        yield statement
    yield d.place_attempts(job_id, buried=False)
    yield d.notify(queue_channel(queue), origin, now_us)
    return True


def purge_dead(d: Dialect, queue: str, before_us: int | None) -> Plan[int]:
    rows = yield from fetch_all(d.purge_dead(queue, before_us))
    yield from forget_edges(d, rows)
    return len(rows)


def forget_edges(d: Dialect, rows: Sequence[Row]) -> Plan[None]:
    """The jobs of ``rows`` (``(id,)``: records just deleted) no longer wait
    for anything: their dependency edges go too, and their attempts."""
    for chunk in chunks([_int(r[0], "id") for r in rows]):
        yield d.forget_dependencies(chunk)
        yield d.forget_attempts(chunk)


def purge_dead_ids(d: Dialect, queue: str, job_ids: list[int]) -> Plan[int]:
    """Delete the dead letters of ``queue`` among ``job_ids`` (ids that are
    not, live jobs included, are left alone); returns how many."""
    if not job_ids:
        return 0
    rows = yield from fetch_all(d.purge_dead_ids(queue, job_ids))
    yield from forget_edges(d, rows)
    return len(rows)


def check_job_id(job_id: object) -> int:
    return check_int(job_id, "job id")


def check_job_ids(job_ids: object) -> list[int]:
    if isinstance(job_ids, str | bytes) or not isinstance(job_ids, Iterable):
        raise InvalidArgument(f"job ids must be a sequence of ints, got {brief(job_ids)}")
    return [check_job_id(i) for i in job_ids]


def check_limit(limit: object, what: str = "limit") -> int:
    return check_int(limit, what, lo=1)
