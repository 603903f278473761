"""``Store``: the handle applications hold. Engine-agnostic by construction.

A ``Store`` composes the facades (``Queue``, ``Stream``, ``Outbox``,
locks, transactions, the scheduler and housekeeping) over one
``StoreCore``; nothing below it knows it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..protocol.plans import inspection, workflows
from ..protocol.plans import schedule as schedule_plans
from ..protocol.plans.housekeeping import PruneReport
from ..protocol.plans.workflows import WorkflowSummary
from ..protocol.values import codec, schedules
from ..protocol.values.backoff import Backoff
from ..protocol.values.errors import InvalidArgument
from ..protocol.values.ints import check_int
from ..protocol.values.names import check_identifier, check_name
from ..protocol.values.timeconv import US_PER_S, Duration, duration_us
from ..protocol.values.types import (
    OUTBOX_OPTIONS,
    JobInfo,
    LockInfo,
    QueueOptions,
    QueueSummary,
    ScheduleInfo,
    StreamInfo,
)
from ..services import housekeeping, scheduler
from .core import ops
from .core.handle import StoreCore
from .core.wakes import WakeReceiver
from .locks import Lock, hold_lock, try_lock
from .outbox import Outbox
from .queue import Queue
from .stream import Stream
from .tx import Transaction
from .workflow import Workflow, WorkflowRun


class Store:
    """Every mechanism of the contract, over one database.

    Obtain one from a driver (``alkstore.io_trio.open_sqlite(...)``); it is
    closed when that ``async with`` block ends.
    """

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        return self._core.dialect.name

    @property
    def read_only(self) -> bool:
        """True for a store opened with ``read_only=True``: it runs every
        read (stats, listings, ``get_job``, ``read_since``, wakes) and
        refuses everything that writes with ``UsageError``, before any IO."""
        return self._core.read_only

    @property
    def closed(self) -> bool:
        """True once the store is closed (its ``async with`` block ended)."""
        return self._core.closed

    # -- notify / listen --------------------------------------------------------
    async def notify(self, channel: str, payload: codec.JSON = None) -> None:
        """Wake listeners of ``channel`` here and in other processes.

        The payload is validated (and size-checked on Postgres) but not
        delivered: wakes are hints; content travels by streams.
        """
        await self._core.run(ops.notify(self._core, channel, payload))

    def listen(self, channel: str) -> WakeReceiver:
        """A receiver of ``channel``'s wakes, here and from other processes. Use as ``async with``;
        raises ``InvalidName``/``ReservedName`` for a bad channel."""
        core = self._core
        return WakeReceiver(core.hub, check_name(channel, "channel"), core.executor, core.lifecycle)

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
        return Queue(self._core, self, check_name(name, "queue"), options)

    def stream(self, name: str) -> Stream:
        """A handle on stream ``name`` (no IO). Raises ``InvalidName``/``ReservedName``."""
        return Stream(self._core, check_name(name, "stream"))

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
        return Outbox(self._core, self, check_name(name, "outbox"), options)

    # -- locks -----------------------------------------------------------------
    async def try_lock(self, name: str, owner: str, ttl: Duration) -> Lock | None:
        """Take lock ``name`` for ``owner`` for ``ttl`` seconds if it is free (or already
        ``owner``'s: refreshed, same token); ``None`` if someone else holds it."""
        name = check_name(name, "lock")
        owner = check_identifier(owner, "lock owner")
        ttl_us = duration_us(ttl, "ttl", allow_zero=False)
        core = self._core
        return await core.telemetry.lock(name, owner, try_lock(core, name, owner, ttl_us))

    def hold_lock(
        self,
        name: str,
        owner: str,
        ttl: Duration,
        *,
        timeout: float | None = None,
        poll: float = 0.05,
    ) -> Any:
        """An async context manager holding lock ``name``: acquire it (trying
        every ``poll`` seconds, raising ``LockTimeout`` after ``timeout``),
        renew it in the background, cancel the body with ``LockLost`` if it
        cannot be renewed, release it when the body ends."""
        return hold_lock(self._core, name, owner, ttl, timeout=timeout, poll=poll)

    # -- transactions ----------------------------------------------------------
    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """Commit on success, roll back on error. Wakes fire only after commit."""
        async with self._core.transaction() as session:
            tx = Transaction(self._core, session)
            try:
                yield tx
            finally:
                tx._close()

    @asynccontextmanager
    async def join(self, connection: Any) -> AsyncIterator[Transaction]:
        """Ride along in a transaction the application holds on its own psycopg
        connection (Postgres only): what is done through the yielded handle
        commits or rolls back with the application's transaction. The
        application commits; this block only scopes the handle."""
        session = self._core.join(connection)
        tx = Transaction(self._core, session, joined=True)
        try:
            yield tx
        finally:
            tx._close()
            session.lifecycle.close()

    # -- scheduler -------------------------------------------------------------
    async def schedule(
        self,
        name: str,
        queue: str,
        cron_or_every: str,
        payload: codec.JSON = None,
        *,
        priority: int = 0,
        max_attempts: int | None = None,
        expires_after: Duration | None = None,
        tz: str = "UTC",
        catch_up: schedules.CatchUpPolicy = "latest",
        catch_up_max: int | None = None,
        catch_up_grace: Duration | None = None,
    ) -> None:
        """Enqueue ``payload`` into ``queue`` at every fire time of
        ``cron_or_every`` (5/6-field cron read in time zone ``tz``, an alias
        such as ``@hourly``, or ``@every 30s``). ``catch_up`` says which
        fire times missed while nobody ticked get a job: ``"latest"`` (one),
        ``"all"`` (the latest ``catch_up_max``, default 10) or ``"skip"``
        (none seen later than ``catch_up_grace``, default 60 s).
        Re-registering the same expression in the same zone keeps the next
        fire time."""
        name = check_name(name, "schedule")
        queue = check_name(queue, "queue")
        expr = schedules.parse(cron_or_every, tz)
        options = schedules.ScheduleOptions.of(priority, max_attempts, expires_after)
        policy = schedules.CatchUp.of(catch_up, catch_up_max, catch_up_grace)
        text = codec.encode(payload)
        core = self._core
        await core.run(
            schedule_plans.register(core.dialect, name, queue, expr, text, options, core.now_us(),
                                    policy)
        )  # fmt: skip

    async def unschedule(self, name: str) -> bool:
        """Remove schedule ``name``; ``False`` if there was none."""
        return await scheduler.unschedule(self._core, name)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every registered schedule, sorted by name: what it enqueues
        where, its next and last fire times, whether it is paused."""
        return await self._core.run(schedule_plans.list_schedules(self._core.dialect))

    async def pause_schedule(self, name: str) -> bool:
        """Stop schedule ``name`` from firing, in every process, until
        ``resume_schedule``; ``False`` if there is no such schedule.
        Re-registering it (``schedule``) keeps it paused."""
        name = check_name(name, "schedule")
        return await self._core.run(schedule_plans.pause(self._core.dialect, name))

    async def resume_schedule(self, name: str) -> bool:
        """Let schedule ``name`` fire again, from its first fire time after
        now: the fire times that passed while it was paused are not caught
        up. A schedule that is not paused is left as it is; ``False`` if
        there is no such schedule."""
        name = check_name(name, "schedule")
        core = self._core
        return await core.run(schedule_plans.resume(core.dialect, name, core.now_us()))

    async def run_schedule_now(self, name: str) -> int | None:
        """Enqueue schedule ``name``'s job now, with its payload, queue and
        job options, as a fire would, in every way but the time: its next
        fire time stays (a paused schedule stays paused). The job's id, or
        ``None`` if there is no such schedule."""
        return await scheduler.run_now(self._core, name)

    async def run_schedules(self) -> int:
        """Enqueue every due fire time once; returns how many jobs it enqueued."""
        return await scheduler.tick(self._core)

    async def run_scheduler(self, *, max_sleep: float = 60.0, task_status: Any = None) -> None:
        """Run the scheduler until cancelled (safe in every process at once)."""
        await scheduler.run_scheduler(self._core, max_sleep=max_sleep, task_status=task_status)

    # -- workflows ---------------------------------------------------------------
    def workflow(self, name: str) -> Workflow:
        """A new workflow named ``name`` (names need not be unique: each
        enqueue is a run with an id of its own). Add steps with
        ``Workflow.step``, then ``await wf.enqueue()`` (or
        ``tx.enqueue_workflow(wf)``). No IO."""
        return Workflow(self._core, name)

    async def workflow_run(self, workflow_id: int) -> WorkflowRun:
        """The enqueued workflow ``workflow_id``, to read, await or cancel;
        ``InvalidArgument`` when there is none (or it was pruned)."""
        core = self._core
        workflow_id = check_int(workflow_id, "workflow id")
        status = await core.run(workflows.workflow_status(core.dialect, workflow_id))
        if status is None:
            raise InvalidArgument(f"no workflow {workflow_id} (or it was pruned)")
        ids = {s.name: s.job_id for s in status.steps.values()}
        return WorkflowRun(core, status.id, status.name, ids)

    async def list_workflows(
        self, *, before: int | None = None, limit: int = 50
    ) -> list[WorkflowSummary]:
        """Workflows with ids below ``before`` (None: from the newest),
        newest first, at most ``limit``: keyset paging."""
        core = self._core
        before = None if before is None else check_int(before, "before", lo=1)
        limit = check_int(limit, "limit", lo=1, hi=10_000)
        return await core.run(workflows.list_workflows(core.dialect, before, limit))

    # -- inspection ------------------------------------------------------------
    async def list_queues(self) -> list[QueueSummary]:
        """Every queue that has live jobs, dead letters, history or settings
        (a pause, a retention, a limit, a unique policy), sorted by name,
        each with its counts and settings. An outbox's queue is listed under
        its internal name with ``outbox`` set to the outbox's name."""
        core = self._core
        plan = inspection.list_queues(core.dialect, core.now_us())
        return await core.run(plan, bulk=True)  # counts grow with the queues

    async def get_job(self, job_id: int) -> JobInfo | None:
        """Job ``job_id`` in whichever queue holds it: live, dead, or
        finished and kept in its queue's history; ``None`` when none has it."""
        return await self._core.run(ops.get_job(self._core, None, job_id))

    async def list_streams(self) -> list[StreamInfo]:
        """Every stream that has events, a counter or saved offsets, sorted
        by name, each with its consumers and their lag."""
        return await self._core.run(inspection.list_streams(self._core.dialect), bulk=True)

    async def list_locks(self) -> list[LockInfo]:
        """Every lock ever taken, sorted by name, with whether it is held now."""
        core = self._core
        return await core.run(inspection.list_locks(core.dialect, core.now_us()), bulk=True)

    # -- housekeeping ----------------------------------------------------------
    async def prune(self) -> PruneReport:
        """One housekeeping pass now, the one every open store also runs by
        itself every ``housekeeping_interval`` seconds: finished jobs and dead
        letters past their queue's retention, stream events past their
        stream's retention (never past a protected consumer), SQLite
        notification rows no live watcher needs, and lock rows nobody has held
        for 10 minutes. Deletes in short batches; safe in many processes at
        once. Returns how many rows of each it removed."""
        core = self._core
        core.lifecycle.check()
        core.check_writable("prune()")
        return await housekeeping.prune(core)

    # -- lifecycle -------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the store: its wake receivers close, its connections end, and
        every later operation raises ``Closed``. Idempotent; the driver's
        ``async with`` block calls it."""
        await self._core.close()
