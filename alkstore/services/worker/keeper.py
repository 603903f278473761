"""The worker's keeper: renews every held claim in one round trip per round
(as ``Leases`` says), stops the handler of a claim that lapsed, and watches
the queue's cancel channel to stop the handlers of jobs cancelled while
held (``Queue.cancel``, here or in another process)."""

from __future__ import annotations

import logging
from typing import Generic, TypeVar

from ...api.core.wakes import WakeReceiver
from ...protocol.machines.leases import Idle, Lapsed, Wait
from ...protocol.plans.claim import heartbeat_many
from ...protocol.plans.queues import cancelled_among
from ...protocol.values.errors import AlkstoreError, Closed
from ...protocol.values.timeconv import US_PER_S
from .context import WorkerContext, guard
from .slots import Slots

J = TypeVar("J")

log = logging.getLogger("alkstore.worker")


class Keeper(Generic[J]):
    def __init__(self, ctx: WorkerContext[J], slots: Slots[J]) -> None:
        self.ctx = ctx
        self.slots = slots

    async def run(self) -> None:
        ctx = self.ctx
        core, leases, state = ctx.core, ctx.leases, ctx.state
        vt = ctx.options.visibility_timeout_us
        while True:
            now = core.now_us()
            action = leases.next_action(now)
            if isinstance(action, Idle):
                # A lease taken while this wait lasts is due (renewal or
                # expiry) no sooner than it ends: no kick needed on a claim.
                await state.keeper_kick.wait(min(leases.interval_us, leases.term_us) / US_PER_S)
            elif isinstance(action, Wait):
                await state.keeper_kick.wait(max(0, action.until_us - now) / US_PER_S)
            elif isinstance(action, Lapsed):
                for key in action.keys:
                    self.slots.stop(key)
            else:
                held = [state.held[k] for k in action.keys if k in state.held]
                plan = heartbeat_many(core.dialect, [h.record for h in held], now, vt)
                try:
                    owned = await core.run(plan)
                except Closed:
                    raise
                except AlkstoreError:
                    log.warning("heartbeat of %d job(s) on %s failed", len(held), ctx.queue,
                                exc_info=True)  # fmt: skip
                    leases.renew_failed(action.keys, core.now_us())
                    continue
                refused = []
                for job, ok in zip(held, owned, strict=True):
                    if ok:
                        job.extended(now + vt)
                        leases.renewed(job.id, now + vt)
                    elif job.id in state.running:
                        refused.append(job.id)
                if refused:
                    # Reclaimed, cancelled (a missed cancel wake), or settled
                    # meanwhile: say which, so a cancel is counted as one.
                    await self.revoke_cancelled(refused)
                    for job_id in refused:
                        self.slots.stop(job_id)

    async def watch_cancels(self, cancels: WakeReceiver) -> None:
        """On each wake of the queue's cancel channel (a job of this queue was
        cancelled, here or in another process), find which jobs this worker
        holds were, and stop them. Wakes coalesce: cancels arriving while one
        look runs lead to one more look."""
        while await cancels.recv() is not None:
            ids = self.slots.unsettled_ids()
            if ids:
                await self.revoke_cancelled(ids)

    async def revoke_cancelled(self, ids: list[int]) -> None:
        """Read which of ``ids`` were cancelled, and stop each (``Slots.revoke``)."""
        core = self.ctx.core
        gone = await guard(core.run(cancelled_among(core.dialect, self.ctx.queue, ids)),
                           "cancel check")  # fmt: skip
        for job_id in gone or ():
            self.slots.revoke(job_id)
