"""Value types of the contract. Plain data: no IO, no handles."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, NamedTuple, TypedDict, TypeVar, Unpack

from . import codec
from .attempts import Attempt
from .backoff import Backoff
from .errors import InvalidArgument
from .ints import check_int
from .names import check_identifier
from .results import OnDependencyFailure, check_dependencies, on_failure_code
from .timeconv import (
    Duration,
    check_instant_us,
    duration_us,
    instant_us,
    maybe_datetime,
    to_datetime,
)

T = TypeVar("T")

JobState = Literal["pending", "processing", "waiting", "dead", "acked", "cancelled"]
DeadReason = Literal["failed", "max_attempts", "expired", "claim_expired"]


@dataclass(frozen=True, slots=True)
class Wake:
    """A hint that something happened on ``channel``. Carries nothing else."""

    channel: str


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of a stream: its ``offset`` (dense, from 1), ``stream``, ``key`` (or ``None``),
    JSON ``payload`` and ``created_at`` (UTC)."""
    offset: int
    stream: str
    key: str | None
    payload: codec.JSON
    created_at: datetime

    def payload_as(self, target: type[T]) -> T:
        """The payload decoded into ``target`` (a dataclass, attrs class, ``msgspec.Struct``,
        ``NamedTuple``, ``TypedDict``, pydantic model, or any type msgspec converts into: enums,
        ``Literal``, datetimes, tuples, unions...); a typed payload reads back equal to what was
        enqueued. Raises ``CodecError`` naming the field on a mismatch."""
        return codec.convert(self.payload, target)


class JobRecord(NamedTuple):
    """A claimed job as the core sees it; the API wraps it in a ``Job`` handle.

    A named tuple, not a frozen dataclass: a worker makes one per job it
    claims, and a tuple is built several times faster."""

    id: int
    queue: str
    payload: codec.JSON
    priority: int
    attempts: int
    max_attempts: int
    run_at_us: int
    created_at_us: int
    expires_at_us: int | None
    claimed_by: str
    claim_expires_at_us: int
    # Which claim of this job the handle holds: the ownership token.
    claims: int
    # The job's metadata as stored (``protocol.headers``): JSON text or None.
    headers: str | None = None
    # How long the job's queue kept finished jobs when it was claimed
    # (microseconds; None: not kept): its ack moves it to history or deletes it.
    history_us: int | None = None
    # Kept when claimed (dependencies, dependents, an awaiter): its ack
    # records it and settles its dependents (it may become kept later too:
    # the ack finds that out itself).
    kept: bool = False


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's state for inspection (``get_job``, ``dead_letters``, ``list_jobs``).

    ``state`` is ``pending`` or ``processing`` for a live job, ``waiting``
    for one whose dependencies have not all finished, ``dead`` for a dead
    letter (``dead_reason``, ``died_at``), and ``acked`` or ``cancelled``
    for a finished job kept in its queue's history (``finished_at``;
    ``claimed_by`` is the worker that acked it; ``result``, what its handler
    returned; ``last_error`` says why a job a failed dependency cancelled was).

    ``dependencies`` and ``dependents``: the ids of the jobs it waits (or
    waited) for and of those waiting for it; ``workflow_id`` and ``step``:
    the workflow it is a step of. ``attempt_history``: its attempts that
    ended without an ack, and its deaths, oldest first (the last 20, each
    with its worker, times, error and stack trace; docs/queues.md,
    "Attempts"). ``get_job`` fills them; the pages of ``list_jobs`` leave
    them empty.

    ``unique_key``: the key it was enqueued with by ``enqueue_unique`` (a
    processing job that gave its key up still shows it), kept in history;
    ``concurrency_key``: the key its queue's per-key limit counts it under,
    for a live job only. A dead letter keeps neither (both None), nor does
    ``requeue_dead`` bring them back."""

    id: int
    queue: str
    state: JobState
    payload: codec.JSON
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    expires_at: datetime | None
    claimed_by: str | None
    claim_expires_at: datetime | None
    last_error: str | None
    dead_reason: DeadReason | None = None
    died_at: datetime | None = None
    finished_at: datetime | None = None
    unique_key: str | None = None
    concurrency_key: str | None = None
    result: codec.JSON = None
    dependencies: tuple[int, ...] = ()
    dependents: tuple[int, ...] = ()
    workflow_id: int | None = None
    step: str | None = None
    attempt_history: tuple[Attempt, ...] = ()

    def payload_as(self, target: type[T]) -> T:
        """The payload decoded into ``target`` (a dataclass, attrs class, ``msgspec.Struct``,
        ``NamedTuple``, ``TypedDict``, pydantic model, or any type msgspec converts into: enums,
        ``Literal``, datetimes, tuples, unions...); a typed payload reads back equal to what was
        enqueued. Raises ``CodecError`` naming the field on a mismatch."""
        return codec.convert(self.payload, target)


# The longest period a rate may have: the claim log keeps each claim for a
# period, so a longer one is a quota, not a rate (and grows the log).
MAX_RATE_PERIOD = timedelta(days=31)


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` claims in any window of length ``per`` (a sliding
    window: a claim is allowed when fewer than ``limit`` were made in the
    ``per`` before it). ``per`` is seconds or a timedelta, kept as a
    timedelta. Raises ``InvalidArgument`` for a limit that is not a
    positive int or a period that is not positive and at most 31 days."""

    limit: int
    per: timedelta

    def __init__(self, limit: int, per: Duration) -> None:
        limit = check_int(limit, "rate limit", lo=1, hi=2**31 - 1)
        us = duration_us(per, "rate period", allow_zero=False)
        if us > MAX_RATE_PERIOD // timedelta(microseconds=1):
            raise InvalidArgument(f"rate period must be at most 31 days, got {per!r}")
        object.__setattr__(self, "limit", limit)
        object.__setattr__(self, "per", timedelta(microseconds=us))

    @property
    def period_us(self) -> int:
        """``per`` in whole microseconds (how the database stores it)."""
        return self.per // timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class QueueLimits:
    """A queue's limits, enforced inside each claim's transaction (None: none).

    ``concurrency_per_key``: at most N jobs of one concurrency key hold a
    live claim at once. ``rate``: at most ``rate.limit`` claims of the queue
    in any window of ``rate.per``. ``rate_per_key``: the same, counted per
    concurrency key (jobs without a key are counted by ``rate`` only)."""

    concurrency_per_key: int | None = None
    rate: Rate | None = None
    rate_per_key: Rate | None = None

    def describe(self) -> str:
        """The limits in a few words, as the CLI and the dashboard show them:
        ``2 per key, 10/1s, 1/60s per key`` (empty: none)."""
        shown = []
        if self.concurrency_per_key is not None:
            shown.append(f"{self.concurrency_per_key} per key")
        for rate, suffix in ((self.rate, ""), (self.rate_per_key, " per key")):
            if rate is not None:
                shown.append(f"{rate.limit}/{rate.per.total_seconds():g}s{suffix}")
        return ", ".join(shown)

    @property
    def any(self) -> bool:
        """Whether any limit is set (a queue with none claims on the plain path)."""
        return (
            self.concurrency_per_key is not None
            or self.rate is not None
            or self.rate_per_key is not None
        )


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's counts: ``ready`` (pending and due), ``scheduled`` (pending, due later),
    ``processing`` (claimed, expired claims not yet reclaimed included) and ``dead``;
    and whether it is ``paused`` (its ready jobs wait for ``resume``)."""
    ready: int  # pending and due now
    scheduled: int  # pending, due later
    processing: int  # claimed (including claims that have expired but not been reclaimed)
    dead: int
    paused: bool = False
    # Waiting for dependencies that have not all finished (not claimable).
    waiting: int = 0


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """One queue as ``Store.list_queues`` sees it: its counts (as
    ``QueueStats``), the ``run_at`` of its oldest ready job, whether it is
    paused, how many finished jobs its history keeps, its retention
    settings (``history_retention`` None: no history is kept;
    ``dead_retention`` None: dead letters stay until purged), and its
    flow-control settings: ``limits`` (``Queue.set_limits``: per-key
    concurrency, rate, per-key rate) and ``unique_processing_blocks``
    (``Queue.set_unique_policy``; True, the default: a processing job keeps
    its unique key).

    An outbox's queue is listed under its internal name
    (``__alkstore_outbox:NAME``) with ``outbox`` set to ``NAME``; for an
    ordinary queue ``outbox`` is None."""

    name: str
    ready: int
    scheduled: int
    processing: int
    dead: int
    oldest_ready_at: datetime | None
    paused: bool
    history: int
    history_retention: timedelta | None
    dead_retention: timedelta | None
    outbox: str | None = None
    limits: QueueLimits = QueueLimits()
    unique_processing_blocks: bool = True
    waiting: int = 0


@dataclass(frozen=True, slots=True)
class Throughput:
    """What a queue finished over recent minutes, as ``Queue.throughput``
    reads it: ``buckets`` consecutive windows of ``bucket`` each, the first
    starting just after ``since`` and the last ending at ``until`` (now,
    included). ``finished[i]``
    counts the jobs of window ``i`` kept in the queue's history (acked or
    cancelled: only while the queue keeps history), ``dead[i]`` the dead
    letters that died in it and are still dead letters."""

    queue: str
    since: datetime
    until: datetime
    bucket: timedelta
    finished: tuple[int, ...]
    dead: tuple[int, ...]

    @property
    def buckets(self) -> int:
        """How many windows there are (the length of ``finished`` and ``dead``)."""
        return len(self.finished)


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    """A stream consumer's saved ``offset`` and its ``lag`` behind the
    stream's head (never below 0); ``protected``: retention never drops
    events this consumer has not saved past."""

    name: str
    offset: int
    lag: int
    protected: bool


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One stream as ``Store.list_streams`` / ``Stream.info`` see it: the
    last offset given out (``head_offset``), how many events it holds, its
    oldest event, its retention settings (None: no limit) and its consumers,
    sorted by name."""

    name: str
    head_offset: int
    events: int
    oldest_offset: int | None
    oldest_event_at: datetime | None
    max_age: timedelta | None
    max_events: int | None
    consumers: tuple[ConsumerInfo, ...]


@dataclass(frozen=True, slots=True)
class LockInfo:
    """One lock's row: its last ``owner`` (None once released), fencing
    ``token``, when its TTL ends (None once released) and whether it is
    ``held`` now, by the lock rules at the store's clock."""

    name: str
    owner: str | None
    token: int
    expires_at: datetime | None
    held: bool


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """One registered schedule: what it enqueues where, its job options,
    its next fire time, the fire time it last fired for (None: never),
    whether it is paused, when it was first registered, its time zone and
    its catch-up policy."""

    name: str
    queue: str
    expression: str
    payload: codec.JSON
    priority: int
    max_attempts: int | None
    expires_after: timedelta | None
    next_fire_at: datetime
    last_fire_at: datetime | None
    paused: bool
    created_at: datetime
    # The IANA time zone its cron expression is read in ("UTC" for @every).
    tz: str = "UTC"
    # Which missed fire times get a job: "latest", "all" (at most
    # catch_up_max per tick) or "skip" (none later than catch_up_grace).
    catch_up: str = "latest"
    catch_up_max: int | None = None
    catch_up_grace: timedelta | None = None

    def payload_as(self, target: type[T]) -> T:
        """The payload decoded into ``target`` (a dataclass, attrs class, ``msgspec.Struct``,
        ``NamedTuple``, ``TypedDict``, pydantic model, or any type msgspec converts into: enums,
        ``Literal``, datetimes, tuples, unions...); a typed payload reads back equal to what was
        enqueued. Raises ``CodecError`` naming the field on a mismatch."""
        return codec.convert(self.payload, target)


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What one ``Queue.work`` call did, returned when a ``Drain`` ends it.

    ``started``: handlers started. Then, by how each job left the worker:
    ``acked`` (by the worker when its handler returned, or by the handler
    itself), ``retried`` (pending again after a backoff), ``dead`` (to the
    dead letters: out of attempts, or ``job.fail``), ``handed_back``
    (released unfinished, due at once, attempt refunded: claimed ahead and
    never started, or cancelled), ``lost`` (its claim lapsed or was taken
    away before it was settled; someone else runs it), ``cancelled_by_request``
    (cancelled by ``Queue.cancel`` while this worker held it: its handler was
    cancelled, it was dropped before it started, or its ack was refused as
    its handler finished). ``cancelled``: of the handed-back jobs, those
    whose handler was still running when the drain's deadline passed (or
    ``Drain.now()`` was called) and was cancelled. A settlement whose round
    trip got no answer is in no count."""

    queue: str
    worker_id: str
    started: int = 0
    acked: int = 0
    retried: int = 0
    dead: int = 0
    handed_back: int = 0
    lost: int = 0
    cancelled: int = 0
    cancelled_by_request: int = 0


@dataclass(frozen=True, slots=True)
class LockRecord:
    name: str
    owner: str
    token: int
    expires_at_us: int


@dataclass(frozen=True, slots=True)
class QueueOptions:
    """Per-handle queue settings (no IO; validated once at ``store.queue``)."""

    visibility_timeout_us: int = 300_000_000
    max_attempts: int = 3
    backoff: Backoff = field(default_factory=Backoff)

    @classmethod
    def of(
        cls,
        visibility_timeout: Duration = 300.0,
        max_attempts: int = 3,
        backoff: Backoff | None = None,
    ) -> QueueOptions:
        vt = duration_us(visibility_timeout, "visibility_timeout", allow_zero=False)
        if backoff is not None and not isinstance(backoff, Backoff):
            raise InvalidArgument(f"backoff must be a Backoff, not {type(backoff).__name__}")
        return cls(vt, check_max_attempts(max_attempts), backoff or Backoff())


# An outbox delivers to the outside world: shorter claims, more attempts.
OUTBOX_OPTIONS = QueueOptions(visibility_timeout_us=60_000_000, max_attempts=5)


def check_max_attempts(value: object) -> int:
    return check_int(value, "max_attempts", lo=1)


def check_priority(value: object) -> int:
    return check_int(value, "priority", lo=-(2**31), hi=2**31 - 1)


class NewJob(NamedTuple):
    """A job about to be inserted: every time already resolved against ``now``.
    (A named tuple: batches make one per job.)"""

    queue: str
    payload_json: str
    priority: int
    run_at_us: int
    max_attempts: int
    expires_at_us: int | None
    # Metadata kept beside the payload (``protocol.headers``): JSON text or None.
    headers: str | None = None
    # The key its queue's per-key concurrency limit counts it under (None: unlimited).
    concurrency_key: str | None = None
    # The jobs it waits for (none: it may run at once) and what a failed one
    # does to it (``results.ON_FAILURE_CANCEL`` or ``ON_FAILURE_RUN``).
    depends_on: tuple[int, ...] = ()
    on_dependency_failure: int = 0


class Enqueued(NamedTuple):
    """What a unique enqueue (``Queue.enqueue_unique``) did: ``id`` is the
    new job's, or, when ``duplicate``, the id of the job that holds the key
    (a live job, or an acked one still within its ``unique_for``); nothing
    was inserted then. A tuple: ``job_id, duplicate = await ...`` unpacks it."""

    id: int
    duplicate: bool


class NewSchedule(NamedTuple):
    """A schedule about to be stored (created, or updated in place): its
    fields in the order the engines' upsert binds them."""

    name: str
    queue: str
    expression: str
    payload_json: str
    options_json: str
    next_fire_us: int
    now_us: int
    tz: str = "UTC"
    catch_up: str = "latest"
    catch_up_max: int | None = None
    catch_up_grace_us: int | None = None


class EnqueueOptions(TypedDict, total=False):
    """The options every enqueue takes (``Queue.enqueue``, ``enqueue_batch``,
    ``Transaction.enqueue``, ``outbox_enqueue``, ``Outbox.enqueue``), each
    optional: ``delay`` or ``run_at`` (when it may first run), ``priority``
    (higher first, default 0), ``max_attempts`` (default: the queue's),
    ``expires`` (a deadline for its first claim, or a duration from now),
    ``concurrency_key`` (the key its queue's per-key concurrency limit
    counts it under: ``Queue.set_limits``; None, the default: not limited),
    ``depends_on`` (job ids of this store, of any queue, that must all
    finish before it may run: it waits meanwhile; docs/workflows.md) and
    ``on_dependency_failure`` (``"cancel"``, the default: a dependency that
    dies or is cancelled cancels it; ``"run"``: it runs anyway)."""

    delay: Duration | None
    run_at: datetime | None
    priority: int
    max_attempts: int | None
    expires: datetime | Duration | None
    concurrency_key: str | None
    depends_on: Iterable[int] | None
    on_dependency_failure: OnDependencyFailure


_ENQUEUE_OPTIONS = frozenset(EnqueueOptions.__optional_keys__)


def resolve_enqueue(
    queue: str,
    payload: codec.JSON,
    now_us: int,
    defaults: QueueOptions,
    **options: Unpack[EnqueueOptions],
) -> NewJob:
    """Validate enqueue options and encode the payload before any round trip.

    ``expires`` is an absolute deadline; a duration is taken relative to now.
    """
    if not options:
        # The defaults (the usual call): due now, the queue's attempts.
        return NewJob(queue, codec.encode(payload), 0, now_us, defaults.max_attempts, None, None,
                      None)  # fmt: skip
    unknown = options.keys() - _ENQUEUE_OPTIONS
    if unknown:
        # What Python says of an unknown keyword, as when these were named
        # parameters.
        raise TypeError(f"unexpected enqueue option {min(unknown)!r}")
    delay = options.get("delay")
    run_at = options.get("run_at")
    priority = options.get("priority", 0)
    max_attempts = options.get("max_attempts")
    expires = options.get("expires")
    if delay is not None and run_at is not None:
        raise InvalidArgument("give delay or run_at, not both")
    at = now_us
    if delay is not None:
        at = now_us + duration_us(delay, "delay")
    elif run_at is not None:
        at = instant_us(run_at, "run_at")
    expires_us: int | None = None
    if isinstance(expires, datetime):
        expires_us = instant_us(expires, "expires")
    elif expires is not None:
        expires_us = now_us + duration_us(expires, "expires")
    check_instant_us(at, "run_at")
    if expires_us is not None:
        check_instant_us(expires_us, "expires")
    attempts = defaults.max_attempts if max_attempts is None else check_max_attempts(max_attempts)
    key = options.get("concurrency_key")
    if key is not None:
        key = check_identifier(key, "concurrency_key")
    depends_on = options.get("depends_on")
    deps = () if depends_on is None else check_dependencies(depends_on)
    policy = on_failure_code(options.get("on_dependency_failure", "cancel"))
    return NewJob(queue, codec.encode(payload), check_priority(priority), at, attempts, expires_us,
                  None, key, deps, policy)  # fmt: skip


def resolve_enqueue_many(
    queue: str,
    payloads: Iterable[codec.JSON],
    now_us: int,
    defaults: QueueOptions,
    **options: Unpack[EnqueueOptions],
) -> list[NewJob]:
    """``resolve_enqueue`` for many payloads with the same options: the
    options are checked once, each payload encoded."""
    first = resolve_enqueue(queue, None, now_us, defaults, **options)
    encode = codec.encode
    return [
        NewJob(queue, encode(p), first.priority, first.run_at_us, first.max_attempts,
               first.expires_at_us, None, first.concurrency_key, first.depends_on,
               first.on_dependency_failure)
        for p in payloads
    ]  # fmt: skip


__all__ = [
    "ConsumerInfo",
    "DeadReason",
    "EnqueueOptions",
    "Enqueued",
    "JobInfo",
    "JobRecord",
    "JobState",
    "LockInfo",
    "LockRecord",
    "NewJob",
    "NewSchedule",
    "QueueOptions",
    "QueueStats",
    "QueueSummary",
    "ScheduleInfo",
    "StreamEvent",
    "StreamInfo",
    "Wake",
    "maybe_datetime",
    "resolve_enqueue",
    "resolve_enqueue_many",
    "to_datetime",
]
