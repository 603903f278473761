"""A job's attempt history: what is kept of each attempt that ended without
an ack, and of each death (docs/queues.md, "Attempts").

A retry, a fail, and a burial by the sweep each record one row in the
transaction that settles the job: the attempt's number, how it ended, the
worker, when it started and ended, the error and its stack trace. The rows
are bounded so a job failing in a loop cannot grow the database without
end: a job keeps its last ``ATTEMPTS_KEPT`` rows, an error keeps its first
``ERROR_CAP`` characters and a trace its last ``TRACE_CAP`` (where the
frame that raised and the exception are).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

# The rows one job keeps, newest first; as many as Oban and River show on a
# job's page without paging, and enough to see a pattern in its failures.
ATTEMPTS_KEPT: Final = 20
ERROR_CAP: Final = 2_000
TRACE_CAP: Final = 8_000

# How an attempt (or a job) ended: ``retried`` (back to pending), or a death
# with its dead letter's reason: ``failed`` (``fail``), ``max_attempts``
# (a retry with none left, or released spent), ``claim_expired`` (its claim
# lapsed on the last attempt) and ``expired`` (its deadline passed first).
AttemptOutcome = Literal["retried", "failed", "max_attempts", "claim_expired", "expired"]
ATTEMPT_OUTCOMES: Final[tuple[AttemptOutcome, ...]] = (
    "retried", "failed", "max_attempts", "claim_expired", "expired",
)  # fmt: skip


def capped_error(error: str | None) -> str | None:
    """An error message as an attempt keeps it: its first ``ERROR_CAP``
    characters, and how many were cut."""
    if error is None or len(error) <= ERROR_CAP:
        return error
    cut = len(error) - ERROR_CAP
    return f"{error[:ERROR_CAP]}... [{cut} more characters]"


def capped_trace(trace: str | None) -> str | None:
    """A stack trace as an attempt keeps it: its last ``TRACE_CAP``
    characters (the innermost frames and the exception), and how many of the
    outermost were cut."""
    if trace is None or len(trace) <= TRACE_CAP:
        return trace
    cut = len(trace) - TRACE_CAP
    return f"[{cut} characters of outer frames cut] ...{trace[-TRACE_CAP:]}"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a job that ended without an ack, or the job's death
    (``JobInfo.attempt_history``).

    ``attempt``: its number (the job's attempts when it ended; a requeued
    dead letter counts from 1 again); ``outcome``: how it ended
    (``AttemptOutcome``); ``worker``: the worker that held it (None for a
    job that died unclaimed); ``started_at``: when that worker received its
    claim (None when not known: a burial by the sweep, or a row kept from
    before schema 7); ``finished_at``: when it ended; ``error`` and
    ``trace``: what the worker reported (capped, see the module)."""

    attempt: int
    outcome: AttemptOutcome
    worker: str | None
    started_at: datetime | None
    finished_at: datetime
    error: str | None
    trace: str | None

    @property
    def duration(self) -> timedelta | None:
        """How long the attempt ran, when its start is known."""
        return None if self.started_at is None else self.finished_at - self.started_at

    @property
    def died(self) -> bool:
        """Whether the job died here (to the dead letters)."""
        return self.outcome != "retried"
