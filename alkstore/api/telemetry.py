"""The seam between the facades and an instrumentation (``alkstore.otel``).

A store's ``_telemetry`` is ``None`` unless ``alkstore.otel.instrument`` set
it: the facades then pay one ``is None`` check per operation and import
nothing. When it is set, each operation hands its round trip (an awaitable
not yet awaited) to the matching hook, which awaits it inside a span and
records metrics, and returns its result unchanged: the hooks observe, they
never decide. Exceptions pass through them as they came.

The protocols here say what the facades call; ``alkstore/otel/`` holds the
one implementation, and is the only code that imports OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from ..protocol.plans.worker import ClaimResult
    from ..protocol.values.types import JobRecord, NewJob, StreamEvent
    from .queue import Job
    from .stream import EventReceiver

T = TypeVar("T")

# What ``Job.ack``/``retry``/``fail``/``release`` are, to the hooks.
SETTLE_OPERATIONS = ("ack", "retry", "fail", "release")


class WorkerTelemetry(Protocol):
    """The hooks of one ``Queue.work`` call (one worker id on one queue)."""

    async def claimed(
        self, n: int, now_us: int, run: Awaitable[ClaimResult]
    ) -> ClaimResult:
        """One claim round of up to ``n`` jobs, started at ``now_us``."""
        ...

    def dispatched(self, job: Job) -> None:
        """``job`` came from the claim round that just returned."""
        ...

    async def process(self, job: Job, handler: Callable[[Job], Awaitable[Any]]) -> None:
        """Run ``handler`` on ``job``: the handler's run."""
        ...

    async def acked(self, jobs: Sequence[Job], run: Awaitable[set[int]]) -> set[int]:
        """One round of acks for jobs whose handlers returned."""
        ...

    def stopped(self) -> None:
        """The worker has ended."""
        ...


class Telemetry(Protocol):
    """The hooks of an instrumented store."""

    async def enqueue(self, job: NewJob, insert: Callable[[NewJob], Awaitable[int]]) -> int:
        """Insert ``job`` (``insert`` takes the job with its headers set)."""
        ...

    async def enqueue_many(
        self,
        queue: str,
        jobs: list[NewJob],
        insert: Callable[[list[NewJob]], Awaitable[list[int]]],
    ) -> list[int]:
        """Insert ``jobs`` into ``queue`` at once."""
        ...

    async def claim(
        self, queue: str, worker: str, n: int, run: Awaitable[list[JobRecord]]
    ) -> list[JobRecord]:
        """A claim of up to ``n`` jobs outside a worker (``claim_batch``)."""
        ...

    async def process(self, job: Job, handler: Callable[[Job], Awaitable[Any]]) -> None:
        """A handler's run outside a worker (``Outbox.run_once``'s deliveries)."""
        ...

    async def settle(self, operation: str, job: Job, run: Awaitable[bool]) -> bool:
        """``job.ack()``, ``retry``, ``fail`` or ``release`` (``operation``)."""
        ...

    async def ack_batch(self, queue: str, count: int, run: Awaitable[int]) -> int:
        """``Queue.ack_batch`` of ``count`` ids."""
        ...

    def acked(self, queue: str, count: int) -> None:
        """``count`` jobs of ``queue`` were acked without a hook of their own."""
        ...

    def buried(self, queue: str, buried: Sequence[tuple[int, str]]) -> None:
        """The sweep moved these (job id, reason) of ``queue`` to the dead letters."""
        ...

    def worker(self, queue: str, worker_id: str) -> WorkerTelemetry:
        """The hooks of a worker starting on ``queue``."""
        ...

    async def publish(self, stream: str, run: Awaitable[int]) -> int:
        """A publish to ``stream``; ``run`` returns its offset."""
        ...

    async def receive(
        self, receiver: EventReceiver, run: Awaitable[list[StreamEvent]]
    ) -> list[StreamEvent]:
        """A subscriber's read of its next events."""
        ...

    def subscribed(self, receiver: EventReceiver) -> None:
        """``receiver`` opened."""
        ...

    def unsubscribed(self, receiver: EventReceiver) -> None:
        """``receiver`` closed (may be called more than once)."""
        ...

    async def lock(self, name: str, owner: str, run: Awaitable[T]) -> T:
        """Acquiring lock ``name`` for ``owner``; ``run`` returns the lock
        (anything with a ``token``) or ``None``."""
        ...
