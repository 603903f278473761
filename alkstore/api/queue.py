"""``Queue``: an at-least-once job queue."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar, Unpack

from ..protocol.machines.worker import WorkerPolicy, check_worker_id
from ..protocol.plans import claim, queues
from ..protocol.values import codec
from ..protocol.values.errors import InvalidArgument, brief
from ..protocol.values.names import check_identifier
from ..protocol.values.timeconv import Duration, to_datetime
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
from ..services.sweeping import sweep_queue
from ..services.worker import Worker, check_handler, default_worker_id
from .core import ops
from .core.handle import StoreCore
from .core.observer import JobObserver
from .core.ops import INLINE_MAX
from .core.results import await_result
from .drain import Drain
from .job import Job, StoreHandle
from .tx import run_unique

T = TypeVar("T")


class Queue(ops.QueueHandle):
    """A named queue. Creating the handle does no IO."""

    def __init__(
        self, core: StoreCore, owner: StoreHandle, name: str, options: QueueOptions
    ) -> None:
        self._core = core
        self._owner = owner
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
        core = self._core
        now = core.now_us()
        job = ops.new_job(self.name, payload, now, self._options, **options)
        return await core.telemetry.enqueue(job, lambda j: core.run(ops.insert(core, j, now)))

    async def enqueue_batch(
        self, payloads: Iterable[codec.JSON], **options: Unpack[EnqueueOptions]
    ) -> list[int]:
        """Add many jobs with the same options in one transaction."""
        core = self._core
        now = core.now_us()
        jobs = ops.new_jobs(self.name, self._options, payloads, now, options)
        if not jobs:
            return []
        return await core.telemetry.enqueue_many(
            self.name, jobs, lambda js: core.run(*ops.insert_many(core, js, now))
        )

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
        core = self._core
        now = core.now_us()
        for_us = ops.check_unique_for(unique_for)
        job, key = ops.new_unique_job(self.name, payload, key, now, self._options, options)
        return await run_unique(core, core.run, job, key, for_us, now)

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
        core = self._core
        now = core.now_us()
        for_us = ops.check_unique_for(unique_for)
        jobs = ops.new_unique_jobs(self.name, self._options, items, now, options)
        if not jobs:
            return []
        keys = [key for _, key in jobs]
        done: list[list[Enqueued]] = []

        async def insert(js: list[NewJob]) -> list[int]:
            pairs = list(zip(js, keys, strict=True))
            results = await core.run(*ops.insert_unique_many(core, pairs, for_us, now))
            done.append(results)
            return [r.id for r in results]

        await core.telemetry.enqueue_many(self.name, [job for job, _ in jobs], insert)
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
        await self._core.run(
            ops.set_limits(self._core, self.name, concurrency_per_key, rate, rate_per_key)
        )

    async def limits(self) -> QueueLimits:
        """This queue's limits (each None when not set)."""
        return await self._core.run(ops.limits(self._core, self.name))

    async def set_unique_policy(self, *, processing_blocks: bool) -> None:
        """Whether a processing job of this queue keeps its unique key, for
        every process (stored with the queue). ``True`` (the default): a
        key is held from enqueue until its job is acked, cancelled or dead.
        ``False``: an ``enqueue_unique`` of a key whose job is processing
        takes the key over and inserts a new job; the running job goes on
        without a key (a retry of it then runs keyless)."""
        await self._core.run(ops.set_unique_policy(self._core, self.name, processing_blocks))

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
        core = self._core
        plan = claim.claim(
            core.dialect, self.name, worker_id, n, core.now_us(),
            self._options.visibility_timeout_us,
        )  # fmt: skip
        run = core.run(plan, bulk=n > INLINE_MAX)
        records = await core.telemetry.claim(self.name, worker_id, n, run)
        return [self._job(r) for r in records]

    def _job(self, record: JobRecord, observer: JobObserver | None = None) -> Job:
        return Job(self._core, self._owner, self._options, record, observer)

    async def ack_batch(self, job_ids: Sequence[int], worker_id: str) -> int:
        """Ack many jobs at once; returns how many were still owned by ``worker_id``."""
        worker_id = check_identifier(worker_id, "worker id")
        ids = queues.check_job_ids(job_ids)
        core = self._core
        run = core.run(
            claim.ack_batch(
                core.dialect, self.name, ids, worker_id, core.now_us(), origin=core.origin
            ),
            bulk=len(ids) > INLINE_MAX,
        )
        return await core.telemetry.ack_batch(self.name, len(ids), run)

    async def cancel(self, job_id: int) -> bool:
        """Delete a pending or processing job (into history, outcome ``cancelled``, when the queue
        keeps history); ``False`` if there was none (a processing job's worker then gets
        ``False`` when it settles)."""
        return await self._core.run(ops.cancel(self._core, self.name, job_id))

    async def result(
        self, job_id: int, *, timeout: Duration | None = None, as_type: type[T] | None = None
    ) -> Any:
        """The result of job ``job_id`` of this queue once it finished: what
        its handler returned (``as_type``: decoded into that type, as
        ``payload_as`` does), or None for a handler that returned nothing.
        Waits for the job meanwhile, woken when it finishes (in any process),
        for up to ``timeout`` (None: as long as it takes; ``ResultTimeout``
        past it). A job that died raises ``JobFailed``, one that was
        cancelled (or whose dependency failed) ``JobCancelled``; an id no
        job ever had, ``InvalidArgument``. Results are kept for the queue's
        results retention (a day by default): past it a finished job reads
        as None. A job awaited while it runs is kept for it (its finish is
        recorded even if its handler returns nothing)."""
        job_id = queues.check_job_id(job_id)
        return await await_result(self._core, self.name, job_id, timeout, as_type)

    async def get_job(self, job_id: int) -> JobInfo | None:
        """Job ``job_id`` of this queue: live (``pending``, ``processing``),
        ``dead``, or finished (``acked``, ``cancelled``) while the queue keeps
        history; ``None`` when it is none of these (finished with no history
        kept, or not this queue's)."""
        return await self._core.run(ops.get_job(self._core, self.name, job_id))

    async def list_jobs(
        self, *, state: str | None = None, limit: int = 100, after: int | None = None
    ) -> list[JobInfo]:
        """Up to ``limit`` of this queue's jobs, by id ascending, starting
        after id ``after``: pass the last id of a page to get the next.
        ``state``: ``"ready"`` (claimable now), ``"scheduled"`` (due later),
        ``"pending"`` (both), ``"processing"``, ``"dead"``, or the finished
        jobs its history keeps, ``"acked"`` and ``"cancelled"``; None: every
        live and dead job. Another state is an ``InvalidArgument``."""
        return await self._core.run(*ops.list_jobs(self._core, self.name, state, limit, after))

    async def throughput(self, *, window: Duration = 1800.0, bucket: Duration = 60.0) -> Throughput:
        """How many of this queue's jobs finished, and how many died, in each
        ``bucket`` (seconds or a ``timedelta``, at least 1 s) of the last
        ``window`` (a whole number of buckets, at most 1440): finished jobs
        are those its history keeps (acked or cancelled, so only while the
        queue keeps history: ``set_retention``), dead ones the dead letters
        that died then and are still dead letters. Counted on the history's
        and the dead letters' time indexes, so it costs the rows of the
        window, not of the queue."""
        return await self._core.run(*ops.throughput(self._core, self.name, window, bucket))

    async def sweep_expired(self) -> int:
        """Move expired and stranded jobs of this queue to dead; returns how many.

        Each round that buries jobs logs them at ERROR, with the reasons."""
        return await sweep_queue(self._core, self.name)

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
        await self._core.run(ops.set_paused(self._core, self.name, paused))

    async def set_retention(
        self,
        *,
        history: Duration | ops.Unchanged | None = ops.UNCHANGED,
        dead: Duration | ops.Unchanged | None = ops.UNCHANGED,
        results: Duration | ops.Unchanged | None = ops.UNCHANGED,
    ) -> None:
        """How long this queue keeps what it is done with, for every process
        (stored with the queue; its pause flag stays). Each keyword is
        optional: a retention not given stays as it is.

        ``history``: each acked or cancelled job keeps its record (state,
        attempts, timings, last error, worker) in history for this long;
        ``None`` keeps none (the default). An ack follows the setting as it
        was when its job was claimed. ``dead``: a dead letter buried from now
        on is pruned this long after it died; ``None`` keeps dead letters
        until purged (the default). ``results``: how long a kept job's record
        and result stay (a job with a result, dependencies, dependents or an
        awaiter; ``None``: a day, the default; the history retention when
        that is longer). Housekeeping does the pruning. Raises
        ``InvalidArgument`` for a duration that is not positive."""
        changes = ops.retention_changes(history=history, dead=dead, results=results)
        core = self._core
        await core.run(queues.update_retention(core.dialect, self.name, changes))

    async def is_paused(self) -> bool:
        """Whether the queue is paused now."""
        return await self._core.run(ops.is_paused(self._core, self.name))

    async def stats(self) -> QueueStats:
        """The queue's counts, as of now."""
        return await self._core.run(*ops.stats(self._core, self.name))

    async def summary(self) -> QueueSummary:
        """This queue as ``Store.list_queues`` lists it: its counts, oldest
        ready job, pause, history and retention (zeros for a queue never
        used), without listing the others."""
        return await self._core.run(*ops.summary(self._core, self.name))

    async def dead_letters(self, limit: int = 100) -> list[JobInfo]:
        """Up to ``limit`` dead jobs of this queue, oldest first."""
        return await self._core.run(*ops.dead_letters(self._core, self.name, limit))

    async def requeue_dead(self, job_id: int) -> bool:
        """Move a dead job back to pending, due now, attempts reset, no deadline;
        ``False`` if it is not dead here."""
        return await self._core.run(ops.requeue_dead(self._core, self.name, job_id))

    async def purge_dead(
        self, before: datetime | None = None, *, ids: Sequence[int] | None = None
    ) -> int:
        """Delete this queue's dead jobs: every one, those that died before
        ``before``, or those among ``ids`` (other ids are left alone); returns
        how many. Give ``before`` or ``ids``, not both."""
        plan = ops.purge_dead(self._core, self.name, before, ids)
        return await self._core.run(plan, bulk=True)

    async def next_due(self) -> datetime | None:
        """When the next job becomes claimable; ``None`` when the queue is empty."""
        us = await self._core.run(claim.next_due(self._core.dialect, self.name))
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
        # Up front: the worker rides out failing claims, and on a read-only
        # store every claim would fail, forever.
        self._core.check_writable("work()")
        check_handler(handler)
        if drain is not None and not isinstance(drain, Drain):
            raise InvalidArgument(f"drain must be an alkstore.Drain or None, got {brief(drain)}")
        policy = WorkerPolicy.configure(
            concurrency=concurrency, visibility_timeout_us=self._options.visibility_timeout_us,
            poll_interval=poll_interval, sweep_interval=sweep_interval,
            heartbeat_interval=heartbeat_interval,
        )  # fmt: skip
        wid = check_worker_id(worker_id) or default_worker_id()
        worker = Worker(self._core, self.name, self._options, handler, self._job, policy, wid)
        if drain is None:
            return await worker.run(task_status)
        drain._attach(worker)
        try:
            return await worker.run(task_status)
        finally:
            drain._detach(worker)
