"""The worker's claim loop: performs what ``WorkerPolicy`` says (sweep,
claim as many jobs as there are idle slots and as the claim-ahead calls
for, in one statement, wait for a kick; while draining, hand back what
waits for a slot, then stop), and makes a held job of each claimed row."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from ...api.core.observer import JobObserver
from ...api.core.ops import INLINE_MAX
from ...protocol.machines.leases import Wait
from ...protocol.machines.worker import Claim, HandBack, Sweep
from ...protocol.plan import Plan
from ...protocol.plans.worker import ClaimResult, claim_at_once, claim_for_worker
from ...protocol.values.errors import AlkstoreError, ClaimRulesChanged, Closed, CommitUnknown
from ...protocol.values.timeconv import US_PER_S
from ...protocol.values.types import JobRecord
from ..sweeping import sweep_queue
from .context import WorkerContext, guard
from .settler import Settler
from .slots import Slots
from .state import Held

J = TypeVar("J")
R = TypeVar("R", ClaimResult, ClaimResult | None)

log = logging.getLogger("alkstore.worker")

# What the handler is given for a claimed job (``Queue.work`` makes ``Job``s).
MakeJob = Callable[[JobRecord, JobObserver], J]


class ClaimLoop(Generic[J]):
    def __init__(
        self,
        ctx: WorkerContext[J],
        slots: Slots[J],
        settler: Settler[J],
        make_job: MakeJob[J],
        observer: JobObserver,
    ) -> None:
        self.ctx = ctx
        self.slots = slots
        self.settler = settler
        self.make_job = make_job
        self.observer = observer
        # The queue was limited at the last step-by-step claim: claim it step
        # by step (the one-statement claim takes nothing from a limited queue).
        self.limited = False
        # Set when the store's claim rules turned out newer than this code's:
        # the worker drains, then raises it instead of reporting.
        self.outdated: ClaimRulesChanged | None = None

    def held(self, record: JobRecord) -> Held[J]:
        return Held(record, self.make_job(record, self.observer),
                    started_us=self.ctx.core.now_us())  # fmt: skip

    async def run(self, begin_drain: Callable[[int | None], None]) -> bool:
        """Until the policy says stop; True when handlers still running must
        be cancelled (the drain's deadline passed)."""
        ctx = self.ctx
        core, policy, state = ctx.core, ctx.policy, ctx.state
        while True:
            now = core.now_us()
            action = policy.next_action(now)
            if isinstance(action, Sweep):
                await guard(sweep_queue(core, ctx.queue), "sweep")
                policy.swept(core.now_us())
            elif isinstance(action, Claim):
                await self.claim(action.n, now, begin_drain)
            elif isinstance(action, Wait):
                await state.claim_kick.wait(max(0, action.until_us - core.now_us()) / US_PER_S)
            elif isinstance(action, HandBack):
                await self._hand_back_waiting()
            else:
                self._stopped(action.cancel)
                return action.cancel

    async def claim(
        self, n: int, now: int, begin_drain: Callable[[int | None], None], *, once: bool = False
    ) -> None:
        """One claim of up to ``n``, its jobs held and handed to the slots.
        ``once``: the only claim (an outbox's ``run_once``), whose failure is
        the caller's to hear rather than a reason to back off and retry."""
        ctx = self.ctx
        core, policy, state = ctx.core, ctx.policy, ctx.state
        seen: list[ClaimResult | None] = []
        try:
            result = await ctx.telemetry.claimed(n, now, self._claim(n, now, seen))
        except Closed:
            raise
        except CommitUnknown:
            # The claim may have committed: hand back what it would have
            # taken (refused harmlessly if it did not), rather than leave it
            # claimed by nobody until the visibility timeout. Known only
            # when its rows came back before the COMMIT went out: a claim
            # in one statement carries its COMMIT, and what it took waits
            # out the visibility timeout.
            log.warning("worker %s: claim on %s: outcome unknown; handing back",
                        ctx.worker_id, ctx.queue, exc_info=True)  # fmt: skip
            taken = [self.held(r) for got in seen if got for r in got.jobs]
            if taken:
                state.held.update((h.id, h) for h in taken)  # if cancelled meanwhile
                await self.settler.hand_back(taken, counted=False)
                for h in taken:
                    state.held.pop(h.id, None)
            if once:
                raise
            policy.claim_failed(core.now_us())
            return
        except ClaimRulesChanged as exc:
            if once:
                raise
            # A newer release opened the store: its claim rules are not ours
            # to apply. Claim nothing more; what runs finishes.
            if self.outdated is None:
                log.error("worker %s on %s: stops claiming: the store's claim generation is "
                          "%d, this alkstore's %d (a newer release opened the store); %d "
                          "running handler(s) finish first", ctx.worker_id, ctx.queue,
                          exc.found, exc.expected, len(state.running))  # fmt: skip
                self.outdated = exc
            begin_drain(None)
            return
        except AlkstoreError:
            if once:
                raise
            log.exception("worker %s: claim on %s failed", ctx.worker_id, ctx.queue)
            policy.claim_failed(core.now_us())
            return
        except BaseException:
            # Cancelled while the claim ran. Drivers report a claim that
            # committed as returned, but be sure: what it took is ours to
            # hand back.
            for got in seen:
                if got:
                    state.held.update((r.id, self.held(r)) for r in got.jobs)
            raise
        # No checkpoint between the claim's return and here: every claimed
        # job is held before anything can cancel us.
        policy.claimed(now, len(result.jobs), n, result.next_due_us, core.now_us())
        for record in result.jobs:
            self.slots.dispatch(self.held(record))
        if result.jobs:
            state.work_kick.set()

    async def _claim(self, n: int, now: int, seen: list[ClaimResult | None]) -> ClaimResult:
        """One claim: in one statement where the engine has it, unless the
        queue was limited last time; step by step when that took nothing
        (and to learn whether the queue is limited)."""
        ctx = self.ctx
        core, vt, bulk = ctx.core, ctx.options.visibility_timeout_us, n > INLINE_MAX
        at_once = claim_at_once(core.dialect, ctx.queue, ctx.worker_id, n, now, vt,
                                limited=self.limited)  # fmt: skip
        if at_once is not None:
            got = await core.run(_capture(at_once, seen), bulk=bulk)
            if got is not None:
                return got
        plan = claim_for_worker(core.dialect, ctx.queue, ctx.worker_id, n, now, vt)
        result = await core.run(_capture(plan, seen), bulk=bulk)
        self.limited = result.limited
        return result

    async def _hand_back_waiting(self) -> None:
        """Draining: hand back the jobs claimed ahead that no slot has taken."""
        ctx = self.ctx
        state = ctx.state
        jobs = list(state.ready)
        state.ready.clear()
        ctx.policy.dropped(len(jobs))
        for held in jobs:
            ctx.leases.drop(held.id)
        await self.settler.hand_back(jobs)
        # Handed back, or left to lapse if that failed: either way not ours.
        for held in jobs:
            state.held.pop(held.id, None)

    def _stopped(self, cancel: bool) -> None:
        ctx = self.ctx
        # A slot already woken could still take a waiting job before the
        # group's cancellation reaches it: the stop's hand-back takes them.
        ctx.state.ready.clear()
        if cancel:
            log.warning("worker %s on %s: drain over with %d handler(s) still running: "
                        "cancelling them, their jobs are handed back", ctx.worker_id,
                        ctx.queue, len(ctx.state.running))  # fmt: skip
        else:
            log.info("worker %s on %s: drained", ctx.worker_id, ctx.queue)


def _capture(plan: Plan[R], seen: list[ClaimResult | None]) -> Plan[R]:
    """The same plan, also leaving its result in ``seen`` as it finishes."""
    result = yield from plan
    seen.append(result)
    return result
