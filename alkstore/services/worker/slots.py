"""The worker's slots: ``concurrency`` handler tasks, started once, each
running the handler on the job it takes next (no task, nursery or timer per
job). A slot's cancel scope stops the job whose claim lapsed or was
cancelled; a fresh scope serves the next one."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from ...api.core.telemetry import Trace
from ...protocol.values import codec
from ...protocol.values.outcomes import Outcome
from .context import WorkerContext
from .settler import Settler
from .state import Held

J = TypeVar("J")

log = logging.getLogger("alkstore.worker")

Handler = Callable[[J], Awaitable[Any]]


class Slot(Generic[J]):
    """One slot, and the job it runs."""

    __slots__ = ("held", "scope", "stopping")

    def __init__(self) -> None:
        self.held: Held[J] | None = None
        self.scope: Any = None
        # Its scope was cancelled (``stop``): the next job needs a fresh one.
        self.stopping = False

    def stop(self) -> None:
        self.stopping = True
        self.scope.cancel()


class Slots(Generic[J]):
    def __init__(self, ctx: WorkerContext[J], handler: Handler[J], settler: Settler[J]) -> None:
        self.ctx = ctx
        self.handler = handler
        self.settler = settler

    # -- what comes in ---------------------------------------------------------------
    def dispatch(self, held: Held[J]) -> None:
        """A job the claim just took: held, leased, waiting for a slot."""
        ctx = self.ctx
        ctx.state.held[held.id] = held
        held.trace = ctx.telemetry.dispatched(held.record)
        # No kick for the keeper: it never sleeps longer than one renewal
        # interval (or claim term), and a lease taken now is first due a whole
        # interval (or term) on.
        ctx.leases.hold(held.id, held.record.claim_expires_at_us)
        ctx.state.ready.append(held)

    # -- running -------------------------------------------------------------------------
    async def run(self) -> None:
        """One slot's task: the jobs as they come, until cancelled."""
        await self._serve(wait=True)

    async def run_ready(self) -> None:
        """The jobs waiting now, one after another, in the calling task (an
        outbox's ``run_once``: a cancellation of the caller lands between
        two of them, as it would in a loop of the caller's own)."""
        await self._serve(wait=False)

    async def _serve(self, *, wait: bool) -> None:
        ctx = self.ctx
        state, runtime = ctx.state, ctx.core.runtime
        slot: Slot[J] = Slot()
        while wait or state.ready:
            # One scope for a run of jobs, not one per job: cancelling it
            # stops the job whose claim lapsed; a fresh one serves the next.
            with runtime.cancel_scope() as scope:
                slot.scope, slot.stopping = scope, False
                await self._run_jobs(slot, wait)
            held, slot.held = slot.held, None
            if held is not None:
                self._forget(held)
                if held.revoked:
                    log.info("job %s on %s cancelled while running: handler cancelled",
                             held.id, ctx.queue)  # fmt: skip
                    state.tally.left(Outcome.CANCELLED)
                else:
                    # Stopped because its claim lapsed: someone else may own it.
                    log.warning("job %s on %s lost its claim while running; not settled",
                                held.id, ctx.queue)  # fmt: skip
                    state.tally.left(Outcome.LOST)
                ctx.policy.finished(Outcome.LOST)
                if ctx.policy.draining:
                    state.claim_kick.set()  # the drain may be waiting for this one alone

    async def _run_jobs(self, slot: Slot[J], wait: bool) -> None:
        ctx = self.ctx
        state, runtime = ctx.state, ctx.core.runtime
        ready = state.ready
        while True:
            if not ready and not wait:
                return
            while not ready:
                await state.work_kick.wait(None)
            held = ready.popleft()
            slot.held = held
            state.running[held.id] = slot
            state.tally.started += 1
            if ctx.policy.started():
                state.claim_kick.set()  # running low: time to claim more
            # A job taken as shutdown began goes back without running.
            await runtime.cancel_point()
            await self._run_job(slot, held)
            if ready:
                state.work_kick.set()  # more for the other slots too
            if slot.stopping:
                # Its handler ended on its own though its scope was cancelled
                # (it swallowed the cancellation): a fresh scope for the next.
                return

    async def _run_job(self, slot: Slot[J], held: Held[J]) -> None:
        ctx = self.ctx
        error: Exception | None = None

        async def run(trace: Trace) -> None:
            held.trace = trace
            returned = await self.handler(held.job)
            if returned is not None:
                # Encoded here, as the handler's own act: a value the codec
                # refuses fails the attempt (retried) rather than the ack.
                held.result = codec.encode(returned)

        try:
            await ctx.telemetry.process(held.record, held.trace, run)
        except Exception as exc:
            error = exc
        # The handler is done (returned or raised, not cancelled): from here
        # the job is settled whatever happens, shutdown included.
        slot.held = None
        ctx.state.running.pop(held.id, None)
        ctx.leases.drop(held.id)
        self._finished(held, error)
        ctx.state.claim_kick.set()

    def _finished(self, held: Held[J], error: Exception | None) -> None:
        ctx = self.ctx
        state, policy, now = ctx.state, ctx.policy, ctx.core.now_us()
        if held.revoked and held.self_settled is None:
            # Cancelled in the database and told so, but the handler ended
            # on its own (it swallowed the cancellation, or finished inside
            # a shield): nothing to settle, the job is gone.
            log.info("job %s on %s cancelled while running; its handler %s", held.id,
                     ctx.queue, "returned" if error is None else "raised")  # fmt: skip
            state.held.pop(held.id, None)
            state.tally.left(Outcome.CANCELLED)
            policy.finished(Outcome.LOST, now)
            return
        if held.self_settled is not None:
            if error is not None:
                log.warning("job %s on %s raised after its handler settled it (%s)", held.id,
                            ctx.queue, held.self_settled, exc_info=error)  # fmt: skip
            state.held.pop(held.id, None)
            # A retry of its own is looked for once due; anything else frees the slot.
            retried = held.self_settled == "retry"
            policy.finished(Outcome.RETRIED if retried else Outcome.ACKED, now)
            return
        self.settler.finished(held, error)
        # The slot is free now; a retried job is looked for once its retry
        # has committed (the settler says so).
        policy.finished(Outcome.ACKED, now)

    def _forget(self, held: Held[J]) -> None:
        self.ctx.state.forget(held.id)
        self.ctx.leases.drop(held.id)

    # -- stopping what no longer is ours -------------------------------------------------
    def stop(self, job_id: int) -> None:
        """Stop the handler of a job whose claim is gone (or, if it had not
        started, drop it)."""
        ctx = self.ctx
        state = ctx.state
        ctx.leases.drop(job_id)
        waiting = state.held.get(job_id)
        if waiting is not None and waiting in state.ready:
            state.ready.remove(waiting)
            state.held.pop(job_id, None)
            state.tally.left(Outcome.LOST)
            ctx.policy.dropped()
            log.warning("job %s on %s lost its claim before it started; not run",
                        job_id, ctx.queue)  # fmt: skip
            return
        slot: Slot[J] | None = state.running.get(job_id)
        held = None if slot is None else slot.held
        if slot is not None and held is not None and held.id == job_id and not held.self_settled:
            slot.stop()

    def revoke(self, job_id: int) -> None:
        """Job ``job_id`` was cancelled: drop it if it waits for a slot, or
        cancel its handler if one runs it and has not settled it. A job that
        finished meanwhile is left to its settlement (whose ack is refused
        and counted as a cancellation then)."""
        ctx = self.ctx
        state = ctx.state
        held = state.held.get(job_id)
        if held is None:
            return
        if held in state.ready:
            state.ready.remove(held)
            state.held.pop(job_id, None)
            ctx.leases.drop(job_id)
            state.tally.left(Outcome.CANCELLED)
            ctx.policy.dropped()
            state.claim_kick.set()  # a slot freed: claim another
            log.info("job %s on %s cancelled before it started; not run", job_id,
                     ctx.queue)  # fmt: skip
            return
        slot: Slot[J] | None = state.running.get(job_id)
        if slot is not None and slot.held is held and not held.self_settled and not held.revoked:
            held.revoked = True
            ctx.leases.drop(job_id)
            slot.stop()

    def unsettled_ids(self) -> list[int]:
        """The jobs held whose handlers have not settled them: waiting, or running."""
        state = self.ctx.state
        ids = [held.id for held in state.ready]
        ids += [job_id for job_id, slot in state.running.items()
                if slot.held is not None and slot.held.self_settled is None]  # fmt: skip
        return ids
