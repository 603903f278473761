"""What one worker holds while it runs, shared by its units: the jobs it
claimed (each with its record, its trace and the handler's object), the
order they wait for a slot in, the kicks that wake its tasks, and the tally
of how each job left it."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ...api.core.telemetry import Trace
from ...protocol.values.outcomes import Outcome
from ...protocol.values.types import JobRecord, WorkerReport
from ...runner.runtime import Runtime, Signal

J = TypeVar("J")


class Kick:
    """Tells a task to look again (a wake came, a job finished, ...).

    Kicks coalesce; the policy, not the kick, says what to do.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._signal: Signal = runtime.signal()

    def set(self) -> None:
        self._signal.set()

    async def wait(self, timeout: float | None) -> None:
        if not self._signal.is_set():
            await self._runtime.wait_signal(self._signal, timeout)
        if self._signal.is_set():
            self._signal = self._runtime.signal()


@dataclass(eq=False)
class Held(Generic[J]):
    """A job this worker claimed and has not let go of."""

    record: JobRecord
    # What the handler is given (a ``Job``), made once at the claim.
    job: J
    # The instrumentation's trace of the job (its claim's, then its run's span).
    trace: Trace = None
    # The handler settled the job itself (``job.ack()``, ...): the operation.
    # The worker then settles nothing more for it.
    self_settled: str | None = None
    # ``Queue.cancel`` took it while its handler ran: the handler was
    # cancelled, and the job counts as cancelled by request.
    revoked: bool = False
    # What its handler returned, as JSON (None: nothing): kept by the ack.
    result: str | None = None
    # When this worker received the claim: the attempt's start, recorded
    # with its end if the handler raises.
    started_us: int | None = None

    @property
    def id(self) -> int:
        return self.record.id

    def extended(self, until_us: int) -> None:
        """The claim now lasts until ``until_us``."""
        self.record = self.record._replace(claim_expires_at_us=until_us)


@dataclass
class Tally:
    """How jobs left the worker so far: each claimed job once, by its
    ``Outcome``, counted in one place (``left``)."""

    started: int = 0
    # Handlers cancelled because a drain's deadline passed (their jobs are
    # handed back, and counted so).
    cancelled: int = 0
    outcomes: Counter[Outcome] = field(default_factory=Counter)

    def left(self, outcome: Outcome, n: int = 1) -> None:
        self.outcomes[outcome] += n

    def report(self, queue: str, worker_id: str) -> WorkerReport:
        o = self.outcomes
        return WorkerReport(
            queue=queue, worker_id=worker_id, started=self.started, acked=o[Outcome.ACKED],
            retried=o[Outcome.RETRIED], dead=o[Outcome.DEAD], handed_back=o[Outcome.HANDED_BACK],
            lost=o[Outcome.LOST], cancelled=self.cancelled,
            cancelled_by_request=o[Outcome.CANCELLED],
        )  # fmt: skip


class WorkerState(Generic[J]):
    """The jobs one worker holds, as its units see them."""

    def __init__(self, runtime: Runtime) -> None:
        self.held: dict[int, Held[J]] = {}
        # Claimed, waiting for a slot; slots take from the left.
        self.ready: deque[Held[J]] = deque()
        # Job id -> the slot running it.
        self.running: dict[int, Any] = {}
        self.tally = Tally()
        self.claim_kick = Kick(runtime)  # the claim loop: look again
        self.work_kick = Kick(runtime)  # jobs arrived in ``ready``
        self.keeper_kick = Kick(runtime)  # a lease's next event moved sooner
        self.settle_kick = Kick(runtime)  # finished jobs wait to be settled

    def forget(self, job_id: int) -> None:
        self.held.pop(job_id, None)
        self.running.pop(job_id, None)
