"""What a worker hears from the jobs it hands its handler.

A handler may settle its own job (``job.ack()``, ``retry``, ``fail``,
``release``) or heartbeat it; the worker that claimed the job must then
settle nothing more, count the job once, and move its next renewal. The
``Job`` a worker hands out carries the worker's observer and reports to it;
a job claimed outside a worker (``claim_one``) carries none.
"""

from __future__ import annotations

from typing import Protocol

from ...protocol.values.outcomes import Outcome
from .telemetry import Trace


class JobObserver(Protocol):
    def trace(self, job_id: int) -> Trace:
        """The job's trace now (for the spans of its settling)."""
        ...

    def claim_expires_us(self, job_id: int) -> int:
        """When the job's claim lapses now (the worker renews it)."""
        ...

    def settling(self, job_id: int, operation: str) -> None:
        """The handler is settling the job itself (``operation``): from now
        on the worker settles nothing for it."""
        ...

    async def settled(
        self, job_id: int, operation: str, outcome: Outcome | None, error: str | None
    ) -> None:
        """How the handler's own settling ended (None: the claim no longer
        owned the job); ``error``: what it stored (a retry's or a failure's)."""
        ...

    def heartbeated(self, job_id: int, until_us: int) -> None:
        """The handler extended the claim until ``until_us``."""
        ...
