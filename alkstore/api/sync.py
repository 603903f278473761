"""The blocking facades of ``alkstore.sync``: the producer side of a store
for synchronous code (Django, Flask, scripts).

Every method checks its arguments and builds its plan through ``ops`` (the
same functions the async facades use, so the same input raises the same
error and sends the same statements), then runs the plan on a blocking
executor (``runner/sqlite/sync_executor.py``, ``runner/postgres/sync_executor.py``) on the
calling thread. There is no worker, subscriber or listener here: those stay
on trio and asyncio.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar, Unpack

from ..protocol.dialect import Dialect
from ..protocol.machines.lifecycle import Lifecycle
from ..protocol.plan import Plan, is_read_only
from ..protocol.plans import workflows
from ..protocol.plans.workflows import WorkflowSummary
from ..protocol.values import codec
from ..protocol.values.backoff import Backoff
from ..protocol.values.errors import UsageError
from ..protocol.values.ints import check_int
from ..protocol.values.names import check_name, outbox_queue_name
from ..protocol.values.timeconv import US_PER_S, Duration
from ..protocol.values.types import (
    OUTBOX_OPTIONS,
    Enqueued,
    EnqueueOptions,
    JobInfo,
    QueueLimits,
    QueueOptions,
    QueueStats,
    QueueSummary,
    Rate,
    StreamEvent,
    StreamInfo,
    Throughput,
)
from ..runner.runtime import Clock
from ..runner.sync_session import BlockingExecutor, BlockingSession
from . import sync_workflow
from .core import ops
from .core.handle import new_origin
from .tx import JOINED_FINISH

T = TypeVar("T")


class _Context:
    """What an operation needs of a blocking store (``ops.OpContext``)."""

    __slots__ = ("_clock", "dialect", "origin")

    def __init__(self, dialect: Dialect, origin: str, clock: Clock) -> None:
        self.dialect = dialect
        self.origin = origin
        self._clock = clock

    def now_us(self) -> int:
        return self._clock.now_us()


class Store:
    """The producer side of a store, blocking: enqueue, publish, notify and
    inspect from synchronous code, alone or inside a transaction (your own
    SQL and alkstore's writes in one commit), or joined to your
    application's own connection.

    Obtain one from ``alkstore.sync.open_sqlite`` / ``open_postgres``; it
    is closed when that ``with`` block ends. Safe to share between threads:
    they take turns on its one connection (a transaction holds it until it
    ends). Workers, subscribers and listeners are on ``alkstore.io_trio`` /
    ``alkstore.io_asyncio``: they wake for what this store commits, in any
    process.
    """

    def __init__(
        self,
        *,
        executor: BlockingExecutor,
        clock: Clock,
        seed: int | None = None,
        read_only: bool = False,
    ) -> None:
        self._executor = executor
        self._clock = clock
        self._rng = random.Random(seed)
        self._read_only = read_only
        # What an operation needs of this store; its origin identifies its
        # notifications (as an async store's do).
        self._core = _Context(executor.dialect, new_origin(), clock)
        self._lifecycle = Lifecycle("store")

    def __repr__(self) -> str:
        return f"<alkstore.sync.Store {self.engine}{' closed' if self.closed else ''}>"

    # -- plumbing shared by the facades ---------------------------------------
    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        return self._executor.dialect.name

    @property
    def read_only(self) -> bool:
        """True for a store opened with ``read_only=True``: it runs every
        read and refuses everything that writes with ``UsageError``, before
        any IO."""
        return self._read_only

    @property
    def closed(self) -> bool:
        """True once the store is closed (its ``with`` block ended, or ``close()``)."""
        return self._lifecycle.closed

    def _now_us(self) -> int:
        return self._clock.now_us()

    def _check_writable(self, what: str) -> None:
        if self._read_only:
            raise ops.read_only_refusal(what)

    def _run(self, plan: Plan[T], bulk: bool = False) -> T:
        """Run ``plan`` in a transaction of its own, blocking."""
        self._lifecycle.check(plan)
        if self._read_only and not is_read_only(plan):
            plan.close()
            self._check_writable(getattr(plan, "__name__", "this operation"))
        return self._executor.run(plan, bulk)

    # -- notify ------------------------------------------------------------------
    def notify(self, channel: str, payload: codec.JSON = None) -> None:
        """Wake listeners of ``channel`` in every process (``Store.notify``).
        The payload is validated (and size-checked on Postgres) but not
        delivered."""
        self._run(ops.notify(self._core, channel, payload))

    # -- mechanism handles (no IO) ---------------------------------------------
    def queue(
        self,
        name: str,
        *,
        visibility_timeout: Duration = 300.0,
        max_attempts: int = 3,
        backoff: Backoff | None = None,
    ) -> Queue:
        """A handle on queue ``name`` with these defaults for its jobs (no IO). Raises
        ``InvalidName``/``ReservedName``/``InvalidArgument``."""
        options = QueueOptions.of(visibility_timeout, max_attempts, backoff)
        return Queue(self, check_name(name, "queue"), options)

    def stream(self, name: str) -> Stream:
        """A handle on stream ``name`` (no IO). Raises ``InvalidName``/``ReservedName``."""
        return Stream(self, check_name(name, "stream"))

    def outbox(
        self,
        name: str,
        *,
        visibility_timeout: Duration = OUTBOX_OPTIONS.visibility_timeout_us / US_PER_S,
        max_attempts: int = OUTBOX_OPTIONS.max_attempts,
        backoff: Backoff | None = None,
    ) -> Outbox:
        """A handle on outbox ``name`` with these delivery defaults (no IO). Raises
        ``InvalidName``/``ReservedName``/``InvalidArgument``."""
        options = QueueOptions.of(visibility_timeout, max_attempts, backoff)
        return Outbox(self, check_name(name, "outbox"), options)

    # -- inspection ------------------------------------------------------------
    def get_job(self, job_id: int) -> JobInfo | None:
        """Job ``job_id`` in whichever queue holds it: live, dead, or
        finished and kept in its queue's history; ``None`` when none has it."""
        return self._run(ops.get_job(self._core, None, job_id))

    # -- workflows -----------------------------------------------------------------
    def workflow(self, name: str) -> sync_workflow.Workflow:
        """A new workflow (``alkstore.Store.workflow``); ``enqueue()`` blocks."""
        return sync_workflow.Workflow(self._run, self._core, name)

    def list_workflows(
        self, *, before: int | None = None, limit: int = 50
    ) -> list[WorkflowSummary]:
        """``alkstore.Store.list_workflows``."""
        before = None if before is None else check_int(before, "before", lo=1)
        limit = check_int(limit, "limit", lo=1, hi=10_000)
        return self._run(workflows.list_workflows(self._core.dialect, before, limit))

    def workflow_run(self, workflow_id: int) -> sync_workflow.WorkflowRun:
        """The enqueued workflow ``workflow_id`` (``alkstore.Store.workflow_run``)."""
        return sync_workflow.workflow_run(
            self._run, self._core, check_int(workflow_id, "workflow id")
        )

    # -- transactions ----------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A transaction on the store's connection: commit when the block
        ends normally, roll back when it raises. While it is open, this
        thread uses ``tx.*`` (the store's own methods raise ``UsageError``)
        and other threads wait for the connection."""
        self._lifecycle.check()
        self._check_writable("a transaction")
        with self._executor.transaction() as session:
            tx = Transaction(self, session)
            try:
                yield tx
            finally:
                tx._close()

    @contextmanager
    def join(self, connection: Any) -> Iterator[Transaction]:
        """Ride along in the transaction your application holds on its own
        connection: a ``sqlite3.Connection`` to this store's database file,
        or a sync ``psycopg.Connection`` to its Postgres database. What is
        done through the yielded handle commits or rolls back with the
        application's transaction; the application commits (the handle's
        ``commit``/``rollback`` raise ``UsageError``). See docs/sync.md for
        a connection with no transaction open."""
        self._lifecycle.check()
        self._check_writable("join()")
        session = self._executor.join(connection)
        tx = Transaction(self, session, joined=True)
        try:
            yield tx
        finally:
            tx._close()

    # -- lifecycle -------------------------------------------------------------
    def close(self) -> None:
        """Close the store: its connection closes (after the thread using
        it, if any, is done) and every later operation raises ``Closed``.
        Idempotent; the opener's ``with`` block calls it."""
        if not self._lifecycle.close():
            return
        self._executor.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Queue(ops.QueueHandle):
    """A named queue, blocking: enqueue and inspect (no claims: workers are
    on trio and asyncio). Creating the handle does no IO."""

    def __init__(self, store: Store, name: str, options: QueueOptions) -> None:
        self._store = store
        self.name = name
        self._options = options

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    def enqueue(self, payload: codec.JSON, **options: Unpack[EnqueueOptions]) -> int:
        """Add a job; returns its id (``alkstore.Queue.enqueue``). Options:
        ``delay`` or ``run_at``, ``priority``, ``max_attempts``, ``expires``."""
        store = self._store
        now = store._now_us()
        job = ops.new_job(self.name, payload, now, self._options, **options)
        return store._run(ops.insert(store._core, job, now))

    def enqueue_batch(
        self, payloads: Iterable[codec.JSON], **options: Unpack[EnqueueOptions]
    ) -> list[int]:
        """Add many jobs with the same options in one transaction; their ids, in order."""
        store = self._store
        now = store._now_us()
        jobs = ops.new_jobs(self.name, self._options, payloads, now, options)
        if not jobs:
            return []
        return store._run(*ops.insert_many(store._core, jobs, now))

    def enqueue_unique(
        self,
        payload: codec.JSON,
        key: str,
        *,
        unique_for: Duration | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """Add a job holding unique ``key`` unless a live job holds it; then
        that job's id comes back with ``duplicate=True``
        (``alkstore.Queue.enqueue_unique``)."""
        store = self._store
        now = store._now_us()
        for_us = ops.check_unique_for(unique_for)
        job, key = ops.new_unique_job(self.name, payload, key, now, self._options, options)
        return store._run(ops.insert_unique(store._core, job, key, for_us, now))

    def enqueue_batch_unique(
        self,
        items: Iterable[tuple[str, codec.JSON]],
        *,
        unique_for: Duration | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> list[Enqueued]:
        """``enqueue_unique`` for each (key, payload) pair in one transaction;
        one result per pair, in order (``alkstore.Queue.enqueue_batch_unique``)."""
        store = self._store
        now = store._now_us()
        for_us = ops.check_unique_for(unique_for)
        jobs = ops.new_unique_jobs(self.name, self._options, items, now, options)
        if not jobs:
            return []
        return store._run(*ops.insert_unique_many(store._core, jobs, for_us, now))

    def set_limits(
        self,
        *,
        concurrency_per_key: int | None = None,
        rate: Rate | None = None,
        rate_per_key: Rate | None = None,
    ) -> None:
        """Set this queue's limits, replacing the ones it had
        (``alkstore.Queue.set_limits``)."""
        self._store._run(
            ops.set_limits(self._store._core, self.name, concurrency_per_key, rate, rate_per_key)
        )

    def limits(self) -> QueueLimits:
        """This queue's limits (``alkstore.Queue.limits``)."""
        return self._store._run(ops.limits(self._store._core, self.name))

    def set_unique_policy(self, *, processing_blocks: bool) -> None:
        """Whether a processing job of this queue keeps its unique key
        (``alkstore.Queue.set_unique_policy``)."""
        self._store._run(ops.set_unique_policy(self._store._core, self.name, processing_blocks))

    def get_job(self, job_id: int) -> JobInfo | None:
        """Job ``job_id`` of this queue (``alkstore.Queue.get_job``); ``None``
        when it is not (or no longer) this queue's."""
        return self._store._run(ops.get_job(self._store._core, self.name, job_id))

    def list_jobs(
        self, *, state: str | None = None, limit: int = 100, after: int | None = None
    ) -> list[JobInfo]:
        """Up to ``limit`` of this queue's jobs by id, after id ``after``,
        in ``state`` (``alkstore.Queue.list_jobs``)."""
        return self._store._run(*ops.list_jobs(self._store._core, self.name, state, limit, after))

    def summary(self) -> QueueSummary:
        """This queue as ``Store.list_queues`` lists it (``alkstore.Queue.summary``)."""
        return self._store._run(*ops.summary(self._store._core, self.name))

    def throughput(self, *, window: Duration = 1800.0, bucket: Duration = 60.0) -> Throughput:
        """This queue's finished and dead jobs per ``bucket`` over the last
        ``window`` (``alkstore.Queue.throughput``)."""
        return self._store._run(*ops.throughput(self._store._core, self.name, window, bucket))

    def stats(self) -> QueueStats:
        """The queue's counts, as of now."""
        return self._store._run(*ops.stats(self._store._core, self.name))

    def dead_letters(self, limit: int = 100) -> list[JobInfo]:
        """Up to ``limit`` dead jobs of this queue, oldest first."""
        return self._store._run(*ops.dead_letters(self._store._core, self.name, limit))

    def cancel(self, job_id: int) -> bool:
        """Delete a pending or processing job; ``False`` if there was none
        (``alkstore.Queue.cancel``)."""
        return self._store._run(ops.cancel(self._store._core, self.name, job_id))

    def result(
        self, job_id: int, *, timeout: Duration | None = None, as_type: type[T] | None = None
    ) -> Any:
        """``alkstore.Queue.result``, blocking: it looks again every few
        milliseconds, then less often (at most every 200 ms), until the job
        finished or ``timeout`` passed (``ResultTimeout``)."""
        store = self._store
        job_id = check_int(job_id, "job id")
        return sync_workflow.result(store._run, store._core, self.name, job_id, timeout, as_type)

    def requeue_dead(self, job_id: int) -> bool:
        """Move a dead job back to pending, due now, attempts reset; ``False``
        if it is not dead here."""
        return self._store._run(ops.requeue_dead(self._store._core, self.name, job_id))

    def purge_dead(
        self, before: datetime | None = None, *, ids: Sequence[int] | None = None
    ) -> int:
        """Delete this queue's dead jobs: every one, those that died before
        ``before``, or those among ``ids``; returns how many."""
        return self._store._run(ops.purge_dead(self._store._core, self.name, before, ids), True)

    def pause(self) -> None:
        """Stop claims from this queue, in every process, until ``resume``."""
        self._store._run(ops.set_paused(self._store._core, self.name, True))

    def resume(self) -> None:
        """Let claims take this queue's jobs again; its workers are woken."""
        self._store._run(ops.set_paused(self._store._core, self.name, False))

    def is_paused(self) -> bool:
        """Whether the queue is paused now."""
        return self._store._run(ops.is_paused(self._store._core, self.name))


class Stream:
    """A named, append-only log, blocking: publish and read (no
    subscriptions: those are on trio and asyncio)."""

    def __init__(self, store: Store, name: str) -> None:
        self._store = store
        self.name = name

    def __repr__(self) -> str:
        return f"Stream({self.name!r})"

    def publish(self, payload: codec.JSON) -> int:
        """Append ``payload`` (JSON) and return its offset; subscribers wake once it commits."""
        return self._store._run(ops.publish(self._store._core, self.name, None, payload))

    def publish_with_key(self, key: str, payload: codec.JSON) -> int:
        """Like ``publish``, with a non-empty ``key`` stored beside the event
        (``InvalidName`` if empty)."""
        return self._store._run(ops.publish_keyed(self._store._core, self.name, key, payload))

    def read_since(self, offset: int, limit: int = 100) -> list[StreamEvent]:
        """Events with offsets above ``offset``, ascending, at most ``limit``."""
        return self._store._run(*ops.read_since(self._store._core, self.name, offset, limit))

    def list_events(self, *, before: int | None = None, limit: int = 100) -> list[StreamEvent]:
        """Up to ``limit`` events below offset ``before``, newest first
        (``alkstore.Stream.list_events``)."""
        return self._store._run(*ops.list_events(self._store._core, self.name, before, limit))

    def read_from_consumer(self, consumer: str, limit: int = 100) -> list[StreamEvent]:
        """Events after ``consumer``'s saved offset (does not move it)."""
        plan = ops.read_from_consumer(self._store._core, self.name, consumer, limit)
        return self._store._run(*plan)

    def save_offset(self, consumer: str, offset: int) -> None:
        """Checkpoint ``consumer`` at ``offset``; never moves an offset back."""
        self._store._run(ops.save_offset(self._store._core, self.name, consumer, offset))

    def get_offset(self, consumer: str) -> int:
        """``consumer``'s saved offset; 0 if it never saved one."""
        return self._store._run(ops.get_offset(self._store._core, self.name, consumer))

    def head_offset(self) -> int:
        """The offset of the last event published and committed (0 if none)."""
        return self._store._run(ops.head_offset(self._store._core, self.name))

    def info(self) -> StreamInfo:
        """This stream's head, events held, retention and consumers (``alkstore.Stream.info``)."""
        return self._store._run(*ops.stream_info(self._store._core, self.name))


class Outbox(ops.OutboxHandle):
    """Messages to deliver, enqueued from synchronous code (usually with
    ``tx.outbox_enqueue``, so a message exists exactly when your writes
    commit); delivered by ``alkstore.Outbox.run_once``/``work`` on trio or
    asyncio."""

    def __init__(self, store: Store, name: str, options: QueueOptions) -> None:
        self.name = name
        self.queue: Queue = Queue(store, outbox_queue_name(name), options)

    def __repr__(self) -> str:
        return f"Outbox({self.name!r})"

    def enqueue(self, payload: codec.JSON, **options: Unpack[EnqueueOptions]) -> int:
        """Add a message outside any transaction (``Queue.enqueue``'s options); returns its id."""
        return self.queue.enqueue(payload, **options)

    def stats(self) -> QueueStats:
        """The outbox's counts (``Queue.stats``)."""
        return self.queue.stats()

    def dead_letters(self, limit: int = 100) -> list[JobInfo]:
        """Up to ``limit`` messages whose delivery gave up (``Queue.dead_letters``)."""
        return self.queue.dead_letters(limit)

    def requeue_dead(self, job_id: int) -> bool:
        """Deliver a dead message again (``Queue.requeue_dead``)."""
        return self.queue.requeue_dead(job_id)

    def purge_dead(self, before: datetime | None = None) -> int:
        """Delete dead messages (``Queue.purge_dead``); returns how many."""
        return self.queue.purge_dead(before)


class Transaction:
    """Everything done through this handle commits together or not at all
    (``alkstore.Transaction``, blocking). After the block ends, or after
    ``commit``/``rollback``, the handle raises ``Closed``."""

    def __init__(self, store: Store, session: BlockingSession, *, joined: bool = False) -> None:
        self._store = store
        self._session = session
        self._joined = joined
        self._lifecycle = Lifecycle("transaction")

    def _close(self) -> None:
        self._lifecycle.close()

    def commit(self) -> None:
        """Commit now; the handle is closed afterwards and the end of the
        block does nothing more. Raises ``DatabaseError`` if the database
        refused (nothing committed) and ``CommitUnknown`` if its answer
        never came. ``UsageError`` in a joined transaction."""
        self._finish(True)

    def rollback(self) -> None:
        """Roll back now; the handle is closed, the block's end does nothing
        more. ``UsageError`` in a joined transaction."""
        self._finish(False)

    def _finish(self, commit: bool) -> None:
        self._lifecycle.check()
        if self._joined:
            raise UsageError(JOINED_FINISH)
        self._lifecycle.close()
        self._session.finish(commit)

    def _run(self, plan: Plan[T]) -> T:
        self._lifecycle.check(plan)
        return self._session.run(plan)

    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run your own SQL (the engine's placeholders: ``?`` on SQLite,
        ``$1`` on Postgres) in this transaction; returns any rows."""
        self._lifecycle.check()
        return self._session.execute(*ops.check_sql(sql, params))

    def enqueue(
        self, queue: str | Queue, payload: codec.JSON, **options: Unpack[EnqueueOptions]
    ) -> int:
        """Enqueue into ``queue`` (a name, or a ``Queue`` whose defaults apply)
        with ``Queue.enqueue``'s options; returns the job's id."""
        name, defaults = ops.queue_target(queue)
        store = self._store
        now = store._now_us()
        job = ops.new_job(name, payload, now, defaults, **options)
        return self._run(ops.insert(store._core, job, now))

    def enqueue_unique(
        self,
        queue: str | Queue,
        payload: codec.JSON,
        key: str,
        *,
        unique_for: Duration | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """``Queue.enqueue_unique`` inside this transaction
        (``alkstore.Transaction.enqueue_unique``)."""
        name, defaults = ops.queue_target(queue)
        store = self._store
        now = store._now_us()
        for_us = ops.check_unique_for(unique_for)
        job, key = ops.new_unique_job(name, payload, key, now, defaults, options)
        return self._run(ops.insert_unique(store._core, job, key, for_us, now))

    def outbox_enqueue(
        self, outbox: str | Outbox, payload: codec.JSON, **options: Unpack[EnqueueOptions]
    ) -> int:
        """Enqueue a message into ``outbox`` (a name, or an ``Outbox`` whose
        defaults apply), delivered only if this transaction commits."""
        name, defaults = ops.outbox_target(outbox)
        store = self._store
        now = store._now_us()
        job = ops.new_job(name, payload, now, defaults, **options)
        return self._run(ops.insert(store._core, job, now))

    def publish(self, stream: str, payload: codec.JSON) -> int:
        """``Stream.publish`` inside this transaction: the event exists, and
        subscribers wake, only if it commits."""
        name = check_name(stream, "stream")
        return self._run(ops.publish(self._store._core, name, None, payload))

    def publish_with_key(self, stream: str, key: str, payload: codec.JSON) -> int:
        """``Stream.publish_with_key`` inside this transaction."""
        name = check_name(stream, "stream")
        return self._run(ops.publish_keyed(self._store._core, name, key, payload))

    def notify(self, channel: str, payload: codec.JSON = None) -> None:
        """``Store.notify`` inside this transaction: the wake fires only after commit."""
        self._run(ops.notify(self._store._core, channel, payload))

    def enqueue_workflow(self, workflow: sync_workflow.Workflow) -> tuple[int, dict[str, int]]:
        """Enqueue every step of ``workflow`` in this transaction
        (``alkstore.Transaction.enqueue_workflow``): its id and each step's job id."""
        return self._run(workflow.plan())

    def save_offset(self, stream: str, consumer: str, offset: int) -> None:
        """``Stream.save_offset`` inside this transaction: the checkpoint
        commits with your writes."""
        name = check_name(stream, "stream")
        self._run(ops.save_offset(self._store._core, name, consumer, offset))
