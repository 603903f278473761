"""``Worker``: the tasks of one worker on one queue, in one task group.

- the claim loop (``claims.ClaimLoop``): claims as many jobs as there are
  idle slots (and as the claim-ahead calls for), in one statement, and hands
  each to the slots;
- ``concurrency`` slots (``slots.Slots``), started once, each running the
  handler on the job it takes;
- the keeper (``keeper.Keeper``), renewing every held claim in one round
  trip per round and stopping the handler of a claim that lapsed, and
  watching the queue's cancel channel;
- the settler (``settler.Settler``), acking in batches the jobs whose
  handlers returned, retrying those whose handlers raised.

What is held and not settled is handed back at shutdown (finished ones
acked first). A drain (``begin_drain``) turns the claim loop into handing
back and waiting; when the policy says stop, the loop returns and the task
group is cancelled (the handlers still running with it), and shutdown
proceeds as on cancellation, but ``run`` returns the report instead of
raising. The worker is also its jobs' ``JobObserver``: a handler that
settles or heartbeats its own job tells it so.
"""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

from ...api.core.handle import StoreCore
from ...api.core.telemetry import Trace
from ...api.core.wakes import WakeReceiver
from ...protocol.machines.leases import Leases
from ...protocol.machines.worker import WorkerPolicy
from ...protocol.values.names import cancel_channel, queue_channel
from ...protocol.values.outcomes import Outcome
from ...protocol.values.types import QueueOptions, WorkerReport
from .claims import ClaimLoop, MakeJob
from .context import WorkerContext
from .keeper import Keeper
from .settler import Settler
from .slots import Handler, Slots
from .state import WorkerState

J = TypeVar("J")

log = logging.getLogger("alkstore.worker")


class Worker(Generic[J]):
    def __init__(
        self,
        core: StoreCore,
        queue: str,
        options: QueueOptions,
        handler: Handler[J],
        make_job: MakeJob[J],
        policy: WorkerPolicy,
        worker_id: str,
    ) -> None:
        leases = Leases(policy.heartbeat_interval_us, options.visibility_timeout_us)
        self.ctx = ctx = WorkerContext(
            core, queue, options, worker_id, policy, leases, WorkerState[J](core.runtime),
            core.telemetry.worker(queue, worker_id),
        )  # fmt: skip
        self.settler = Settler(ctx)
        self.slots = Slots(ctx, handler, self.settler)
        self.keeper = Keeper(ctx, self.slots)
        self.claims = ClaimLoop(ctx, self.slots, self.settler, make_job, self)

    async def run(self, task_status: Any = None) -> WorkerReport:
        """Work until the policy says stop (a drain), or cancelled."""
        ctx = self.ctx
        core = ctx.core
        try:
            async with (
                core.subscribe(queue_channel(ctx.queue)) as wakes,
                core.subscribe(cancel_channel(ctx.queue)) as cancels,
                core.runtime.task_group() as group,
            ):
                group.start_soon(self._forward_wakes, wakes)
                group.start_soon(self.keeper.watch_cancels, cancels)
                group.start_soon(self.keeper.run)
                group.start_soon(self.settler.run)
                for _ in range(ctx.policy.concurrency):
                    group.start_soon(self.slots.run)
                if task_status is not None:
                    task_status.started()
                await self.claims.run(self.begin_drain)
                # Drained: stop the worker's own tasks, and the handlers still
                # running if the deadline passed (their jobs are still held).
                group.cancel()
        finally:
            await self._stop()
        if self.claims.outdated is not None:
            raise self.claims.outdated
        return ctx.state.tally.report(ctx.queue, ctx.worker_id)

    async def run_once(self, n: int) -> WorkerReport:
        """One claim of up to ``n``, its jobs run one after another in the
        calling task, then settled (an outbox's ``run_once``). The keeper
        renews the claims meanwhile; nothing listens for wakes."""
        ctx = self.ctx
        core = ctx.core
        try:
            async with core.runtime.task_group() as group:
                group.start_soon(self.keeper.run)
                await self.claims.claim(n, core.now_us(), self.begin_drain, once=True)
                await self.slots.run_ready()
                await self.settler.settle_all()
                group.cancel()
        finally:
            await self._stop()
        return ctx.state.tally.report(ctx.queue, ctx.worker_id)

    async def _stop(self) -> None:
        ctx = self.ctx
        # Handlers cancelled by the stop never left ``running``.
        ctx.state.tally.cancelled = len(ctx.state.running)
        try:
            await self._shutdown()
        finally:
            ctx.telemetry.stopped()

    # -- draining (what a ``Drain`` calls) ---------------------------------------------
    def begin_drain(self, timeout_us: int | None) -> None:
        """A drain began (or was asked again, sooner): see ``WorkerPolicy.drain``."""
        ctx = self.ctx
        first = not ctx.policy.draining
        ctx.policy.drain(ctx.core.now_us(), timeout_us)
        ctx.state.claim_kick.set()
        if first:
            log.info("worker %s on %s: draining, %d handler(s) running, %d job(s) claimed ahead "
                     "to hand back", ctx.worker_id, ctx.queue, len(ctx.state.running),
                     len(ctx.state.ready))  # fmt: skip

    def handlers_running(self) -> int:
        return len(self.ctx.state.running)

    # -- what the handlers' jobs say (``JobObserver``) ---------------------------------
    def trace(self, job_id: int) -> Trace:
        held = self.ctx.state.held.get(job_id)
        return None if held is None else held.trace

    def claim_expires_us(self, job_id: int) -> int:
        held = self.ctx.state.held.get(job_id)
        return 0 if held is None else held.record.claim_expires_at_us

    def settling(self, job_id: int, operation: str) -> None:
        held = self.ctx.state.held.get(job_id)
        if held is not None and held.self_settled is None:
            held.self_settled = operation

    async def settled(
        self, job_id: int, operation: str, outcome: Outcome | None, error: str | None
    ) -> None:
        ctx = self.ctx
        held = ctx.state.held.get(job_id)
        if outcome is None:
            # This claim no longer owned the job: cancelled by request while
            # its handler ran (counted so), or lost; one read, only on a refusal.
            if held is not None:
                await self.settler.count_refused([held], operation)
            return
        ctx.state.tally.left(outcome)
        if operation == "fail":
            log.error("job %s on %s moved to dead letters (failed) by its handler: %s",
                      job_id, ctx.queue, error)  # fmt: skip

    def heartbeated(self, job_id: int, until_us: int) -> None:
        ctx = self.ctx
        held = ctx.state.held.get(job_id)
        if held is not None:
            held.extended(until_us)
        ctx.leases.renewed(job_id, until_us)
        ctx.state.keeper_kick.set()  # a short extension may be due before its wait ends

    # -- wakes and shutdown ----------------------------------------------------------
    async def _forward_wakes(self, wakes: WakeReceiver) -> None:
        ctx = self.ctx
        while await wakes.recv() is not None:
            ctx.policy.woke()
            ctx.state.claim_kick.set()
        # The wake source closed (store closing, watcher gone): the worker
        # carries on with next-due sleeps and the poll backstop.
        log.debug("worker %s: wake source for %s closed", ctx.worker_id, ctx.queue)

    async def _shutdown(self) -> None:
        # Finished jobs first (their handlers returned: ack them), then hand
        # back the rest, unfinished.
        await self.settler.settle_all()
        held = list(self.ctx.state.held.values())
        if held:
            await self.settler.hand_back(held)
