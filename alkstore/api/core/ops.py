"""Each operation's validation and plan, written once for every facade.

The async facades (``Store``, ``Queue``, ``Stream``, ``Transaction``, ...)
and the blocking ones (``alkstore.sync``) differ only in how they run a
plan: awaiting an executor, or blocking on a connection. What an operation
checks, and which plan it builds from which arguments, lives here, so both
kinds of facade raise the same errors for the same input and send the same
statements.

A function here takes the store's context (anything with ``dialect``,
``origin`` and ``now_us()``: ``OpContext``; the async stores' ``StoreCore``
and the blocking stores' own), checks its arguments (raising the
taxonomy's errors before any round trip), and returns the plan; where the
plan's work grows with its input (the facade keeps it off the event loop's
thread), it returns ``(plan, bulk)``. Nothing here runs anything.
"""

from __future__ import annotations

import enum
import traceback
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast

from ...protocol.dialect import Dialect
from ...protocol.plan import Plan
from ...protocol.plans import dependencies, inspection, queues, streams
from ...protocol.plans import wakes as wake_plans
from ...protocol.plans.queues import check_limit
from ...protocol.values import codec
from ...protocol.values.errors import (
    InvalidArgument,
    JobCancelled,
    JobFailed,
    PayloadTooLarge,
    UsageError,
    brief,
)
from ...protocol.values.ints import check_int
from ...protocol.values.names import check_identifier, check_key, check_name, outbox_queue_name
from ...protocol.values.timeconv import Duration, duration_us, instant_us
from ...protocol.values.types import (
    OUTBOX_OPTIONS,
    Enqueued,
    JobInfo,
    NewJob,
    QueueLimits,
    QueueOptions,
    QueueStats,
    QueueSummary,
    Rate,
    StreamEvent,
    StreamInfo,
    Throughput,
    resolve_enqueue,
    resolve_enqueue_many,
)

T = TypeVar("T")

# Operations on more rows than this are ``bulk`` (off the event loop's thread
# on SQLite: their work grows with their size).
INLINE_MAX = 200

Call = tuple[Plan[T], bool]

_DEFAULTS = QueueOptions()


class OpContext(Protocol):
    """What an operation needs of a store: its engine's dialect, the origin
    its notifications carry, and its clock."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def origin(self) -> str: ...

    def now_us(self) -> int: ...


class QueueHandle:
    """What a transaction needs of a queue handle (async or blocking): its
    name and the defaults its jobs take."""

    __slots__ = ()
    name: str
    _options: QueueOptions


class OutboxHandle:
    """What a transaction needs of an outbox handle: its queue."""

    __slots__ = ()
    queue: QueueHandle


def read_only_refusal(what: str) -> UsageError:
    """What a store opened with ``read_only=True`` raises for ``what``, which writes."""
    return UsageError(
        f"{what} writes, and this store was opened read-only "
        "(open it without read_only=True to write)"
    )


def error_text(error: BaseException | str | None) -> str | None:
    """What a settling call stores of ``error``: its type and message."""
    if error is None or isinstance(error, str):
        return error
    if not isinstance(error, BaseException):
        raise InvalidArgument(f"error must be an exception, a str or None, got {brief(error)}")
    return f"{type(error).__name__}: {error}"


def error_trace(error: BaseException | str | None) -> str | None:
    """The stack trace a settling call stores with ``error``: the
    exception's formatted traceback, chained causes included (None for a
    message, or an exception never raised)."""
    if not isinstance(error, BaseException) or error.__traceback__ is None:
        return None
    return "".join(traceback.format_exception(error))


# -- enqueue ------------------------------------------------------------------------
# Two steps, so that an instrumentation can set the job's headers between
# them: ``new_job`` checks and resolves (the round trip's input), ``insert``
# is the plan.
new_job = resolve_enqueue


def insert(ctx: OpContext, job: NewJob, now_us: int) -> Plan[int]:
    """The plan inserting ``job`` (made by ``new_job`` at ``now_us``)."""
    if job.depends_on:
        return _first(dependencies.enqueue_dependent(
            ctx.dialect, [job], job.depends_on, job.on_dependency_failure, ctx.origin, now_us
        ))  # fmt: skip
    return queues.enqueue(ctx.dialect, job, ctx.origin, now_us)


def _first(plan: Plan[list[int]]) -> Plan[int]:
    return (yield from plan)[0]


def new_jobs(
    queue: str, defaults: QueueOptions, payloads: object, now_us: int, options: Mapping[str, Any]
) -> list[NewJob]:
    """``enqueue_batch``'s jobs: ``payloads`` must be an iterable of
    payloads (not a str, bytes or dict), the options checked once."""
    if isinstance(payloads, str | bytes | dict) or not isinstance(payloads, Iterable):
        raise InvalidArgument(f"payloads must be a list (or iterable) of payloads, got "
                              f"{brief(payloads)}")  # fmt: skip
    return resolve_enqueue_many(queue, payloads, now_us, defaults, **options)


def insert_many(ctx: OpContext, jobs: list[NewJob], now_us: int) -> Call[list[int]]:
    """The plan inserting ``jobs`` (non-empty, the same options each), and
    whether it is bulk."""
    first = jobs[0]
    if first.depends_on:
        plan = dependencies.enqueue_dependent(
            ctx.dialect, jobs, first.depends_on, first.on_dependency_failure, ctx.origin, now_us
        )
        return plan, len(jobs) > INLINE_MAX
    return queues.enqueue_many(ctx.dialect, jobs, ctx.origin, now_us), len(jobs) > INLINE_MAX


# -- unique enqueue -------------------------------------------------------------------
def check_unique_key(key: object) -> str:
    """A unique key: a non-empty str (``InvalidName`` otherwise)."""
    return check_identifier(key, "unique key")


def check_unique_for(unique_for: Duration | None) -> int | None:
    """``unique_for``: None, or a positive duration in microseconds."""
    if unique_for is None:
        return None
    return duration_us(unique_for, "unique_for", allow_zero=False)


def _no_dependencies(options: Mapping[str, Any]) -> None:
    # A unique key is held by a live job, checked as it goes in: a job
    # that waits outside the queue could not hold one. Refused, not ignored.
    for name in ("depends_on", "on_dependency_failure"):
        if options.get(name) is not None:
            raise InvalidArgument(
                f"the unique enqueues take no {name}: a job waiting for its dependencies "
                "holds no unique key (enqueue it with enqueue(..., depends_on=[...]))"
            )


def new_unique_job(
    queue: str,
    payload: codec.JSON,
    key: object,
    now_us: int,
    defaults: QueueOptions,
    options: Mapping[str, Any],
) -> tuple[NewJob, str]:
    """``enqueue_unique``'s job and checked key."""
    _no_dependencies(options)
    key = check_unique_key(key)
    return resolve_enqueue(queue, payload, now_us, defaults, **options), key


def new_unique_jobs(
    queue: str, defaults: QueueOptions, items: object, now_us: int, options: Mapping[str, Any]
) -> list[tuple[NewJob, str]]:
    """``enqueue_batch_unique``'s (job, key) pairs: ``items`` must be an
    iterable of (key, payload) pairs, the options checked once."""
    _no_dependencies(options)
    if isinstance(items, str | bytes | dict) or not isinstance(items, Iterable):
        raise InvalidArgument(f"items must be a list (or iterable) of (key, payload) pairs, "
                              f"got {brief(items)}")  # fmt: skip
    pairs: list[tuple[str, codec.JSON]] = []
    for item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InvalidArgument(f"each item must be a (key, payload) pair, got {brief(item)}")
        pairs.append((check_unique_key(item[0]), item[1]))
    jobs = resolve_enqueue_many(queue, (p for _, p in pairs), now_us, defaults, **options)
    return [(job, key) for job, (key, _) in zip(jobs, pairs, strict=True)]


def insert_unique(
    ctx: OpContext, job: NewJob, key: str, unique_for_us: int | None, now_us: int
) -> Plan[Enqueued]:
    """The plan inserting ``job`` unless ``key`` is taken (``new_unique_job``)."""
    return queues.enqueue_unique(ctx.dialect, job, key, unique_for_us, ctx.origin, now_us)


def insert_unique_many(
    ctx: OpContext, jobs: list[tuple[NewJob, str]], unique_for_us: int | None, now_us: int
) -> Call[list[Enqueued]]:
    """The plan inserting each (job, key) unless its key is taken, and whether it is bulk."""
    plan = queues.enqueue_unique_many(ctx.dialect, jobs, unique_for_us, ctx.origin, now_us)
    return plan, len(jobs) > INLINE_MAX


def set_limits(
    ctx: OpContext, queue: str, concurrency_per_key: object, rate: object, rate_per_key: object
) -> Plan[None]:
    """``queue``'s limits, replacing what it had: a positive int or None for
    the per-key concurrency, a ``Rate`` or None for each rate."""
    limit = None
    if concurrency_per_key is not None:
        limit = check_int(concurrency_per_key, "concurrency_per_key", lo=1, hi=2**31 - 1)
    for value, what in ((rate, "rate"), (rate_per_key, "rate_per_key")):
        if value is not None and not isinstance(value, Rate):
            raise InvalidArgument(f"{what} must be a Rate or None, got {brief(value)}")
    limits = QueueLimits(limit, cast("Rate | None", rate), cast("Rate | None", rate_per_key))
    return queues.set_limits(ctx.dialect, queue, limits)


def limits(ctx: OpContext, queue: str) -> Plan[QueueLimits]:
    """``queue``'s limits."""
    return queues.limits(ctx.dialect, queue)


def set_unique_policy(ctx: OpContext, queue: str, processing_blocks: object) -> Plan[None]:
    """Whether a processing job of ``queue`` keeps its unique key."""
    if not isinstance(processing_blocks, bool):
        raise InvalidArgument(f"processing_blocks must be a bool, got {brief(processing_blocks)}")
    return queues.set_unique_processing(ctx.dialect, queue, processing_blocks)


def queue_target(queue: object) -> tuple[str, QueueOptions]:
    """``tx.enqueue``'s ``queue``: a name (default options) or a queue handle."""
    if isinstance(queue, QueueHandle):
        return queue.name, queue._options
    return check_name(queue, "queue"), _DEFAULTS


def outbox_target(outbox: object) -> tuple[str, QueueOptions]:
    """``tx.outbox_enqueue``'s ``outbox``: a name (the outbox defaults) or a handle."""
    if isinstance(outbox, OutboxHandle):
        return outbox.queue.name, outbox.queue._options
    return outbox_queue_name(check_name(outbox, "outbox")), OUTBOX_OPTIONS


# -- queues: inspection and steering ---------------------------------------------------
def get_job(ctx: OpContext, queue: str | None, job_id: object) -> Plan[JobInfo | None]:
    """Job ``job_id`` of ``queue`` (``None``: of any queue)."""
    return queues.get_job(ctx.dialect, queue, queues.check_job_id(job_id))


def stats(ctx: OpContext, queue: str) -> Call[QueueStats]:
    return queues.stats(ctx.dialect, queue, ctx.now_us()), True  # counts grow with the queue


def summary(ctx: OpContext, queue: str) -> Call[QueueSummary]:
    return inspection.summarize_queue(ctx.dialect, queue, ctx.now_us()), True  # counts


def dead_letters(ctx: OpContext, queue: str, limit: object) -> Call[list[JobInfo]]:
    n = check_limit(limit)
    return queues.dead_letters(ctx.dialect, queue, n), n > INLINE_MAX


def list_jobs(
    ctx: OpContext, queue: str, state: object, limit: object, after: object
) -> Call[list[JobInfo]]:
    state = inspection.check_job_state(state)
    after = inspection.check_after(after)
    n = check_limit(limit)
    return inspection.list_jobs(ctx.dialect, queue, state, after, n, ctx.now_us()), n > INLINE_MAX


def throughput(ctx: OpContext, queue: str, window: Duration, bucket: Duration) -> Call[Throughput]:
    """``queue``'s finished and dead jobs per ``bucket`` over the ``window``
    ending now; bulk (it counts the rows of the window)."""
    window_us = duration_us(window, "window", allow_zero=False)
    bucket_us = duration_us(bucket, "bucket", allow_zero=False)
    plan = inspection.throughput(ctx.dialect, queue, ctx.now_us(), window_us, bucket_us)
    return plan, True


def cancel(ctx: OpContext, queue: str, job_id: object) -> Plan[bool]:
    job_id = queues.check_job_id(job_id)
    return queues.cancel(ctx.dialect, queue, job_id, ctx.origin, ctx.now_us())


def requeue_dead(ctx: OpContext, queue: str, job_id: object) -> Plan[bool]:
    job_id = queues.check_job_id(job_id)
    return queues.requeue_dead(ctx.dialect, queue, job_id, ctx.origin, ctx.now_us())


def purge_dead(
    ctx: OpContext, queue: str, before: datetime | None, ids: Sequence[int] | None
) -> Plan[int]:
    """Every dead job of ``queue``, those that died before ``before``, or
    those among ``ids``; bulk."""
    if ids is not None:
        if before is not None:
            raise InvalidArgument("give before or ids, not both")
        return queues.purge_dead_ids(ctx.dialect, queue, queues.check_job_ids(ids))
    before_us = None if before is None else instant_us(before, "before")
    return queues.purge_dead(ctx.dialect, queue, before_us)


def set_paused(ctx: OpContext, queue: str, paused: bool) -> Plan[None]:
    return queues.set_paused(ctx.dialect, queue, paused, ctx.origin, ctx.now_us())


def is_paused(ctx: OpContext, queue: str) -> Plan[bool]:
    return queues.is_paused(ctx.dialect, queue)


# -- streams ----------------------------------------------------------------------------
def publish(ctx: OpContext, stream: str, key: str | None, payload: codec.JSON) -> Plan[int]:
    """Append ``payload`` to ``stream`` (a checked name); ``key`` already checked."""
    text = codec.encode(payload)
    return streams.publish(ctx.dialect, stream, key, text, ctx.origin, ctx.now_us())


def publish_keyed(ctx: OpContext, stream: str, key: object, payload: codec.JSON) -> Plan[int]:
    """``publish`` with a key, which must be a non-empty str (``InvalidName``)."""
    return publish(ctx, stream, check_key(key), payload)


def read_since(
    ctx: OpContext, stream: str, offset: object, limit: object
) -> Call[list[StreamEvent]]:
    after, n = streams.check_offset(offset), check_limit(limit)
    return streams.read_since(ctx.dialect, stream, after, n), n > INLINE_MAX


def read_from_consumer(
    ctx: OpContext, stream: str, consumer: object, limit: object
) -> Call[list[StreamEvent]]:
    who = check_identifier(consumer, "consumer")
    n = check_limit(limit)
    return streams.read_from_consumer(ctx.dialect, stream, who, n), n > INLINE_MAX


def list_events(
    ctx: OpContext, stream: str, before: object, limit: object
) -> Call[list[StreamEvent]]:
    below, n = inspection.check_before(before), check_limit(limit)
    return inspection.list_events(ctx.dialect, stream, below, n), n > INLINE_MAX


def save_offset(ctx: OpContext, stream: str, consumer: object, offset: object) -> Plan[None]:
    who = check_identifier(consumer, "consumer")
    at = streams.check_offset(offset)
    return streams.save_offset(ctx.dialect, stream, who, at)


def get_offset(ctx: OpContext, stream: str, consumer: object) -> Plan[int]:
    return streams.get_offset(ctx.dialect, stream, check_identifier(consumer, "consumer"))


def head_offset(ctx: OpContext, stream: str) -> Plan[int]:
    return streams.head_offset(ctx.dialect, stream)


def stream_info(ctx: OpContext, stream: str) -> Call[StreamInfo]:
    return inspection.stream_summary(ctx.dialect, stream), True  # counts the events


# -- wakes ------------------------------------------------------------------------------
def check_notify_payload(dialect: Dialect, payload: codec.JSON) -> None:
    """A notify payload must encode, and fit the engine's limit (Postgres:
    ``PayloadTooLarge`` past 8000 bytes), though it is never delivered."""
    text = codec.encode(payload)
    limit = dialect.notify_payload_limit
    if limit is not None:
        size = len(text.encode("utf-8"))
        if size > limit:
            raise PayloadTooLarge(limit, size)


def notify(ctx: OpContext, channel: object, payload: codec.JSON) -> Plan[None]:
    """Wake listeners of ``channel`` once the transaction commits."""
    name = check_name(channel, "channel")
    check_notify_payload(ctx.dialect, payload)
    return wake_plans.notify(ctx.dialect, name, ctx.origin, ctx.now_us())


# -- a caller's own SQL -------------------------------------------------------------------
def check_sql(sql: object, params: object) -> tuple[str, Sequence[Any] | dict[str, Any]]:
    """``tx.execute``'s arguments: SQL text, and a sequence or dict of params."""
    if not isinstance(sql, str):
        raise InvalidArgument(f"sql must be a str, got {brief(sql)}")
    if isinstance(params, str | bytes) or not isinstance(params, Sequence | dict):
        raise InvalidArgument(f"params must be a sequence or a dict, got {brief(params)}")
    return sql, params


# -- results ---------------------------------------------------------------------------
# How often a caller awaiting a result looks again with no wake (a wake lost
# to a dropped listening connection, say): wakes do the real work.
RESULT_BACKSTOP_S = 5.0


def finished_value(job_id: int, end: dependencies.JobEnd, as_type: type[T] | None) -> Any:
    """What ``Queue.result`` gives for a job that finished: its result
    (decoded; into ``as_type`` when given), None for one that kept no
    record, or the error its end calls for."""
    if end.where == "acked":
        value = None if end.result is None else codec.decode(end.result)
        return value if as_type is None or value is None else codec.convert(value, as_type)
    if end.where == "gone":
        return None
    if end.where == "cancelled":
        raise JobCancelled(job_id, end.reason)
    if end.where == "dead":
        raise JobFailed(job_id, end.reason or "failed", end.error)
    raise InvalidArgument(f"no job has id {job_id}")


def check_result_queue(job_id: int, end: dependencies.JobEnd, queue: str) -> None:
    """``Queue.result`` reads its own queue's jobs."""
    if end.queue is not None and end.queue != queue:
        raise InvalidArgument(f"job {job_id} is a job of queue {end.queue!r}, not of {queue!r}")


# -- retention -------------------------------------------------------------------------
class Unchanged(enum.Enum):
    """A setting left as it is (``Queue.set_retention``'s default)."""

    UNCHANGED = "unchanged"


UNCHANGED = Unchanged.UNCHANGED


def retention_changes(**given: Duration | Unchanged | None) -> dict[str, int | None]:
    """The retentions given (each a positive duration, or None), in microseconds."""
    return {
        what: None if value is None else duration_us(value, what, allow_zero=False)
        for what, value in given.items()
        if value is not UNCHANGED
    }
