"""The worker runtime behind ``Queue.work``.

Claims in batches when woken, runs the handler with bounded concurrency, acks
on return, retries with backoff on exception, heartbeats long jobs, and on
cancellation hands back at once whatever it has not finished. A ``Drain``
ends it gracefully instead: no more claims, what waits for a slot handed
back at once, running handlers given until a deadline to finish.

Every decision (when to claim, how many, how long to sleep, when to sweep,
when to heartbeat, when a claim is lost) is taken by the pure state machines
in ``alkstore/protocol/machines/worker.py`` and ``alkstore/protocol/machines/leases.py``; this
module only performs them, through the ``Runtime`` seam, so it serves every
driver.

Wakes: enqueues notify the queue's internal channel; local commits wake the
worker directly and the engine's wake source (the SQLite watcher, Postgres
LISTEN) carries commits from other processes. Without a wake the worker still
looks when the next job falls due (read with each short claim), at every
``poll_interval`` as a backstop, and whenever one of its own jobs finishes.

Live cancellation: ``Queue.cancel`` notifies the queue's cancel channel (a
channel of its own, so enqueues never cost this look); on that wake the
worker reads which of the jobs it holds and has not settled are gone, drops
those claimed ahead, and cancels the handlers of those running. A worker that
misses the wake finds out at its next heartbeat, as a lost claim.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import secrets
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..protocol.machines.leases import Idle, Lapsed, Leases, Wait
from ..protocol.machines.worker import (
    Claim,
    HandBack,
    Outcome,
    SelfSettled,
    Sweep,
    WorkerPolicy,
    check_worker_id,
    settle_bound,
)
from ..protocol.plan import Plan
from ..protocol.plans.claim import ack_many, heartbeat_many, retry_decision
from ..protocol.plans.queues import cancelled_among
from ..protocol.plans.worker import ClaimResult, claim_for_worker, release_all
from ..protocol.values.errors import (
    AlkstoreError,
    ClaimRulesChanged,
    Closed,
    CommitUnknown,
    InvalidArgument,
    brief,
)
from ..protocol.values.names import cancel_channel, queue_channel
from ..protocol.values.timeconv import US_PER_S, Duration
from ..protocol.values.types import JobRecord, WorkerReport
from ..runner.runtime import Runtime, Signal
from .ops import INLINE_MAX
from .queue import Job, error_text

if TYPE_CHECKING:
    from .drain import Drain
    from .queue import Queue
    from .wakes import WakeReceiver

log = logging.getLogger("alkstore.worker")

Handler = Callable[[Job], Awaitable[Any]]
# How a job left the worker, as its report counts it.
Settled = Literal["acked", "retried", "dead", "handed_back", "lost", "revoked"]


def check_handler(handler: object, what: str = "handler") -> None:
    """Refuse anything but an async function (or a partial of one, or an
    object with an ``async def __call__``) before any job is claimed: a
    plain function would run, then fail on ``await`` after its side effects,
    and be retried until it went dead."""
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return
    # An instance whose class defines ``async def __call__``.
    call = None
    if not inspect.isroutine(target):
        call = inspect.getattr_static(type(target), "__call__", None)
    if call is not None and inspect.iscoroutinefunction(call):
        return
    if callable(handler):
        raise InvalidArgument(
            f"{what} must be an async function (async def), got {brief(handler)}: "
            "it must be awaited; wrap a sync function in an async def (and run blocking "
            "work in a thread)"
        )
    raise InvalidArgument(f"{what} must be an async function, got {brief(handler)}")


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


async def run_worker(
    queue: Queue,
    handler: Handler,
    *,
    concurrency: int,
    worker_id: str | None,
    poll_interval: float,
    sweep_interval: float | None,
    heartbeat_interval: float | None,
    drain: Drain | None,
    task_status: Any,
) -> WorkerReport:
    from .drain import Drain

    check_handler(handler)
    if drain is not None and not isinstance(drain, Drain):
        raise InvalidArgument(f"drain must be an alkstore.Drain or None, got {brief(drain)}")
    vt = queue._options.visibility_timeout_us
    policy = WorkerPolicy.configure(
        concurrency=concurrency, visibility_timeout_us=vt, poll_interval=poll_interval,
        sweep_interval=sweep_interval, heartbeat_interval=heartbeat_interval,
    )  # fmt: skip
    wid = check_worker_id(worker_id) or default_worker_id()
    return await _Worker(queue, handler, policy, wid, drain).run(task_status)


class _Tally:
    """How jobs left the worker so far (its ``WorkerReport``)."""

    __slots__ = ("acked", "dead", "handed_back", "lost", "retried", "revoked", "started")

    def __init__(self) -> None:
        self.started = self.acked = self.retried = self.dead = 0
        self.handed_back = self.lost = self.revoked = 0

    def settled(self, outcome: Settled) -> None:
        """Count one job that left the worker so."""
        if outcome == "acked":
            self.acked += 1
        elif outcome == "retried":
            self.retried += 1
        elif outcome == "dead":
            self.dead += 1
        elif outcome == "handed_back":
            self.handed_back += 1
        elif outcome == "lost":
            self.lost += 1
        elif outcome == "revoked":
            self.revoked += 1


class _Slot:
    """One of the worker's ``concurrency`` handler tasks, and the job it runs."""

    __slots__ = ("job", "scope", "stopping")

    def __init__(self) -> None:
        self.job: _WorkerJob | None = None
        self.scope: Any = None
        # Its scope was cancelled (``stop``): the next job needs a fresh one.
        self.stopping = False

    def stop(self) -> None:
        self.stopping = True
        self.scope.cancel()


class _Worker:
    """The tasks of one ``Queue.work`` call, in one task group:

    - the claim loop (``run``): claims as many jobs as there are idle slots,
      in one statement, and hands each to a slot;
    - ``concurrency`` slots, started once, each running the handler on the
      job it is handed (no task, nursery or timer per job);
    - one keeper, renewing every held claim in one round trip per round
      (``Leases``) and stopping the handler of a claim that lapsed;
    - one settler, acking the jobs whose handlers returned in batches (one
      statement per batch, ownership checked per job), and retrying those
      whose handlers raised.

    What is claimed and not settled is ``held``; at shutdown the finished
    ones are acked and the rest handed back. A drain (``_begin_drain``)
    turns the claim loop into handing back and waiting; when the policy
    says ``Stop``, the loop returns and the task group is cancelled (the
    handlers still running with it), and shutdown proceeds as on
    cancellation, but ``run`` returns the report instead of raising.
    """

    def __init__(
        self,
        queue: Queue,
        handler: Handler,
        policy: WorkerPolicy,
        worker_id: str,
        drain: Drain | None = None,
    ) -> None:
        self.queue = queue
        self.store = queue._store
        self.runtime = queue._store._runtime
        self.handler = handler
        self.policy = policy
        self.wid = worker_id
        self.kick = _Kick(self.runtime)
        self.held: dict[int, _WorkerJob] = {}
        # Claimed, waiting for a slot; slots take from the left.
        self.ready: deque[_WorkerJob] = deque()
        self.work = _Kick(self.runtime)  # jobs arrived in ``ready``
        self.leases = Leases(policy.heartbeat_interval_us, queue._options.visibility_timeout_us)
        self.keeper_kick = _Kick(self.runtime)
        self.running: dict[int, _Slot] = {}  # job id -> the slot running it
        # Finished jobs waiting to be settled, by what to do.
        self.to_ack: list[_WorkerJob] = []
        self.to_retry: list[tuple[_WorkerJob, Exception]] = []
        self.settle_kick = _Kick(self.runtime)
        telemetry = self.store._telemetry
        self.tel = None if telemetry is None else telemetry.worker(queue.name, worker_id)
        self.drain = drain
        self.tally = _Tally()
        self.cancelled = 0
        # Set when the store's claim rules turned out newer than this code's:
        # the worker drains, then ``run`` raises it instead of reporting.
        self.outdated: ClaimRulesChanged | None = None

    async def run(self, task_status: Any) -> WorkerReport:
        store, runtime, drain = self.store, self.runtime, self.drain
        try:
            if drain is not None:
                drain._attach(self)
            async with (
                store._subscribe_channel(queue_channel(self.queue.name)) as wakes,
                store._subscribe_channel(cancel_channel(self.queue.name)) as cancels,
                runtime.task_group() as group,
            ):
                group.start_soon(self._forward_wakes, wakes)
                group.start_soon(self._watch_cancels, cancels)
                group.start_soon(self._keeper)
                group.start_soon(self._settler)
                for _ in range(self.policy.concurrency):
                    group.start_soon(self._slot, _Slot())
                if task_status is not None:
                    task_status.started()
                await self._claim_loop()
                # Drained: stop the worker's own tasks, and the handlers still
                # running if the deadline passed (their jobs are still held).
                group.cancel()
        finally:
            if drain is not None:
                drain._detach(self)
            # Handlers cancelled by the stop never left ``running``.
            self.cancelled = len(self.running)
            try:
                await self._shutdown()
            finally:
                if self.tel is not None:
                    self.tel.stopped()
        if self.outdated is not None:
            raise self.outdated
        return self._report()

    def _report(self) -> WorkerReport:
        t = self.tally
        return WorkerReport(
            queue=self.queue.name, worker_id=self.wid, started=t.started, acked=t.acked,
            retried=t.retried, dead=t.dead, handed_back=t.handed_back, lost=t.lost,
            cancelled=self.cancelled, cancelled_by_request=t.revoked,
        )  # fmt: skip

    # -- draining ------------------------------------------------------------------
    def _begin_drain(self, timeout_us: int | None) -> None:
        """A drain began (or was asked again, sooner): see ``WorkerPolicy.drain``."""
        first = not self.policy.draining
        self.policy.drain(self.store._now_us(), timeout_us)
        self.kick.set()
        if first:
            log.info("worker %s on %s: draining, %d handler(s) running, %d job(s) claimed ahead "
                     "to hand back", self.wid, self.queue.name, len(self.running),
                     len(self.ready))  # fmt: skip

    def _handlers_running(self) -> int:
        return len(self.running)

    async def _hand_back_waiting(self) -> None:
        """Draining: hand back the jobs claimed ahead that no slot has taken."""
        jobs = list(self.ready)
        self.ready.clear()
        self.policy.dropped(len(jobs))
        for job in jobs:
            self.leases.drop(job.id)
        bound = settle_bound(self.store._now_us(), [j._record for j in jobs])
        with self.runtime.shield(bound) as scope:
            self.tally.handed_back += await _hand_back(self.queue, jobs)
        # Handed back, or left to lapse if that failed: either way not ours.
        for job in jobs:
            self.held.pop(job.id, None)
        if scope.cancelled_caught:
            log.warning("worker could not hand back %d job(s) within %.1f s; they return "
                        "after their claims lapse", len(jobs), bound)  # fmt: skip

    def _stopped(self, cancel: bool) -> None:
        # A slot already woken could still take a waiting job before the
        # group's cancellation reaches it: the stop's hand-back takes them.
        self.ready.clear()
        if cancel:
            log.warning("worker %s on %s: drain over with %d handler(s) still running: "
                        "cancelling them, their jobs are handed back", self.wid,
                        self.queue.name, len(self.running))  # fmt: skip
        else:
            log.info("worker %s on %s: drained", self.wid, self.queue.name)

    # -- the claim loop ------------------------------------------------------------
    async def _claim_loop(self) -> None:
        store, policy, queue, wid = self.store, self.policy, self.queue, self.wid
        vt = queue._options.visibility_timeout_us
        while True:
            now = store._now_us()
            action = policy.next_action(now)
            if isinstance(action, Sweep):
                await _guard(queue.sweep_expired(), "sweep")
                policy.swept(store._now_us())
            elif isinstance(action, Claim):
                n = action.n
                seen: list[ClaimResult] = []
                plan = _capture(claim_for_worker(store._dialect, queue.name, wid, n, now, vt), seen)
                run = store._run(plan, bulk=n > INLINE_MAX)
                try:
                    result = await (run if self.tel is None else self.tel.claimed(n, now, run))
                except Closed:
                    raise
                except CommitUnknown:
                    # The claim may have committed: hand back what it
                    # would have taken (refused harmlessly if it did not),
                    # rather than leave it claimed by nobody until the
                    # visibility timeout.
                    log.warning("worker %s: claim on %s: outcome unknown; handing back",
                                wid, queue.name, exc_info=True)  # fmt: skip
                    taken = [_WorkerJob(self, r) for got in seen for r in got.jobs]
                    if taken:
                        self.held.update((j.id, j) for j in taken)  # if cancelled meanwhile
                        await _hand_back(queue, taken)
                        for j in taken:
                            self.held.pop(j.id, None)
                    policy.claim_failed(store._now_us())
                    continue
                except ClaimRulesChanged as exc:
                    # A newer release opened the store: its claim rules are
                    # not ours to apply. Claim nothing more; what runs finishes.
                    if self.outdated is None:
                        log.error("worker %s on %s: stops claiming: the store's claim "
                                  "generation is %d, this alkstore's %d (a newer release "
                                  "opened the store); %d running handler(s) finish first",
                                  wid, queue.name, exc.found, exc.expected,
                                  len(self.running))  # fmt: skip
                        self.outdated = exc
                    self._begin_drain(None)
                    continue
                except AlkstoreError:
                    log.exception("worker %s: claim on %s failed", wid, queue.name)
                    policy.claim_failed(store._now_us())
                    continue
                except BaseException:
                    # Cancelled while the claim ran. Drivers report a claim
                    # that committed as returned, but be sure: what it took
                    # is ours to hand back.
                    for got in seen:
                        self.held.update((r.id, _WorkerJob(self, r)) for r in got.jobs)
                    raise
                # No checkpoint between the claim's return and here: every
                # claimed job is held before anything can cancel us.
                policy.claimed(now, len(result.jobs), n, result.next_due_us, store._now_us())
                for record in result.jobs:
                    self._dispatch(_WorkerJob(self, record))
                if result.jobs:
                    self.work.set()
            elif isinstance(action, Wait):
                await self.kick.wait(max(0, action.until_us - store._now_us()) / US_PER_S)
            elif isinstance(action, HandBack):
                await self._hand_back_waiting()
            else:
                self._stopped(action.cancel)
                return

    def _dispatch(self, job: _WorkerJob) -> None:
        self.held[job.id] = job
        if self.tel is not None:
            self.tel.dispatched(job)
        # No kick for the keeper: it never sleeps longer than one renewal
        # interval (or claim term), and a lease taken now is first due a whole
        # interval (or term) on.
        self.leases.hold(job.id, job._record.claim_expires_at_us)
        self.ready.append(job)

    # -- the slots -------------------------------------------------------------------
    async def _slot(self, slot: _Slot) -> None:
        runtime = self.runtime
        while True:
            # One scope for a run of jobs, not one per job: cancelling it
            # stops the job whose claim lapsed; a fresh one serves the next.
            with runtime.cancel_scope() as scope:
                slot.scope, slot.stopping = scope, False
                await self._run_jobs(slot)
            job, slot.job = slot.job, None
            if job is not None:
                self._forget(job)
                if job._revoked:
                    log.info("job %s on %s cancelled while running: handler cancelled",
                             job.id, self.queue.name)  # fmt: skip
                    self.tally.revoked += 1
                else:
                    # Stopped because its claim lapsed: someone else may own it.
                    log.warning("job %s on %s lost its claim while running; not settled",
                                job.id, self.queue.name)  # fmt: skip
                    self.tally.lost += 1
                self.policy.finished(Outcome.LOST)
                if self.policy.draining:
                    self.kick.set()  # the drain may be waiting for this one alone

    async def _run_jobs(self, slot: _Slot) -> None:
        ready, runtime = self.ready, self.runtime
        while True:
            while not ready:
                await self.work.wait(None)
            job = ready.popleft()
            slot.job = job
            self.running[job.id] = slot
            self.policy.started()
            self.tally.started += 1
            if len(ready) * 2 < self.policy.ahead + 1:
                self.kick.set()  # running low: time to claim more
            # A job taken as shutdown began goes back without running.
            await runtime.cancel_point()
            await self._run_job(slot, job)
            if ready:
                self.work.set()  # more for the other slots too
            if slot.stopping:
                # Its handler ended on its own though its scope was cancelled
                # (it swallowed the cancellation): a fresh scope for the next.
                return

    async def _run_job(self, slot: _Slot, job: _WorkerJob) -> None:
        error: Exception | None = None
        try:
            if self.tel is None:
                await self.handler(job)
            else:
                await self.tel.process(job, self.handler)
        except Exception as exc:
            error = exc
        # The handler is done (returned or raised, not cancelled): from here
        # the job is settled whatever happens, shutdown included.
        slot.job = None
        self.running.pop(job.id, None)
        self.leases.drop(job.id)
        self._finished(job, error)
        self.kick.set()

    def _finished(self, job: _WorkerJob, error: Exception | None) -> None:
        if job._revoked and job._settled is None:
            # Cancelled in the database and told so, but the handler ended
            # on its own (it swallowed the cancellation, or finished inside
            # a shield): nothing to settle, the job is gone.
            log.info("job %s on %s cancelled while running; its handler %s", job.id,
                     self.queue.name, "returned" if error is None else "raised")  # fmt: skip
            self.held.pop(job.id, None)
            self.tally.revoked += 1
            self.policy.finished(Outcome.LOST, self.store._now_us())
            return
        if job._settled is not None:
            if error is not None:
                log.warning("job %s on %s raised after its handler settled it (%s)", job.id,
                            self.queue.name, job._settled.value, exc_info=error)  # fmt: skip
            self.held.pop(job.id, None)
            self.policy.finished(job._settled.outcome, self.store._now_us())
            return
        if error is None:
            self.to_ack.append(job)
        else:
            self.to_retry.append((job, error))
        self.settle_kick.set()
        # The slot is free now; a retried job is looked for once its retry
        # has committed (the settler says so).
        self.policy.finished(Outcome.ACKED, self.store._now_us())

    def _forget(self, job: _WorkerJob) -> None:
        self.held.pop(job.id, None)
        self.running.pop(job.id, None)
        self.leases.drop(job.id)

    # -- settling --------------------------------------------------------------------
    async def _settler(self) -> None:
        while True:
            await self.settle_kick.wait(None)
            await self._settle_all()

    async def _settle_all(self) -> None:
        """Ack what finished, in one statement per round, and retry what
        failed; shielded (bounded by the claims), so a finished job is
        settled even when shutdown starts meanwhile."""
        while self.to_ack or self.to_retry:
            acks, self.to_ack = self.to_ack, []
            retries, self.to_retry = self.to_retry, []
            records = [j._record for j in acks] + [j._record for j, _ in retries]
            bound = settle_bound(self.store._now_us(), records)
            with self.runtime.shield(bound) as scope:
                if acks:
                    await self._ack(acks)
                for job, error in retries:
                    await retry_failed(job, error)  # counted by the job's own ``retry``
                    self.held.pop(job.id, None)
                if retries:
                    self.policy.retried()
                    self.kick.set()
            if scope.cancelled_caught:
                log.warning("settling %d job(s) on %s: no answer within %.1f s, while their "
                            "claims lasted; outcome unknown, each is delivered again unless "
                            "it committed", len(records), self.queue.name, bound)  # fmt: skip
                for job in acks:
                    self.held.pop(job.id, None)
                for job, _ in retries:
                    self.held.pop(job.id, None)

    async def _ack(self, jobs: list[_WorkerJob]) -> set[int] | None:
        """Ack ``jobs`` in one statement; the ids acked (None: no answer)."""
        store = self.store
        plan = ack_many(store._dialect, self.wid, [j._record for j in jobs], store._now_us())
        run = store._run(plan, bulk=len(jobs) > INLINE_MAX)
        if self.tel is not None:
            run = self.tel.acked(jobs, run)
        acked: set[int] | None = await _guard(run, "ack")
        for job in jobs:
            self.held.pop(job.id, None)
        if acked is not None:
            self.tally.acked += len(acked)
            if len(acked) < len(jobs):
                await self._count_refused([j for j in jobs if j.id not in acked])
        return acked

    async def _count_refused(self, jobs: list[_WorkerJob], what: str = "ack") -> None:
        """Jobs whose settling (``what``) was refused: cancelled while their
        handler was finishing (``cancelled_by_request``), or their claim was
        lost; each counted once. Off the hot path: only after a refusal."""
        ids = [j.id for j in jobs]
        plan = cancelled_among(self.store._dialect, self.queue.name, ids)
        gone = await _guard(self.store._run(plan), "cancel check")
        cancelled = set(gone or ())
        self.tally.revoked += len(cancelled)
        self.tally.lost += len(jobs) - len(cancelled)
        for job in jobs:
            if job.id in cancelled:
                log.info("job %s on %s was cancelled as its handler finished: no %s",
                         job.id, self.queue.name, what)  # fmt: skip
            else:
                log.warning("%s of job %s on %s refused: claim lost", what, job.id,
                            self.queue.name)  # fmt: skip

    # -- keeping the claims -------------------------------------------------------
    async def _keeper(self) -> None:
        store, leases = self.store, self.leases
        vt = self.queue._options.visibility_timeout_us
        while True:
            now = store._now_us()
            action = leases.next_action(now)
            if isinstance(action, Idle):
                # A lease taken while this wait lasts is due (renewal or
                # expiry) no sooner than it ends: no kick needed on a claim.
                await self.keeper_kick.wait(min(leases.interval_us, leases.term_us) / US_PER_S)
            elif isinstance(action, Wait):
                await self.keeper_kick.wait(max(0, action.until_us - now) / US_PER_S)
            elif isinstance(action, Lapsed):
                for key in action.keys:
                    self._stop(key)
            else:
                jobs = [self.held[k] for k in action.keys if k in self.held]
                plan = heartbeat_many(store._dialect, [j._record for j in jobs], now, vt)
                try:
                    owned = await store._run(plan)
                except Closed:
                    raise
                except AlkstoreError:
                    log.warning("heartbeat of %d job(s) on %s failed", len(jobs),
                                self.queue.name, exc_info=True)  # fmt: skip
                    leases.renew_failed(action.keys, store._now_us())
                    continue
                refused = []
                for job, ok in zip(jobs, owned, strict=True):
                    if ok:
                        job._extended(now + vt)
                    elif job.id in self.running:
                        refused.append(job.id)
                if refused:
                    # Reclaimed, cancelled (a missed cancel wake), or settled
                    # meanwhile: say which, so a cancel is counted as one.
                    await self._revoke_cancelled(refused)
                    for job_id in refused:
                        self._stop(job_id)

    def _stop(self, job_id: int) -> None:
        """Stop the handler of a job whose claim is gone (or, if it had not
        started, drop it)."""
        self.leases.drop(job_id)
        waiting = self.held.get(job_id)
        if waiting is not None and waiting in self.ready:
            self.ready.remove(waiting)
            self.held.pop(job_id, None)
            self.tally.lost += 1
            self.policy.dropped()
            log.warning("job %s on %s lost its claim before it started; not run",
                        job_id, self.queue.name)  # fmt: skip
            return
        slot = self.running.get(job_id)
        job = None if slot is None else slot.job
        if slot is not None and job is not None and job.id == job_id and job._settled is None:
            slot.stop()

    # -- live cancellation ---------------------------------------------------------
    async def _watch_cancels(self, cancels: WakeReceiver) -> None:
        """On each wake of the queue's cancel channel (a job of this queue was
        cancelled, here or in another process), find which jobs this worker
        holds were, and stop them. Wakes coalesce: cancels arriving while one
        look runs lead to one more look."""
        while await cancels.recv() is not None:
            ids = [job.id for job in self.ready]
            ids += [job_id for job_id, slot in self.running.items()
                    if slot.job is not None and slot.job._settled is None]  # fmt: skip
            if ids:
                await self._revoke_cancelled(ids)

    async def _revoke_cancelled(self, ids: list[int]) -> None:
        """Read which of ``ids`` were cancelled, and stop each (see ``_revoke``)."""
        plan = cancelled_among(self.store._dialect, self.queue.name, ids)
        gone = await _guard(self.store._run(plan), "cancel check")
        for job_id in gone or ():
            self._revoke(job_id)

    def _revoke(self, job_id: int) -> None:
        """Job ``job_id`` was cancelled: drop it if it waits for a slot, or
        cancel its handler if one runs it and has not settled it. A job that
        finished meanwhile is left to its settlement (whose ack is refused
        and counted as a cancellation then)."""
        job = self.held.get(job_id)
        if job is None:
            return
        if job in self.ready:
            self.ready.remove(job)
            self.held.pop(job_id, None)
            self.leases.drop(job_id)
            self.tally.revoked += 1
            self.policy.dropped()
            self.kick.set()  # a slot freed: claim another
            log.info("job %s on %s cancelled before it started; not run", job_id,
                     self.queue.name)  # fmt: skip
            return
        slot = self.running.get(job_id)
        if slot is not None and slot.job is job and job._settled is None and not job._revoked:
            job._revoked = True
            self.leases.drop(job_id)
            slot.stop()

    # -- wakes and shutdown --------------------------------------------------------
    async def _forward_wakes(self, wakes: WakeReceiver) -> None:
        while await wakes.recv() is not None:
            self.policy.woke()
            self.kick.set()
        # The wake source closed (store closing, watcher gone): the worker
        # carries on with next-due sleeps and the poll backstop.
        log.debug("worker %s: wake source for %s closed", self.wid, self.queue.name)

    async def _shutdown(self) -> None:
        # Finished jobs first (their handlers returned: ack them), then hand
        # back the rest, unfinished.
        await self._settle_all()
        if not self.held:
            return
        jobs = list(self.held.values())
        bound = settle_bound(self.store._now_us(), [j._record for j in jobs])
        with self.runtime.shield(bound) as scope:
            self.tally.handed_back += await _hand_back(self.queue, jobs)
        if scope.cancelled_caught:
            log.warning("worker could not hand back %d job(s) within %.1f s; they return "
                        "after their claims lapse", len(jobs), bound)  # fmt: skip


def log_refused_acks(queue: str, records: Sequence[JobRecord], acked: set[int]) -> None:
    """Warn of each job in ``records`` that an ack answered for but did not
    ack: its claim was lost before the ack (it is delivered again)."""
    for record in records:
        if record.id not in acked:
            log.warning("ack of job %s on %s refused: claim lost", record.id, queue)


async def retry_failed(job: Job, error: Exception) -> None:
    """Retry a job whose handler raised (or bury it, out of attempts), and
    say so: a retry at WARNING, a burial at ERROR, each with the job, its
    attempt and the error."""
    record = job._record
    # The retry plan decides the same way, from the same counts, while owned.
    burial = retry_decision(record.attempts, record.max_attempts)
    owned = await _guard(job.retry(error=error), "retry")
    if owned is False:
        # Counted (and said) by the refusal's check: cancelled, or lost.
        log.info("job %s on %s raised on attempt %d, no longer this worker's: not retried",
                 job.id, job.queue, record.attempts, exc_info=error)  # fmt: skip
    elif owned and burial is not None:
        log.error("job %s on %s moved to dead letters (%s) after attempt %d of %d: %s",
                  job.id, job.queue, burial, record.attempts, record.max_attempts,
                  error_text(error), exc_info=error)  # fmt: skip
    elif owned:
        log.warning("job %s on %s failed on attempt %d of %d, retrying: %s",
                    job.id, job.queue, record.attempts, record.max_attempts, error_text(error),
                    exc_info=error)  # fmt: skip


class _WorkerJob(Job):
    """The ``Job`` a handler receives: it notes when the handler settles the
    job itself, so the worker neither settles it again nor takes the end of
    its heartbeats for a lost claim; and a heartbeat of the handler's own
    moves the worker's next renewal."""

    # ``_trace``: what the worker's telemetry keeps of the job (its claim's
    # and its run's span contexts); set only when the store is instrumented.
    __slots__ = ("_revoked", "_settled", "_trace", "_worker")

    def __init__(self, worker: _Worker, record: JobRecord) -> None:
        super().__init__(worker.queue, record)
        self._worker = worker
        self._settled: SelfSettled | None = None
        # Cancelled in the database while its handler ran (``Queue.cancel``):
        # the handler was cancelled, and the job is counted as such.
        self._revoked = False

    def _extended(self, until_us: int) -> None:
        """The claim now lasts until ``until_us`` (a renewal succeeded)."""
        self._set_claim_expiry(until_us)
        self._worker.leases.renewed(self.id, until_us)

    async def heartbeat(self, extend: Duration | None = None) -> bool:
        ok = await super().heartbeat(extend)
        if ok:
            self._worker.leases.renewed(self.id, self._record.claim_expires_at_us)
            self._worker.keeper_kick.set()  # a short extension may be due before its wait ends
        return ok

    async def ack(self) -> bool:
        self._settled = self._settled or SelfSettled.ACK
        acked = await super().ack()
        if acked:
            self._count("acked")
        else:
            await self._refused("ack")
        return acked

    async def retry(
        self, delay: Duration | None = None, error: BaseException | str | None = None
    ) -> bool:
        self._settled = self._settled or SelfSettled.RETRY
        record = self._record
        retried = await super().retry(delay, error)
        if not retried:
            await self._refused("retry")
        elif retry_decision(record.attempts, record.max_attempts) is None:
            self._count("retried")
        else:
            self._count("dead")
        return retried

    async def fail(self, error: BaseException | str | None = None) -> bool:
        self._settled = self._settled or SelfSettled.FAIL
        failed = await super().fail(error)
        if failed:
            log.error("job %s on %s moved to dead letters (failed) by its handler: %s",
                      self.id, self.queue, error_text(error))  # fmt: skip
            self._count("dead")
        else:
            await self._refused("fail")
        return failed

    async def release(self, *, refund: bool = True) -> bool:
        self._settled = self._settled or SelfSettled.RELEASE
        released = await super().release(refund=refund)
        if released:
            self._count("handed_back")
        else:
            await self._refused("release")
        return released

    def _count(self, outcome: Settled) -> None:
        self._worker.tally.settled(outcome)

    async def _refused(self, what: str) -> None:
        """This claim no longer owned the job: cancelled by request while
        its handler ran (counted so), or lost; one read, only on a refusal."""
        await self._worker._count_refused([self], what)


def _capture(plan: Plan[ClaimResult], seen: list[ClaimResult]) -> Plan[ClaimResult]:
    """The same plan, also leaving its result in ``seen`` as it finishes."""
    result = yield from plan
    seen.append(result)
    return result


async def _hand_back(queue: Queue, jobs: Sequence[Job]) -> int:
    """Shutdown: release unfinished jobs, due now, attempts refunded; how
    many were released (0 when the round trip failed)."""
    store = queue._store
    plan = release_all(store._dialect, [j._record for j in jobs], store._origin, store._now_us())
    try:
        count: int = await store._run(plan)
    except AlkstoreError:
        log.exception("worker could not hand back %d job(s); they return after their claims lapse",
                      len(jobs))  # fmt: skip
        return 0
    log.debug("handed back %d of %d job(s) on %s", count, len(jobs), queue.name)
    return count


async def _guard(awaitable: Awaitable[Any], what: str) -> Any:
    """A worker outlives a failed round trip: log it; the job's claim will
    lapse and it will be claimed again. A closed store ends the worker."""
    try:
        return await awaitable
    except Closed:
        raise
    except AlkstoreError:
        log.exception("worker %s failed", what)
        return None


class _Kick:
    """Tells the claim loop to look again: a wake came, or a job finished.

    Kicks coalesce; the policy, not the kick, says what to do.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._signal: Signal = runtime.signal()

    def set(self) -> None:
        self._signal.set()

    async def wait(self, timeout: float | None) -> None:
        if not self._signal.is_set():
            await self._runtime.wait_signal(self._signal, timeout)
        if self._signal.is_set():
            self._signal = self._runtime.signal()


__all__ = ["default_worker_id", "run_worker"]
