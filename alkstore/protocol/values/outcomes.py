"""How a claimed job leaves its claim: one vocabulary, for settling and for
the worker's report.

Each job a worker claims leaves it once, as one of these; ``WorkerReport``
counts them. A settling plan (``claim.ack``, ``retry``, ``fail``,
``release``) returns the one it produced, or ``None`` when the claim no
longer owned the job; the retry plan is where a retry turns into a burial,
so nobody recomputes that verdict afterwards.
"""

from __future__ import annotations

import enum


class Outcome(enum.Enum):
    """How a claimed job left its claim."""

    ACKED = "acked"  # done: deleted (into history, when kept)
    RETRIED = "retried"  # back to pending, due after its backoff
    DEAD = "dead"  # to the dead letters: failed, or out of attempts on a retry
    HANDED_BACK = "handed_back"  # released unfinished, due now
    LOST = "lost"  # the claim lapsed or was taken: nothing settled
    CANCELLED = "cancelled_by_request"  # ``Queue.cancel`` took it while it was held

    @property
    def frees_a_retry(self) -> bool:
        """Whether the job is pending again after a backoff: a worker then
        looks for it once it is due."""
        return self is Outcome.RETRIED
