"""The seam between alkstore's operations and an instrumentation (``alkstore.otel``).

A store's telemetry is never ``None``: ``NULL_TELEMETRY`` until
``alkstore.otel.instrument`` replaces it. Each operation hands its round
trip (an awaitable not yet awaited) to the matching hook and awaits what
comes back. The null object hands the same awaitable back, so a store that
is not instrumented pays one method call and no extra await; an
instrumentation wraps it in a span, records metrics and returns its result
unchanged. The hooks observe, they never decide, and exceptions pass
through them as they came.

Hooks see values (job records, names), never a facade: a job's trace (what
an instrumentation keeps of its claim's and its run's spans) is an opaque
token the worker holds beside the job and hands back to later hooks.

The protocols here say what the core and the services call; ``alkstore/otel/``
holds the one real implementation, and is the only code that imports
OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar

from ...protocol.plans.worker import ClaimResult
from ...protocol.values.outcomes import Outcome
from ...protocol.values.types import JobRecord, NewJob, StreamEvent

T = TypeVar("T")

# What ``Job.ack``/``retry``/``fail``/``release`` are, to the hooks.
SETTLE_OPERATIONS = ("ack", "retry", "fail", "release")

# A job's trace, as an instrumentation keeps it (None: none).
Trace = object | None


class WorkerTelemetry(Protocol):
    """The hooks of one worker (one worker id on one queue)."""

    def claimed(self, n: int, now_us: int, run: Awaitable[ClaimResult]) -> Awaitable[ClaimResult]:
        """One claim round of up to ``n`` jobs, started at ``now_us``."""
        ...

    def dispatched(self, record: JobRecord) -> Trace:
        """``record`` came from the claim round that just returned: its trace."""
        ...

    def process(
        self, record: JobRecord, trace: Trace, run: Callable[[Trace], Awaitable[None]]
    ) -> Awaitable[None]:
        """The handler's run of ``record``: ``run(trace)`` runs it, with the
        trace the job has while it runs (what its settling spans go under)."""
        ...

    def acked(
        self, jobs: Sequence[tuple[JobRecord, Trace]], run: Awaitable[set[int]]
    ) -> Awaitable[set[int]]:
        """One round of acks for jobs whose handlers returned."""
        ...

    def finish_headers(self, trace: Trace) -> str | None:
        """The headers a kept job's finish records (``Job`` headers, JSON
        text) so that its dependents' runs can point at its run: the run's
        trace context; None: nothing to record."""
        ...

    def stopped(self) -> None:
        """The worker has ended."""
        ...


class Telemetry(Protocol):
    """The hooks of a store."""

    def enqueue(self, job: NewJob, insert: Callable[[NewJob], Awaitable[int]]) -> Awaitable[int]:
        """Insert ``job`` (``insert`` takes the job with its headers set)."""
        ...

    def enqueue_many(
        self, queue: str, jobs: list[NewJob], insert: Callable[[list[NewJob]], Awaitable[list[int]]]
    ) -> Awaitable[list[int]]:
        """Insert ``jobs`` into ``queue`` at once."""
        ...

    def claim(
        self, queue: str, worker: str, n: int, run: Awaitable[list[JobRecord]]
    ) -> Awaitable[list[JobRecord]]:
        """A claim of up to ``n`` jobs outside a worker (``claim_batch``)."""
        ...

    def settle(
        self, operation: str, record: JobRecord, trace: Trace, run: Awaitable[Outcome | None]
    ) -> Awaitable[Outcome | None]:
        """``job.ack()``, ``retry``, ``fail`` or ``release`` (``operation``):
        ``run`` says how the job left its claim (None: the claim no longer
        owned it)."""
        ...

    def ack_batch(self, queue: str, count: int, run: Awaitable[int]) -> Awaitable[int]:
        """``Queue.ack_batch`` of ``count`` ids."""
        ...

    def buried(self, queue: str, buried: Sequence[tuple[int, str]]) -> None:
        """The sweep moved these (job id, reason) of ``queue`` to the dead letters."""
        ...

    def worker(self, queue: str, worker_id: str) -> WorkerTelemetry:
        """The hooks of a worker starting on ``queue``."""
        ...

    def publish(self, stream: str, run: Awaitable[int]) -> Awaitable[int]:
        """A publish to ``stream``; ``run`` returns its offset."""
        ...

    def receive(
        self, stream: str, consumer: str, run: Awaitable[list[StreamEvent]]
    ) -> Awaitable[list[StreamEvent]]:
        """A subscriber's read of its next events."""
        ...

    def subscribed(self, receiver: object, stream: str, consumer: str) -> None:
        """``receiver`` (any object, held weakly) opened on ``stream`` for ``consumer``."""
        ...

    def unsubscribed(self, receiver: object) -> None:
        """``receiver`` closed (may be called more than once)."""
        ...

    def lock(self, name: str, owner: str, run: Awaitable[T]) -> Awaitable[T]:
        """Acquiring lock ``name`` for ``owner``; ``run`` returns the lock
        (anything with a ``token``) or ``None``."""
        ...


class _NullWorker:
    """A worker's hooks when nothing instruments the store: each hands its
    round trip back as it came."""

    __slots__ = ()

    def claimed(self, n: int, now_us: int, run: Awaitable[ClaimResult]) -> Awaitable[ClaimResult]:
        return run

    def dispatched(self, record: JobRecord) -> Trace:
        return None

    def process(
        self, record: JobRecord, trace: Trace, run: Callable[[Trace], Awaitable[None]]
    ) -> Awaitable[None]:
        return run(trace)

    def acked(
        self, jobs: Sequence[tuple[JobRecord, Trace]], run: Awaitable[set[int]]
    ) -> Awaitable[set[int]]:
        return run

    def finish_headers(self, trace: Trace) -> str | None:
        return None

    def stopped(self) -> None:
        return None


class NullTelemetry:
    """A store's hooks when nothing instruments it."""

    __slots__ = ()

    def enqueue(self, job: NewJob, insert: Callable[[NewJob], Awaitable[int]]) -> Awaitable[int]:
        return insert(job)

    def enqueue_many(
        self, queue: str, jobs: list[NewJob], insert: Callable[[list[NewJob]], Awaitable[list[int]]]
    ) -> Awaitable[list[int]]:
        return insert(jobs)

    def claim(
        self, queue: str, worker: str, n: int, run: Awaitable[list[JobRecord]]
    ) -> Awaitable[list[JobRecord]]:
        return run

    def settle(
        self, operation: str, record: JobRecord, trace: Trace, run: Awaitable[Outcome | None]
    ) -> Awaitable[Outcome | None]:
        return run

    def ack_batch(self, queue: str, count: int, run: Awaitable[int]) -> Awaitable[int]:
        return run

    def buried(self, queue: str, buried: Sequence[tuple[int, str]]) -> None:
        return None

    def worker(self, queue: str, worker_id: str) -> WorkerTelemetry:
        return _NULL_WORKER

    def publish(self, stream: str, run: Awaitable[int]) -> Awaitable[int]:
        return run

    def receive(
        self, stream: str, consumer: str, run: Awaitable[list[StreamEvent]]
    ) -> Awaitable[list[StreamEvent]]:
        return run

    def subscribed(self, receiver: object, stream: str, consumer: str) -> None:
        return None

    def unsubscribed(self, receiver: object) -> None:
        return None

    def lock(self, name: str, owner: str, run: Awaitable[T]) -> Awaitable[T]:
        return run


_NULL_WORKER = _NullWorker()
NULL_TELEMETRY: Telemetry = NullTelemetry()

__all__ = ["NULL_TELEMETRY", "SETTLE_OPERATIONS", "Telemetry", "Trace", "WorkerTelemetry"]
