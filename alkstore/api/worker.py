"""The worker runtime behind ``Queue.work``.

Claims in batches when woken, runs the handler with bounded concurrency, acks
on return, retries with backoff on exception, heartbeats long jobs, and on
cancellation hands back at once whatever it has not finished.

Every decision (when to claim, how many, how long to sleep, when to sweep,
when to heartbeat, when a claim is lost) is taken by the pure state machines
in ``alkstore/protocol/worker.py``; this module only performs them, through
the ``Runtime`` seam, so it serves every driver.

Wakes: enqueues notify the queue's internal channel; local commits wake the
worker directly and the engine's wake source (the SQLite watcher, Postgres
LISTEN) carries commits from other processes. Without a wake the worker still
looks when the next job falls due (read with each short claim), at every
``poll_interval`` as a backstop, and whenever one of its own jobs finishes.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..protocol.claim import retry_decision
from ..protocol.errors import AlkstoreError, Closed, CommitUnknown, InvalidArgument, brief
from ..protocol.names import queue_channel
from ..protocol.plan import Plan
from ..protocol.timeconv import US_PER_S, Duration
from ..protocol.types import JobRecord
from ..protocol.worker import (
    Beat,
    Claim,
    ClaimResult,
    Keepalive,
    Outcome,
    Sweep,
    WorkerPolicy,
    check_worker_id,
    claim_for_worker,
    release_all,
    settle_bound,
)
from ..runner.runtime import Runtime, Signal
from .queue import Job, error_text

if TYPE_CHECKING:
    from .queue import Queue
    from .wakes import WakeReceiver

log = logging.getLogger("alkstore.worker")

Handler = Callable[[Job], Awaitable[Any]]


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
    task_status: Any,
) -> None:
    check_handler(handler)
    store = queue.store
    runtime = store.runtime
    vt = queue.options.visibility_timeout_us
    policy = WorkerPolicy.configure(
        concurrency=concurrency, visibility_timeout_us=vt, poll_interval=poll_interval,
        sweep_interval=sweep_interval, heartbeat_interval=heartbeat_interval,
    )  # fmt: skip
    wid = check_worker_id(worker_id) or default_worker_id()
    kick = _Kick(runtime)
    # Claimed and not yet settled: what a stopping worker must hand back.
    held: dict[int, _WorkerJob] = {}

    async def forward_wakes(wakes: WakeReceiver) -> None:
        while await wakes.recv() is not None:
            policy.woke()
            kick.set()
        # The wake source closed (store closing, watcher gone): the worker
        # carries on with next-due sleeps and the poll backstop.
        log.debug("worker %s: wake source for %s closed", wid, queue.name)

    async def run_one(job: _WorkerJob) -> None:
        outcome = Outcome.RELEASED

        def report(how: Outcome) -> None:
            nonlocal outcome
            outcome = how
            held.pop(job.id, None)  # not ours to hand back any more

        try:
            # A job whose task starts after shutdown began is handed back
            # without ever reaching the handler.
            await runtime.checkpoint()
            await _run_job(queue, job, handler, policy.heartbeat_interval_us, report)
        finally:
            policy.finished(outcome)
            kick.set()

    try:
        async with (
            store.subscribe_channel(queue_channel(queue.name)) as wakes,
            runtime.task_group() as group,
        ):
            group.start_soon(forward_wakes, wakes)
            if task_status is not None:
                task_status.started()
            while True:
                now = store.now_us()
                action = policy.next_action(now)
                if isinstance(action, Sweep):
                    await _guard(queue.sweep_expired(), "sweep")
                    policy.swept(store.now_us())
                elif isinstance(action, Claim):
                    seen: list[ClaimResult] = []
                    plan = _capture(
                        claim_for_worker(store.dialect, queue.name, wid, action.n, now, vt), seen
                    )
                    try:
                        result = await store.run(plan)
                    except Closed:
                        raise
                    except CommitUnknown:
                        # The claim may have committed: hand back what it
                        # would have taken (refused harmlessly if it did not),
                        # rather than leave it claimed by nobody until the
                        # visibility timeout.
                        log.warning("worker %s: claim on %s: outcome unknown; handing back",
                                    wid, queue.name, exc_info=True)  # fmt: skip
                        taken = [_WorkerJob(queue, r) for got in seen for r in got.jobs]
                        if taken:
                            held.update((j.id, j) for j in taken)  # if cancelled meanwhile
                            await _hand_back(queue, taken)
                            for j in taken:
                                held.pop(j.id, None)
                        policy.claim_failed(store.now_us())
                        continue
                    except AlkstoreError:
                        log.exception("worker %s: claim on %s failed", wid, queue.name)
                        policy.claim_failed(store.now_us())
                        continue
                    except BaseException:
                        # Cancelled while the claim ran. Drivers report a
                        # claim that committed as returned, but be sure: what
                        # it took is ours to hand back.
                        for got in seen:
                            held.update((r.id, _WorkerJob(queue, r)) for r in got.jobs)
                        raise
                    # No checkpoint between the claim's return and here:
                    # every claimed job is in ``held`` before anything
                    # can cancel us.
                    jobs = [_WorkerJob(queue, record) for record in result.jobs]
                    for job in jobs:
                        held[job.id] = job
                    policy.claimed(now, len(jobs), action.n, result.next_due_us)
                    for job in jobs:
                        group.start_soon(run_one, job)
                else:
                    await kick.wait(max(0, action.until_us - store.now_us()) / US_PER_S)
    finally:
        if held:
            jobs = list(held.values())
            bound = settle_bound(store.now_us(), [j.record for j in jobs])
            with runtime.shield(bound) as scope:
                await _hand_back(queue, jobs)
            if scope.cancelled_caught:
                log.warning("worker could not hand back %d job(s) within %.1f s; they return "
                            "after their claims lapse", len(jobs), bound)  # fmt: skip


async def _run_job(
    queue: Queue,
    job: _WorkerJob,
    handler: Handler,
    heartbeat_us: int,
    report: Callable[[Outcome], None],
) -> None:
    """Run the handler under a heartbeat; settle the job by what happened and
    ``report`` it. A job not reported is the caller's to hand back."""
    store = queue.store
    runtime = store.runtime
    keep = Keepalive.for_claim(
        heartbeat_us, queue.options.visibility_timeout_us, job.record.claim_expires_at_us
    )
    lost = False
    done = False  # the handler returned or raised (not cancelled)
    error: Exception | None = None

    async def keep_alive(scope: Any) -> None:
        nonlocal lost
        while job.settled is None:
            now = store.now_us()
            step = keep.next_action(now)
            if step is Beat.LOST:
                break
            if step is Beat.BEAT:
                try:
                    owned = await job.heartbeat()
                except Closed:
                    break
                except AlkstoreError:
                    log.warning("heartbeat of job %s on %s failed", job.id, queue.name)
                    keep.beat_failed(store.now_us())
                    continue
                if not owned:
                    break  # reclaimed, cancelled, or settled by the handler
                keep.beat_ok(job.record.claim_expires_at_us)
            else:
                await runtime.sleep(max(0, step.until_us - now) / US_PER_S)
        if job.settled is not None:
            return  # the handler settled the job itself: nothing left to keep
        # Someone else may own the job now: stop working on it.
        lost = True
        scope.cancel()

    try:
        async with runtime.task_group() as group:
            with runtime.cancel_scope() as scope:
                group.start_soon(keep_alive, scope)
                try:
                    await handler(job)
                    done = True
                except Exception as exc:
                    error = exc
                    done = True
                finally:
                    group.cancel()
    except BaseException:
        # Shutdown reached us after the handler finished (leaving the task
        # group is a checkpoint): settle anyway, or the finished work would
        # be handed back and done twice.
        if done and not lost:
            report(await _settle(queue, job, error))
        raise
    if lost:
        log.warning("job %s on %s lost its claim while running; not settled", job.id, queue.name)
        report(Outcome.LOST)
        return
    report(await _settle(queue, job, error))


async def _settle(queue: Queue, job: _WorkerJob, error: Exception | None) -> Outcome:
    """Ack a job whose handler returned, retry one whose handler raised;
    leave alone one the handler settled itself (``job.fail(...)``, say).

    Shielded: once the handler is done its outcome must be recorded even if
    shutdown starts meanwhile.
    """
    if job.settled is not None:
        if error is not None:
            log.warning("job %s on %s raised after its handler settled it (%s)", job.id,
                    queue.name, job.settled, exc_info=error)  # fmt: skip
        return Outcome.RETRIED if job.settled == "retry" else Outcome.ACKED
    store = queue.store
    bound = settle_bound(store.now_us(), [job.record])
    with store.runtime.shield(bound) as scope:
        outcome = await _settle_now(queue, job, error)
    if scope.cancelled_caught:
        # No answer while the claim lasted: shutdown is not held up. The
        # outcome is unknown (the statement may still commit); if it does
        # not, the job is delivered again once its claim lapses.
        log.warning("settling job %s on %s: no answer within %.1f s, while its claim lasted; "
                    "outcome unknown, the job is delivered again unless it commits",
                    job.id, queue.name, bound)  # fmt: skip
        return Outcome.LOST
    return outcome


async def _settle_now(queue: Queue, job: _WorkerJob, error: Exception | None) -> Outcome:
    if error is None:
        if await _guard(job.ack(), "ack") is False:
            log.warning("ack of job %s on %s refused: claim lost", job.id, queue.name)
        return Outcome.ACKED
    await retry_failed(job, error)
    return Outcome.RETRIED


async def retry_failed(job: Job, error: Exception) -> None:
    """Retry a job whose handler raised (or bury it, out of attempts), and
    say so: a retry at WARNING, a burial at ERROR, each with the job, its
    attempt and the error."""
    record = job.record
    # The retry plan decides the same way, from the same counts, while owned.
    burial = retry_decision(record.attempts, record.max_attempts)
    owned = await _guard(job.retry(error=error), "retry")
    if owned is False:
        log.warning("job %s on %s raised on attempt %d, but its claim was lost: not retried",
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
    its heartbeats for a lost claim."""

    __slots__ = ("settled",)

    def __init__(self, queue: Queue, record: JobRecord) -> None:
        super().__init__(queue, record)
        self.settled: str | None = None

    async def ack(self) -> bool:
        self.settled = self.settled or "ack"
        return await super().ack()

    async def retry(
        self, delay: Duration | None = None, error: BaseException | str | None = None
    ) -> bool:
        self.settled = self.settled or "retry"
        return await super().retry(delay, error)

    async def fail(self, error: BaseException | str | None = None) -> bool:
        self.settled = self.settled or "fail"
        failed = await super().fail(error)
        if failed:
            log.error("job %s on %s moved to dead letters (failed) by its handler: %s",
                      self.id, self.queue, error_text(error))  # fmt: skip
        return failed

    async def release(self, *, refund: bool = True) -> bool:
        self.settled = self.settled or "release"
        return await super().release(refund=refund)


def _capture(plan: Plan[ClaimResult], seen: list[ClaimResult]) -> Plan[ClaimResult]:
    """The same plan, also leaving its result in ``seen`` as it finishes."""
    result = yield from plan
    seen.append(result)
    return result


async def _hand_back(queue: Queue, jobs: Sequence[Job]) -> None:
    """Shutdown: release unfinished jobs, due now, attempts refunded."""
    store = queue.store
    plan = release_all(store.dialect, [j.record for j in jobs], store.origin, store.now_us())
    try:
        count = await store.run(plan)
    except AlkstoreError:
        log.exception("worker could not hand back %d job(s); they return after their claims lapse",
                      len(jobs))  # fmt: skip
        return
    log.debug("handed back %d of %d job(s) on %s", count, len(jobs), queue.name)


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

    async def wait(self, timeout: float) -> None:
        if not self._signal.is_set():
            await self._runtime.wait_signal(self._signal, timeout)
        if self._signal.is_set():
            self._signal = self._runtime.signal()


__all__ = ["default_worker_id", "run_worker"]
