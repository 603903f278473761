"""The worker's own plans: a claim that also reads when the next job falls
due, and the hand-back of unfinished jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..dialect import Dialect
from ..plan import Plan, Statement, fetch_all, last
from ..rows import claimed_at_once
from ..values import generation
from ..values.names import queue_channel
from ..values.timeconv import held_until_us
from ..values.types import JobRecord
from . import claim as claim_plans
from .queues import check_limit


# -- plans -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClaimResult:
    jobs: list[JobRecord]
    # When the queue's next live job falls due; read only after a short batch.
    next_due_us: int | None
    # The queue is limited: its next claims go step by step (``claim_for_worker``).
    limited: bool = False


def claim_for_worker(
    d: Dialect, queue: str, worker: str, n: int, now_us: int, visibility_us: int
) -> Plan[ClaimResult]:
    """Claim up to ``n``; when fewer came back, read in the same transaction
    when the next job falls due, so an idle worker sleeps exactly that long.
    A job due already but held back by a rate limit falls due when the rate
    next admits a claim. That read is the plan's last statement, so on
    Postgres it goes out with the COMMIT."""
    jobs, opens, limited = yield from claim_plans.claim_jobs(
        d, queue, worker, n, now_us, visibility_us
    )
    next_due: int | None = None
    if len(jobs) < n:
        next_due = yield from claim_plans.next_due(d, queue, final=True)
        if next_due is not None and opens is not None:
            next_due = max(next_due, opens)
    return ClaimResult(jobs, next_due, limited)


def claim_at_once(
    d: Dialect,
    queue: str,
    worker: str,
    n: int,
    now_us: int,
    visibility_us: int,
    *,
    limited: bool = False,
) -> Plan[ClaimResult | None] | None:
    """``claim_for_worker`` as one statement, on an engine that has it
    (``Dialect.claim_at_once``; None elsewhere, and for a queue ``limited``
    at the last claim, which that statement takes nothing from): on
    Postgres the claim goes out with BEGIN and COMMIT, so a worker woken for
    one job starts it one round trip after the wake. The plan's None:
    nothing was claimed, which says nothing of why (no work, a limited or
    paused queue, a newer claim generation): ``claim_for_worker`` is what
    finds out (``ClaimResult.limited``)."""
    if limited:
        return None
    until = held_until_us(now_us, visibility_us)
    n = check_limit(n, "n")
    statement = d.claim_at_once(queue, worker, n, now_us, until, generation.CLAIM_GENERATION)
    return None if statement is None else _claim_at_once(d, statement)


def _claim_at_once(d: Dialect, statement: Statement) -> Plan[ClaimResult | None]:
    for prelude in d.claim_prelude():
        yield prelude
    rows = yield from fetch_all(last(statement))
    if not rows:
        return None
    claimed = [claimed_at_once(r) for r in rows]
    jobs = [job for job, _ in claimed]
    # RETURNING does not promise an order; restore the claim order.
    jobs.sort(key=claim_plans.claim_order)
    return ClaimResult(jobs, claimed[0][1])


def release_all(
    d: Dialect, jobs: Sequence[JobRecord], origin: str, now_us: int, *, refund: bool = True
) -> Plan[int]:
    """Hand back unfinished jobs, due now (``refund``: the attempt too), and
    wake the queues' workers, here and elsewhere, so they take them at once."""
    released: list[str] = []
    for job in jobs:
        if (yield from claim_plans.release(d, job, now_us, refund=refund)):
            released.append(job.queue)
    for queue in dict.fromkeys(released):
        yield d.notify(queue_channel(queue), origin, now_us)
    return len(released)
