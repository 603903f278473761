"""The worker's own plans: a claim that also reads when the next job falls
due, and the hand-back of unfinished jobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..dialect import Dialect
from ..plan import Plan
from ..values.names import queue_channel
from ..values.types import JobRecord
from . import claim as claim_plans


# -- plans -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ClaimResult:
    jobs: list[JobRecord]
    # When the queue's next live job falls due; read only after a short batch.
    next_due_us: int | None


def claim_for_worker(
    d: Dialect, queue: str, worker: str, n: int, now_us: int, visibility_us: int
) -> Plan[ClaimResult]:
    """Claim up to ``n``; when fewer came back, read in the same transaction
    when the next job falls due, so an idle worker sleeps exactly that long.
    A job due already but held back by a rate limit falls due when the rate
    next admits a claim. That read is the plan's last statement, so on
    Postgres it goes out with the COMMIT: a claim woken for one job costs two
    round trips, not three, before its handler starts."""
    jobs, opens = yield from claim_plans.claim_jobs(d, queue, worker, n, now_us, visibility_us)
    next_due: int | None = None
    if len(jobs) < n:
        next_due = yield from claim_plans.next_due(d, queue, final=True)
        if next_due is not None and opens is not None:
            next_due = max(next_due, opens)
    return ClaimResult(jobs, next_due)


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
