"""``Store``: the handle applications hold. Engine-agnostic by construction."""

from __future__ import annotations

import contextvars
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol.machines.lifecycle import Lifecycle
from ..protocol.plan import Plan, is_read_only
from ..protocol.plans import inspection, locks
from ..protocol.plans import schedule as schedule_plans
from ..protocol.plans.housekeeping import PruneReport
from ..protocol.values import codec, schedules
from ..protocol.values.backoff import Backoff
from ..protocol.values.errors import CommitUnknown, UsageError
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
from ..runner.executor import Executor, TxSession
from ..runner.hub import WakeHub
from ..runner.runtime import Clock, Runtime, TaskGroup
from . import ops
from .wakes import WakeReceiver

if TYPE_CHECKING:
    from .locks import Lock
    from .outbox import Outbox
    from .queue import Queue
    from .stream import Stream
    from .telemetry import Telemetry
    from .tx import Transaction

T = TypeVar("T")

# The stores whose transaction the current task (or a task it spawned) is
# inside. On an engine whose transaction holds the only writer (SQLite), an
# auto-commit call from inside would wait for the transaction it is part of.
_IN_TRANSACTION: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "alkstore_in_transaction", default=frozenset()
)


class Store:
    """Every mechanism of the contract, over one database.

    Obtain one from a driver (``alkstore.io_trio.open_sqlite(...)``); it is
    closed when that ``async with`` block ends.
    """

    # Set by ``alkstore.otel.instrument`` (see ``api/telemetry.py``); without
    # it every operation pays one ``is None`` check and nothing more.
    _telemetry: Telemetry | None = None
    # The task group of the block that opened the store (its background
    # tasks); None for a store opened without one (``open_simulated``).
    _background: TaskGroup | None = None

    def __init__(
        self,
        *,
        executor: Executor,
        runtime: Runtime,
        clock: Clock,
        hub: WakeHub,
        seed: int | None = None,
        read_only: bool = False,
        notification_retention: float | None = None,
    ) -> None:
        self._executor = executor
        self._read_only = read_only
        self._runtime = runtime
        self._clock = clock
        self._hub = hub
        self._rng = random.Random(seed)
        # Identifies this store's notifications so its own watcher skips them.
        self._origin = secrets.token_hex(8)
        self._lifecycle = Lifecycle("store")
        # How long housekeeping keeps notification rows (SQLite's; None: the
        # engine has none).
        self._notification_retention_us = (
            None if notification_retention is None else round(notification_retention * US_PER_S)
        )

    # -- plumbing shared by the facades ---------------------------------------
    @property
    def engine(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""
        return self._executor.dialect.name

    @property
    def read_only(self) -> bool:
        """True for a store opened with ``read_only=True``: it runs every
        read (stats, listings, ``get_job``, ``read_since``, wakes) and
        refuses everything that writes with ``UsageError``, before any IO."""
        return self._read_only

    def _check_writable(self, what: str) -> None:
        """``UsageError`` if this store was opened read-only."""
        if self._read_only:
            raise ops.read_only_refusal(what)

    @property
    def closed(self) -> bool:
        """True once the store is closed (its ``async with`` block ended)."""
        return self._lifecycle.closed

    def _now_us(self) -> int:
        return self._clock.now_us()

    def _draw(self) -> float:
        """A uniform draw in [0, 1) for backoff jitter (seedable)."""
        return self._rng.random()

    @property
    def _dialect(self) -> Any:
        return self._executor.dialect

    async def _run(self, plan: Plan[T], bulk: bool = False) -> T:
        """Run ``plan`` in a transaction of its own. ``bulk``: its work grows
        with its input or with the data (an engine keeps it off the event
        loop's thread). ``store._run(*ops.stats(...))`` takes an operation's
        ``(plan, bulk)`` as it comes."""
        self._lifecycle.check(plan)
        if self._read_only and not is_read_only(plan):
            plan.close()
            self._check_writable(getattr(plan, "__name__", "this operation"))
        if (
            self._executor.exclusive_transactions
            and id(self) in _IN_TRANSACTION.get()
            and not (self._executor.separate_readers and is_read_only(plan))
        ):
            plan.close()
            raise _reentry()
        # Every operation is a cancellation point at its start: its waits
        # are shielded (work handed to the database is not abandoned), so a
        # cancel that came before it must be taken before anything is done.
        await self._runtime.cancel_point()
        try:
            value, wakes = await self._executor.run(plan, bulk=bulk)
        except CommitUnknown as exc:
            if exc.wakes:
                self._hub.wake(exc.wakes)  # it may have committed: look again
            raise
        if wakes:
            self._hub.wake(wakes)
        return value

    def _subscribe_channel(self, channel: str) -> WakeReceiver:
        """A receiver on any channel, internal ones included (no name check)."""
        return WakeReceiver(self._hub, channel, self._executor, self._lifecycle)

    # -- notify / listen --------------------------------------------------------
    async def notify(self, channel: str, payload: codec.JSON = None) -> None:
        """Wake listeners of ``channel`` here and in other processes.

        The payload is validated (and size-checked on Postgres) but not
        delivered: wakes are hints; content travels by streams.
        """
        await self._run(ops.notify(self, channel, payload))

    def listen(self, channel: str) -> WakeReceiver:
        """A receiver of ``channel``'s wakes, here and from other processes. Use as ``async with``;
        raises ``InvalidName``/``ReservedName`` for a bad channel."""
        return WakeReceiver(
            self._hub, check_name(channel, "channel"), self._executor, self._lifecycle
        )

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
        from .queue import Queue

        options = QueueOptions.of(visibility_timeout, max_attempts, backoff)
        return Queue(self, check_name(name, "queue"), options)

    def stream(self, name: str) -> Stream:
        """A handle on stream ``name`` (no IO). Raises ``InvalidName``/``ReservedName``."""
        from .stream import Stream

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
        from .outbox import Outbox

        options = QueueOptions.of(visibility_timeout, max_attempts, backoff)
        return Outbox(self, check_name(name, "outbox"), options)

    # -- locks -----------------------------------------------------------------
    async def try_lock(self, name: str, owner: str, ttl: Duration) -> Lock | None:
        """Take lock ``name`` for ``owner`` for ``ttl`` seconds if it is free (or already
        ``owner``'s: refreshed, same token); ``None`` if someone else holds it."""
        name = check_name(name, "lock")
        owner = check_identifier(owner, "lock owner")
        ttl_us = duration_us(ttl, "ttl", allow_zero=False)
        if self._telemetry is not None:
            return await self._telemetry.lock(name, owner, self._try_lock(name, owner, ttl_us))
        return await self._try_lock(name, owner, ttl_us)

    async def _try_lock(self, name: str, owner: str, ttl_us: int) -> Lock | None:
        """``try_lock`` of names already checked, with no span of its own."""
        from .locks import Lock

        record = await self._run(locks.try_lock(self._dialect, name, owner, self._now_us(), ttl_us))
        return None if record is None else Lock(self, record)

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
        from .locks import hold_lock

        return hold_lock(self, name, owner, ttl, timeout=timeout, poll=poll)

    # -- transactions ----------------------------------------------------------
    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        """Commit on success, roll back on error. Wakes fire only after commit."""
        from .tx import Transaction

        self._lifecycle.check()
        self._check_writable("a transaction")
        inside = _IN_TRANSACTION.get()
        if self._executor.exclusive_transactions and id(self) in inside:
            raise _reentry()
        await self._runtime.cancel_point()
        tx: Transaction | None = None
        try:
            async with self._executor.transaction() as session:
                tx = Transaction(self, session)
                marker = _IN_TRANSACTION.set(inside | {id(self)})
                try:
                    yield tx
                finally:
                    _IN_TRANSACTION.reset(marker)
                    tx._close()
        except CommitUnknown as exc:
            if tx is not None and not tx._finished:
                self._hub.wake(exc.wakes)  # it may have committed: look again
            raise
        assert tx is not None
        if not tx._finished and session.wakes:
            self._hub.wake(session.wakes)

    async def _end_transaction(self, session: TxSession, commit: bool) -> None:
        """Commit or roll back ``session`` now, waking after a commit."""
        try:
            await session.finish(commit)
        except CommitUnknown as exc:
            self._hub.wake(exc.wakes)
            raise
        if commit and session.wakes:
            self._hub.wake(session.wakes)

    @asynccontextmanager
    async def join(self, connection: Any) -> AsyncIterator[Transaction]:
        """Ride along in a transaction the application holds on its own psycopg
        connection (Postgres only): what is done through the yielded handle
        commits or rolls back with the application's transaction. The
        application commits; this block only scopes the handle."""
        from .tx import Transaction

        self._lifecycle.check()
        self._check_writable("join()")
        session = self._executor.join(connection)
        tx = Transaction(self, session, joined=True)
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
        now = self._now_us()
        await self._run(
            schedule_plans.register(self._dialect, name, queue, expr, text, options, now, policy)
        )

    async def unschedule(self, name: str) -> bool:
        """Remove schedule ``name``; ``False`` if there was none."""
        from .scheduler import unschedule

        return await unschedule(self, name)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every registered schedule, sorted by name: what it enqueues
        where, its next and last fire times, whether it is paused."""
        return await self._run(schedule_plans.list_schedules(self._dialect))

    async def pause_schedule(self, name: str) -> bool:
        """Stop schedule ``name`` from firing, in every process, until
        ``resume_schedule``; ``False`` if there is no such schedule.
        Re-registering it (``schedule``) keeps it paused."""
        name = check_name(name, "schedule")
        return await self._run(schedule_plans.pause(self._dialect, name))

    async def resume_schedule(self, name: str) -> bool:
        """Let schedule ``name`` fire again, from its first fire time after
        now: the fire times that passed while it was paused are not caught
        up. A schedule that is not paused is left as it is; ``False`` if
        there is no such schedule."""
        name = check_name(name, "schedule")
        return await self._run(schedule_plans.resume(self._dialect, name, self._now_us()))

    async def run_schedules(self) -> int:
        """Enqueue every due fire time once; returns how many jobs it enqueued."""
        from .scheduler import tick

        return await tick(self)

    async def run_scheduler(self, *, max_sleep: float = 60.0, task_status: Any = None) -> None:
        """Run the scheduler until cancelled (safe in every process at once)."""
        from .scheduler import run_scheduler

        await run_scheduler(self, max_sleep=max_sleep, task_status=task_status)

    # -- inspection ------------------------------------------------------------
    async def list_queues(self) -> list[QueueSummary]:
        """Every queue that has live jobs, dead letters, history or settings
        (a pause, a retention, a limit, a unique policy), sorted by name,
        each with its counts and settings. An outbox's queue is listed under
        its internal name with ``outbox`` set to the outbox's name."""
        plan = inspection.list_queues(self._dialect, self._now_us())
        return await self._run(plan, bulk=True)  # counts grow with the queues

    async def get_job(self, job_id: int) -> JobInfo | None:
        """Job ``job_id`` in whichever queue holds it: live, dead, or
        finished and kept in its queue's history; ``None`` when none has it."""
        return await self._run(ops.get_job(self, None, job_id))

    async def list_streams(self) -> list[StreamInfo]:
        """Every stream that has events, a counter or saved offsets, sorted
        by name, each with its consumers and their lag."""
        return await self._run(inspection.list_streams(self._dialect), bulk=True)

    async def list_locks(self) -> list[LockInfo]:
        """Every lock ever taken, sorted by name, with whether it is held now."""
        return await self._run(inspection.list_locks(self._dialect, self._now_us()), bulk=True)

    # -- housekeeping ----------------------------------------------------------
    async def prune(self) -> PruneReport:
        """One housekeeping pass now, the one every open store also runs by
        itself every ``housekeeping_interval`` seconds: finished jobs and dead
        letters past their queue's retention, stream events past their
        stream's retention (never past a protected consumer), SQLite
        notification rows no live watcher needs, and lock rows nobody has held
        for 10 minutes. Deletes in short batches; safe in many processes at
        once. Returns how many rows of each it removed."""
        from .housekeeping import prune

        self._lifecycle.check()
        self._check_writable("prune()")
        return await prune(self)

    # -- lifecycle -------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the store: its wake receivers close, its connections end, and
        every later operation raises ``Closed``. Idempotent; the driver's
        ``async with`` block calls it."""
        if not self._lifecycle.close():
            return
        self._hub.close_all()
        await self._executor.close()


def _reentry() -> UsageError:
    return UsageError(
        "this store's own methods cannot run inside its transaction on this engine "
        "(the transaction holds the only writer): use the tx.* methods, or call after the block"
    )
