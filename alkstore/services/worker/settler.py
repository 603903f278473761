"""The worker's settler: acks the jobs whose handlers returned, in one
statement per round (ownership checked per job), retries those whose
handlers raised (or buries them, out of attempts: the retry plan's
verdict), and hands back unfinished ones at shutdown. Settling is shielded,
bounded by the claims, so a finished job is settled even while the worker
stops."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Generic, TypeVar

from ...api.core.ops import INLINE_MAX, error_text, error_trace
from ...protocol.machines.worker import settle_bound
from ...protocol.plans.claim import ack_many, retry
from ...protocol.plans.queues import cancelled_among
from ...protocol.plans.worker import release_all
from ...protocol.values.errors import AlkstoreError, Closed
from ...protocol.values.outcomes import Outcome
from .context import WorkerContext, guard
from .state import Held

J = TypeVar("J")

log = logging.getLogger("alkstore.worker")


class Settler(Generic[J]):
    def __init__(self, ctx: WorkerContext[J]) -> None:
        self.ctx = ctx
        # Finished jobs waiting to be settled, by what to do.
        self._to_ack: list[Held[J]] = []
        self._to_retry: list[tuple[Held[J], Exception]] = []

    def finished(self, held: Held[J], error: Exception | None) -> None:
        """A handler returned (``error`` None: ack) or raised (retry)."""
        if error is None:
            self._to_ack.append(held)
        else:
            self._to_retry.append((held, error))
        self.ctx.state.settle_kick.set()

    async def run(self) -> None:
        while True:
            await self.ctx.state.settle_kick.wait(None)
            await self.settle_all()

    async def settle_all(self) -> None:
        """Ack what finished, in one statement per round, and retry what
        failed; shielded (bounded by the claims), so a finished job is
        settled even when shutdown starts meanwhile."""
        ctx = self.ctx
        state, core = ctx.state, ctx.core
        while self._to_ack or self._to_retry:
            acks, self._to_ack = self._to_ack, []
            retries, self._to_retry = self._to_retry, []
            records = [h.record for h in acks] + [h.record for h, _ in retries]
            bound = settle_bound(core.now_us(), records)
            with core.runtime.shield(bound) as scope:
                if acks:
                    await self._ack(acks)
                for held, error in retries:
                    await self._retry(held, error)
                    state.held.pop(held.id, None)
                if retries:
                    ctx.policy.retried()
                    state.claim_kick.set()
            if scope.cancelled_caught:
                log.warning("settling %d job(s) on %s: no answer within %.1f s, while their "
                            "claims lasted; outcome unknown, each is delivered again unless "
                            "it committed", len(records), ctx.queue, bound)  # fmt: skip
                for held in acks:
                    state.held.pop(held.id, None)
                for held, _ in retries:
                    state.held.pop(held.id, None)

    async def _ack(self, jobs: list[Held[J]]) -> set[int] | None:
        """Ack ``jobs`` in one statement; count what it acked; the ids acked
        (None: no answer)."""
        ctx = self.ctx
        core, state = ctx.core, ctx.state
        results = {h.id: h.result for h in jobs if h.result is not None}
        # A kept job's finish records its run's trace context, for its
        # dependents' runs to point at (an instrumented store only).
        headers = {
            h.id: header for h in jobs
            if (h.record.kept or h.result is not None)
            and (header := ctx.telemetry.finish_headers(h.trace)) is not None
        }  # fmt: skip
        plan = ack_many(core.dialect, ctx.worker_id, [h.record for h in jobs], core.now_us(),
                        origin=core.origin, results=results, headers=headers)  # fmt: skip
        run = core.run(plan, bulk=len(jobs) > INLINE_MAX)
        acked: set[int] | None = await guard(
            ctx.telemetry.acked([(h.record, h.trace) for h in jobs], run), "ack"
        )
        for held in jobs:
            state.held.pop(held.id, None)
        if acked is not None:
            state.tally.left(Outcome.ACKED, len(acked))
            if len(acked) < len(jobs):
                await self.count_refused([h for h in jobs if h.id not in acked])
        return acked

    async def _retry(self, held: Held[J], error: Exception) -> None:
        """Retry a job whose handler raised (or bury it, out of attempts),
        and say so: a retry at WARNING, a burial at ERROR, each with the
        job, its attempt and the error."""
        ctx = self.ctx
        core, record = ctx.core, held.record
        plan = retry(
            core.dialect, record, core.now_us(), delay_us=None, backoff=ctx.options.backoff,
            draw=core.draw(), error=error_text(error), origin=core.origin,
            trace=error_trace(error), started_us=held.started_us,
        )  # fmt: skip
        try:
            outcome = await core.telemetry.settle("retry", record, held.trace, core.run(plan))
        except Closed:
            raise
        except AlkstoreError:
            log.exception("worker retry failed")  # the claim lapses, the job comes back
            return
        if outcome is None:
            # Counted (and said) by the refusal's check: cancelled, or lost.
            await self.count_refused([held], "retry")
            log.info("job %s on %s raised on attempt %d, no longer this worker's: not retried",
                     record.id, record.queue, record.attempts, exc_info=error)  # fmt: skip
            return
        self.ctx.state.tally.left(outcome)
        if outcome is Outcome.DEAD:
            log.error("job %s on %s moved to dead letters (max_attempts) after attempt %d of "
                      "%d: %s", record.id, record.queue, record.attempts, record.max_attempts,
                      error_text(error), exc_info=error)  # fmt: skip
        else:
            log.warning("job %s on %s failed on attempt %d of %d, retrying: %s",
                        record.id, record.queue, record.attempts, record.max_attempts,
                        error_text(error), exc_info=error)  # fmt: skip

    async def count_refused(self, jobs: Sequence[Held[J]], what: str = "ack") -> None:
        """Jobs whose settling (``what``) was refused: cancelled while their
        handler was finishing (cancelled by request), or their claim was
        lost; each counted once. Off the hot path: only after a refusal."""
        ctx = self.ctx
        core, tally = ctx.core, ctx.state.tally
        plan = cancelled_among(core.dialect, ctx.queue, [h.id for h in jobs])
        gone = await guard(core.run(plan), "cancel check")
        cancelled = set(gone or ())
        tally.left(Outcome.CANCELLED, len(cancelled))
        tally.left(Outcome.LOST, len(jobs) - len(cancelled))
        for held in jobs:
            if held.id in cancelled:
                log.info("job %s on %s was cancelled as its handler finished: no %s",
                         held.id, ctx.queue, what)  # fmt: skip
            else:
                log.warning("%s of job %s on %s refused: claim lost", what, held.id,
                            ctx.queue)  # fmt: skip

    async def hand_back(self, jobs: Sequence[Held[J]], *, counted: bool = True) -> None:
        """Release unfinished jobs, due now, attempts refunded, shielded but
        no longer than their claims last; count what was released (unless
        they were never held: a claim whose outcome is unknown)."""
        ctx = self.ctx
        core = ctx.core
        bound = settle_bound(core.now_us(), [h.record for h in jobs])
        with core.runtime.shield(bound) as scope:
            plan = release_all(core.dialect, [h.record for h in jobs], core.origin, core.now_us())
            try:
                count: int = await core.run(plan)
            except AlkstoreError:
                log.exception("worker could not hand back %d job(s); they return after their "
                              "claims lapse", len(jobs))  # fmt: skip
                count = 0
            else:
                log.debug("handed back %d of %d job(s) on %s", count, len(jobs), ctx.queue)
            if counted:
                ctx.state.tally.left(Outcome.HANDED_BACK, count)
        if scope.cancelled_caught:
            log.warning("worker could not hand back %d job(s) within %.1f s; they return "
                        "after their claims lapse", len(jobs), bound)  # fmt: skip
