"""``Queue`` and ``Job``: at-least-once job queues."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from ..protocol.plans import claim, queues
from ..protocol.values import codec
from ..protocol.values.errors import InvalidArgument, brief
from ..protocol.values.ints import check_bool
from ..protocol.values.names import check_identifier
from ..protocol.values.timeconv import Duration, duration_us, to_datetime
from ..protocol.values.types import (
    Enqueued,
    EnqueueOptions,
    JobInfo,
    JobRecord,
    NewJob,
    QueueLimits,
    QueueOptions,
    QueueStats,
    QueueSummary,
    Rate,
    Throughput,
    WorkerReport,
)
from . import ops
from .ops import INLINE_MAX

if TYPE_CHECKING:
    from .drain import Drain
    from .store import Store

T = TypeVar("T")


log = logging.getLogger("alkstore.queue")


async def run_unique(
    store: Store,
    run: Callable[[Any], Awaitable[Any]],
    job: NewJob,
    key: str,
    unique_for_us: int | None,
    now: int,
) -> Enqueued:
    """Run a unique enqueue with ``run`` (a store's or a transaction's),
    through the instrumentation's enqueue hook when there is one (it sets
    the job's headers; the hook sees the id, new or not)."""
    if store._telemetry is None:
        return await run(ops.insert_unique(store, job, key, unique_for_us, now))  # type: ignore[no-any-return]
    done: list[Enqueued] = []

    async def insert(j: NewJob) -> int:
        result: Enqueued = await run(ops.insert_unique(store, j, key, unique_for_us, now))
        done.append(result)
        return result.id

    await store._telemetry.enqueue(job, insert)
    return done[0]


def log_buried(queue: str, buried: Sequence[tuple[int, str]]) -> None:
    """Jobs the sweep moved to the dead letters: someone must look at them."""
    reasons = Counter(reason for _, reason in buried)
    shown = ", ".join(str(job_id) for job_id, _ in buried[:10])
    more = f" and {len(buried) - 10} more" if len(buried) > 10 else ""
    log.error(
        "%d job(s) of queue %s moved to dead letters by the sweep (%s): %s%s",
        len(buried), queue, ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items())),
        shown, more,
    )  # fmt: skip


def error_text(error: BaseException | str | None) -> str | None:
    if error is None or isinstance(error, str):
        return error
    if not isinstance(error, BaseException):
        raise InvalidArgument(f"error must be an exception, a str or None, got {brief(error)}")
    return f"{type(error).__name__}: {error}"


class Job:
    """A claimed job. Settle it once: ``ack``, ``retry`` or ``fail``.

    Each settling call returns ``False`` (and changes nothing) when this worker
    no longer owns the job: its claim expired, or it was reclaimed, acked or
    cancelled meanwhile.
    """

    __slots__ = ("_queue", "_record")

    def __init__(self, queue: Queue, record: JobRecord) -> None:
        self._queue = queue
        self._record = record

    def __repr__(self) -> str:
        r = self._record
        return f"Job(id={r.id}, queue={r.queue!r}, attempts={r.attempts}/{r.max_attempts})"

    @property
    def id(self) -> int:
        """The job's id, unique in its database."""
        return self._record.id

    @property
    def store(self) -> Store:
        """The store the job was claimed from: a handler's way back to the
        database (its own SQL in ``store.transaction()``, follow-up jobs,
        publishes), also when ``alkstore worker`` opened the store."""
        return self._queue._store

    @property
    def queue(self) -> str:
        """The name of the job's queue."""
        return self._record.queue

    @property
    def payload(self) -> codec.JSON:
        """The job's JSON payload, as enqueued."""
        return self._record.payload

    def payload_as(self, target: type[T]) -> T:
        """The payload decoded into ``target`` (a dataclass, attrs class, ``msgspec.Struct``,
        ``NamedTuple``, ``TypedDict``, pydantic model, or any type msgspec converts into: enums,
        ``Literal``, datetimes, tuples, unions...); a typed payload reads back equal to what was
        enqueued. Raises ``CodecError`` naming the field on a mismatch."""
        return codec.convert(self._record.payload, target)

    @property
    def priority(self) -> int:
        """The job's priority: higher is claimed first."""
        return self._record.priority

    @property
    def attempts(self) -> int:
        """Attempts so far, this one included."""
        return self._record.attempts

    @property
    def max_attempts(self) -> int:
        """Attempts allowed before a retry sends the job to the dead letters."""
        return self._record.max_attempts

    @property
    def worker_id(self) -> str:
        """The worker id this job is claimed by."""
        return self._record.claimed_by

    @property
    def run_at(self) -> datetime:
        """When the job became (or becomes) claimable, in UTC."""
        return to_datetime(self._record.run_at_us)

    @property
    def created_at(self) -> datetime:
        """When the job was enqueued, in UTC."""
        return to_datetime(self._record.created_at_us)

    @property
    def expires_at(self) -> datetime | None:
        """The deadline for its first claim (``expires``), or ``None``."""
        us = self._record.expires_at_us
        return None if us is None else to_datetime(us)

    @property
    def claim_expires_at(self) -> datetime:
        """When this claim lapses unless renewed (``heartbeat``); another worker may then claim the
        job."""
        return to_datetime(self._record.claim_expires_at_us)

    async def ack(self) -> bool:
        """Done: delete the job (into history, outcome ``acked``, when its queue kept history as
        it was claimed). ``False`` (nothing changed) when this claim no longer owns it."""
        store = self._queue._store
        run = store._run(claim.ack(store._dialect, self._record, store._now_us()))
        if store._telemetry is not None:
            return await store._telemetry.settle("ack", self, run)
        return await run

    async def retry(
        self, delay: Duration | None = None, error: BaseException | str | None = None
    ) -> bool:
        """Back to pending after ``delay`` (default: the queue's backoff);
        to dead instead when no attempts are left."""
        store = self._queue._store
        delay_us = None if delay is None else duration_us(delay, "delay")
        error = error_text(error)
        plan = claim.retry(
            store._dialect,
            self._record,
            store._now_us(),
            delay_us=delay_us,
            backoff=self._queue._options.backoff,
            draw=store._draw(),
            error=error,
        )
        if store._telemetry is not None:
            return await store._telemetry.settle("retry", self, store._run(plan))
        return await store._run(plan)

    async def fail(self, error: BaseException | str | None = None) -> bool:
        """Straight to the dead letters, keeping ``error``."""
        store = self._queue._store
        plan = claim.fail(store._dialect, self._record, store._now_us(), error_text(error))
        if store._telemetry is not None:
            return await store._telemetry.settle("fail", self, store._run(plan))
        return await store._run(plan)

    async def heartbeat(self, extend: Duration | None = None) -> bool:
        """Push the claim's expiry to now + ``extend`` (default: the visibility timeout)."""
        store = self._queue._store
        extend_us = (
            self._queue._options.visibility_timeout_us
            if extend is None
            else duration_us(extend, "extend", allow_zero=False)
        )
        now = store._now_us()
        ok = await store._run(claim.heartbeat(store._dialect, self._record, now, extend_us))
        if ok:
            self._set_claim_expiry(now + extend_us)
        return ok

    def _set_claim_expiry(self, until_us: int) -> None:
        self._record = self._record._replace(claim_expires_at_us=until_us)

    async def release(self, *, refund: bool = True) -> bool:
        """Hand the job back, due now (for shutdown); ``refund`` returns the attempt."""
        store = self._queue._store
        refund = check_bool(refund, "refund")
        plan = claim.release(store._dialect, self._record, store._now_us(), refund=refund)
        if store._telemetry is not None:
            return await store._telemetry.settle("release", self, store._run(plan))
        return await store._run(plan)


class Queue(ops.QueueHandle):
    """A named queue. Creating the handle does no IO."""

    def __init__(self, store: Store, name: str, options: QueueOptions) -> None:
        self._store = store
        self.name = name
        self._options = options

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    async def enqueue(self, payload: codec.JSON, **options: Unpack[EnqueueOptions]) -> int:
        """Add a job; returns its id. ``payload`` is a JSON value or one
        typed object (dataclass, attrs class, ``msgspec.Struct``,
        ``NamedTuple``, pydantic model) that reads back equal with
        ``payload_as`` (else ``CodecError``). Options (``EnqueueOptions``):
        ``delay`` or ``run_at``, ``priority``, ``max_attempts``, ``expires``
        (a deadline for the first claim)."""
        store = self._store
        now = store._now_us()
        job = ops.new_job(self.name, payload, now, self._options, **options)
        if store._telemetry is not None:
            return await store._telemetry.enqueue(
                job, lambda j: store._run(ops.insert(store, j, now))
            )
        return await store._run(ops.insert(store, job, now))

    async def enqueue_batch(
        self, payloads: Iterable[codec.JSON], **options: Unpack[EnqueueOptions]
    ) -> list[int]:
        """Add many jobs with the same options in one transaction."""
        store = self._store
        now = store._now_us()
        jobs = ops.new_jobs(self.name, self._options, payloads, now, options)
        if not jobs:
            return []
        if store._telemetry is not None:
            return await store._telemetry.enqueue_many(
                self.name, jobs, lambda js: store._run(*ops.insert_many(store, js, now))
            )
        return await store._run(*ops.insert_many(store, jobs, now))

    async def enqueue_unique(
        self,
        payload: codec.JSON,
        key: str,
        *,
        unique_for: Duration | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """Add a job holding unique ``key``, unless a live job of this queue
        (pending, scheduled, or processing: see ``set_unique_policy``) holds
        it; then nothing is inserted and that job's id comes back with
        ``duplicate=True``. ``unique_for``: the key stays taken that long
        after its job was acked (the queue must keep history at least that
        long, else ``InvalidArgument``). Takes ``enqueue``'s options."""
        store = self._store
        now = store._now_us()
        for_us = ops.check_unique_for(unique_for)
        job, key = ops.new_unique_job(self.name, payload, key, now, self._options, options)
        return await run_unique(store, store._run, job, key, for_us, now)

    async def enqueue_batch_unique(
        self,
        items: Iterable[tuple[str, codec.JSON]],
        *,
        unique_for: Duration | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[Enqueued]:
        """``enqueue_unique`` for each (key, payload) pair, in one transaction,
        with the same options; one result per pair, in order. A key given
        twice goes in once: its later pairs are duplicates of the first."""
        store = self._store
        now = store._now_us()
        for_us = ops.check_unique_for(unique_for)
        jobs = ops.new_unique_jobs(self.name, self._options, items, now, options)
        if not jobs:
            return []
        if store._telemetry is None:
            return await store._run(*ops.insert_unique_many(store, jobs, for_us, now))
        keys = [key for _, key in jobs]
        done: list[list[Enqueued]] = []

        async def insert(js: list[NewJob]) -> list[int]:
            pairs = list(zip(js, keys, strict=True))
            results = await store._run(*ops.insert_unique_many(store, pairs, for_us, now))
            done.append(results)
            return [r.id for r in results]

        await store._telemetry.enqueue_many(self.name, [job for job, _ in jobs], insert)
        return done[0]

    async def set_limits(
        self,
        *,
        concurrency_per_key: int | None = None,
        rate: Rate | None = None,
        rate_per_key: Rate | None = None,
    ) -> None:
        """Set this queue's limits, replacing the ones it had (a limit not
        given is lifted; ``set_limits()`` lifts them all). Stored with the
        queue, enforced inside each claim's transaction, for every worker
        and process.

        ``concurrency_per_key``: at most N jobs with the same
        ``concurrency_key`` (an enqueue option) processing at once.
        ``rate``: at most ``rate.limit`` claims of the queue in any window
        of ``rate.per`` (``Rate(10, per=1.0)``: ten a second).
        ``rate_per_key``: the same per concurrency key (jobs without a key
        count against ``rate`` only).

        Claims take jobs in claim order among those whose key has room: a
        job whose key is full or over its rate is passed over, and is its
        key's first taken once it has room. Raises ``InvalidArgument`` for
        a limit that is not a positive int or a rate that is not a ``Rate``."""
        await self._store._run(
            ops.set_limits(self._store, self.name, concurrency_per_key, rate, rate_per_key)
        )

    async def limits(self) -> QueueLimits:
        """This queue's limits (each None when not set)."""
        return await self._store._run(ops.limits(self._store, self.name))

    async def set_unique_policy(self, *, processing_blocks: bool) -> None:
        """Whether a processing job of this queue keeps its unique key, for
        every process (stored with the queue). ``True`` (the default): a
        key is held from enqueue until its job is acked, cancelled or dead.
        ``False``: an ``enqueue_unique`` of a key whose job is processing
        takes the key over and inserts a new job; the running job goes on
        without a key (a retry of it then runs keyless)."""
        await self._store._run(ops.set_unique_policy(self._store, self.name, processing_blocks))

    async def claim_one(self, worker_id: str) -> Job | None:
        """Claim the next claimable job for ``worker_id``, or ``None`` when there is none."""
        jobs = await self.claim_batch(worker_id, 1)
        return jobs[0] if jobs else None

    async def claim_batch(self, worker_id: str, n: int) -> list[Job]:
        """Claim up to ``n`` claimable jobs for ``worker_id`` in one transaction
        (highest priority first, then earliest due, then id); each claim lasts
        the visibility timeout."""
        worker_id = check_identifier(worker_id, "worker id")
        n = queues.check_limit(n, "n")
        store = self._store
        plan = claim.claim(
            store._dialect, self.name, worker_id, n, store._now_us(),
            self._options.visibility_timeout_us,
        )  # fmt: skip
        run = store._run(plan, bulk=n > INLINE_MAX)
        if store._telemetry is not None:
            run = store._telemetry.claim(self.name, worker_id, n, run)
        return [Job(self, r) for r in await run]

    async def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int:
        """Ack many jobs at once; returns how many were still owned by ``worker_id``."""
        worker_id = check_identifier(worker_id, "worker id")
        ids = queues.check_job_ids(job_ids)
        store = self._store
        run = store._run(
            claim.ack_batch(store._dialect, self.name, ids, worker_id, store._now_us()),
            bulk=len(ids) > INLINE_MAX,
        )
        if store._telemetry is not None:
            return await store._telemetry.ack_batch(self.name, len(ids), run)
        return await run

    async def cancel(self, job_id: int) -> bool:
        """Delete a pending or processing job (into history, outcome ``cancelled``, when the queue
        keeps history); ``False`` if there was none (a processing job's worker then gets
        ``False`` when it settles)."""
        return await self._store._run(ops.cancel(self._store, self.name, job_id))

    async def get_job(self, job_id: int) -> JobInfo | None:
        """Job ``job_id`` of this queue: live (``pending``, ``processing``),
        ``dead``, or finished (``acked``, ``cancelled``) while the queue keeps
        history; ``None`` when it is none of these (finished with no history
        kept, or not this queue's)."""
        return await self._store._run(ops.get_job(self._store, self.name, job_id))

    async def list_jobs(
        self, *, state: str | None = None, limit: int = 100, after: int | None = None
    ) -> list[JobInfo]:
        """Up to ``limit`` of this queue's jobs, by id ascending, starting
        after id ``after``: pass the last id of a page to get the next.
        ``state``: ``"ready"`` (claimable now), ``"scheduled"`` (due later),
        ``"pending"`` (both), ``"processing"``, ``"dead"``, or the finished
        jobs its history keeps, ``"acked"`` and ``"cancelled"``; None: every
        live and dead job. Another state is an ``InvalidArgument``."""
        return await self._store._run(*ops.list_jobs(self._store, self.name, state, limit, after))

    async def throughput(self, *, window: Duration = 1800.0, bucket: Duration = 60.0) -> Throughput:
        """How many of this queue's jobs finished, and how many died, in each
        ``bucket`` (seconds or a ``timedelta``, at least 1 s) of the last
        ``window`` (a whole number of buckets, at most 1440): finished jobs
        are those its history keeps (acked or cancelled, so only while the
        queue keeps history: ``set_retention``), dead ones the dead letters
        that died then and are still dead letters. Counted on the history's
        and the dead letters' time indexes, so it costs the rows of the
        window, not of the queue."""
        return await self._store._run(*ops.throughput(self._store, self.name, window, bucket))

    async def sweep_expired(self) -> int:
        """Move expired and stranded jobs of this queue to dead; returns how many.

        Each round that buries jobs logs them at ERROR, with the reasons."""
        total = 0
        while True:
            buried = await self._store._run(
                claim.sweep(self._store._dialect, self.name, self._store._now_us()), bulk=True
            )
            total += len(buried)
            if buried:
                log_buried(self.name, buried)
                if self._store._telemetry is not None:
                    self._store._telemetry.buried(self.name, buried)
            if len(buried) < claim.SWEEP_PAGE:
                return total

    async def pause(self) -> None:
        """Stop claims from this queue, in every process, until ``resume``:
        enqueues go on, and workers wait (at their poll interval) without
        taking anything. A claim already running when the pause commits may
        still take jobs. Pausing a paused queue changes nothing."""
        await self._set_paused(True)

    async def resume(self) -> None:
        """Let claims take this queue's jobs again; its workers are woken at once."""
        await self._set_paused(False)

    async def _set_paused(self, paused: bool) -> None:
        await self._store._run(ops.set_paused(self._store, self.name, paused))

    async def set_retention(self, *, history: Duration | None, dead: Duration | None) -> None:
        """How long this queue keeps what it is done with, for every process
        (stored with the queue; its pause flag stays).

        ``history``: each acked or cancelled job keeps its record (state,
        attempts, timings, last error, worker) in history for this long;
        ``None`` keeps none (the default). An ack follows the setting as it
        was when its job was claimed. ``dead``: a dead letter buried from now
        on is pruned this long after it died; ``None`` keeps dead letters
        until purged (the default). Housekeeping does the pruning. Raises
        ``InvalidArgument`` for a duration that is not positive."""
        history_us = None if history is None else duration_us(history, "history", allow_zero=False)
        dead_us = None if dead is None else duration_us(dead, "dead", allow_zero=False)
        store = self._store
        await store._run(queues.set_retention(store._dialect, self.name, history_us, dead_us))

    async def is_paused(self) -> bool:
        """Whether the queue is paused now."""
        return await self._store._run(ops.is_paused(self._store, self.name))

    async def stats(self) -> QueueStats:
        """The queue's counts, as of now."""
        return await self._store._run(*ops.stats(self._store, self.name))

    async def summary(self) -> QueueSummary:
        """This queue as ``Store.list_queues`` lists it: its counts, oldest
        ready job, pause, history and retention (zeros for a queue never
        used), without listing the others."""
        return await self._store._run(*ops.summary(self._store, self.name))

    async def dead_letters(self, limit: int = 100) -> list[JobInfo]:
        """Up to ``limit`` dead jobs of this queue, oldest first."""
        return await self._store._run(*ops.dead_letters(self._store, self.name, limit))

    async def requeue_dead(self, job_id: int) -> bool:
        """Move a dead job back to pending, due now, attempts reset, no deadline;
        ``False`` if it is not dead here."""
        return await self._store._run(ops.requeue_dead(self._store, self.name, job_id))

    async def purge_dead(
        self, before: datetime | None = None, *, ids: Sequence[int] | None = None
    ) -> int:
        """Delete this queue's dead jobs: every one, those that died before
        ``before``, or those among ``ids`` (other ids are left alone); returns
        how many. Give ``before`` or ``ids``, not both."""
        plan = ops.purge_dead(self._store, self.name, before, ids)
        return await self._store._run(plan, bulk=True)

    async def next_due(self) -> datetime | None:
        """When the next job becomes claimable; ``None`` when the queue is empty."""
        us = await self._store._run(claim.next_due(self._store._dialect, self.name))
        return None if us is None else to_datetime(us)

    async def work(
        self,
        handler: Callable[[Job], Awaitable[Any]],
        *,
        concurrency: int = 1,
        worker_id: str | None = None,
        poll_interval: float = 5.0,
        sweep_interval: float | None = None,
        heartbeat_interval: float | None = None,
        drain: Drain | None = None,
        task_status: Any = None,
    ) -> WorkerReport:
        """Run ``handler`` on this queue's jobs until cancelled (unfinished
        jobs are handed back and the cancellation propagates), or until
        ``drain`` ends it gracefully: then it returns what it did. See
        docs/worker.md."""
        from .worker import run_worker

        # Up front: the worker rides out failing claims, and on a read-only
        # store every claim would fail, forever.
        self._store._check_writable("work()")

        return await run_worker(
            self, handler, concurrency=concurrency, worker_id=worker_id,
            poll_interval=poll_interval, sweep_interval=sweep_interval,
            heartbeat_interval=heartbeat_interval, drain=drain, task_status=task_status,
        )  # fmt: skip
