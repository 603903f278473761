"""``Job``: a claimed job, settled once; and ``StoreHandle``, what a handler
reaches through ``Job.store``.

A job is a record (``JobRecord``) and the core of the store it came from.
Its settling goes through the core's telemetry hook as ``(operation,
record, trace, outcome)``; a job a worker handed out also tells the worker
(its ``JobObserver``) that its handler settled or heartbeated it.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar, Unpack

from ..protocol.plan import Plan
from ..protocol.plans import claim, dependencies
from ..protocol.values import codec
from ..protocol.values.backoff import Backoff
from ..protocol.values.ints import check_bool
from ..protocol.values.outcomes import Outcome
from ..protocol.values.timeconv import Duration, duration_us, to_datetime
from ..protocol.values.types import Enqueued, EnqueueOptions, JobInfo, JobRecord, QueueOptions
from .core.handle import StoreCore
from .core.observer import JobObserver
from .core.ops import error_text, error_trace
from .core.wakes import WakeReceiver
from .locks import Lock
from .stream import Stream
from .tx import Transaction

T = TypeVar("T")


class QueueTarget(Protocol):
    """A queue as ``StoreHandle.queue`` returns it (an ``alkstore.Queue``):
    what a handler does with a queue besides its own."""

    name: str

    async def enqueue(self, payload: codec.JSON, **options: Unpack[EnqueueOptions]) -> int:
        """``Queue.enqueue``."""
        ...

    async def enqueue_batch(
        self, payloads: Iterable[codec.JSON], **options: Unpack[EnqueueOptions]
    ) -> list[int]:
        """``Queue.enqueue_batch``."""
        ...

    async def enqueue_unique(
        self,
        payload: codec.JSON,
        key: str,
        *,
        unique_for: Duration | None = ...,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """``Queue.enqueue_unique``."""
        ...

    async def get_job(self, job_id: int) -> JobInfo | None:
        """``Queue.get_job``."""
        ...

    async def cancel(self, job_id: int) -> bool:
        """``Queue.cancel``."""
        ...


class OutboxTarget(Protocol):
    """An outbox as ``StoreHandle.outbox`` returns it (an ``alkstore.Outbox``)."""

    name: str

    async def enqueue(self, payload: codec.JSON, **options: Unpack[EnqueueOptions]) -> int:
        """``Outbox.enqueue``."""
        ...


class StoreHandle(Protocol):
    """The store a job came from, as its handler reaches it (``Job.store``):
    an ``alkstore.Store``, by the methods a handler uses to get back to the
    database (its own SQL in a transaction, follow-up jobs, publishes,
    wakes, locks). Each method is the ``Store`` method of the same name."""

    @property
    def engine(self) -> str:
        """``Store.engine``: ``"sqlite"`` or ``"postgres"``."""
        ...

    @property
    def read_only(self) -> bool:
        """``Store.read_only``."""
        ...

    @property
    def closed(self) -> bool:
        """``Store.closed``."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[Transaction]:
        """``Store.transaction``: your SQL and alkstore's operations, one commit."""
        ...

    def join(self, connection: Any) -> AbstractAsyncContextManager[Transaction]:
        """``Store.join``."""
        ...

    async def notify(self, channel: str, payload: codec.JSON = ...) -> None:
        """``Store.notify``."""
        ...

    def listen(self, channel: str) -> WakeReceiver:
        """``Store.listen``."""
        ...

    def queue(
        self,
        name: str,
        *,
        visibility_timeout: Duration = ...,
        max_attempts: int = ...,
        backoff: Backoff | None = ...,
    ) -> QueueTarget:
        """``Store.queue``."""
        ...

    def stream(self, name: str) -> Stream:
        """``Store.stream``."""
        ...

    def outbox(
        self,
        name: str,
        *,
        visibility_timeout: Duration = ...,
        max_attempts: int = ...,
        backoff: Backoff | None = ...,
    ) -> OutboxTarget:
        """``Store.outbox``."""
        ...

    async def try_lock(self, name: str, owner: str, ttl: Duration) -> Lock | None:
        """``Store.try_lock``."""
        ...

    async def get_job(self, job_id: int) -> JobInfo | None:
        """``Store.get_job``."""
        ...


class Job:
    """A claimed job. Settle it once: ``ack``, ``retry`` or ``fail``.

    Each settling call returns ``False`` (and changes nothing) when this worker
    no longer owns the job: its claim expired, or it was reclaimed, acked or
    cancelled meanwhile.
    """

    __slots__ = ("_core", "_observer", "_options", "_owner", "_record", "_started_us")

    def __init__(
        self,
        core: StoreCore,
        owner: StoreHandle,
        options: QueueOptions,
        record: JobRecord,
        observer: JobObserver | None = None,
    ) -> None:
        self._core = core
        self._owner = owner
        self._options = options
        self._record = record
        self._observer = observer
        # When this process received the claim: the attempt's start, recorded
        # with its end if it fails.
        self._started_us = core.now_us()

    def __repr__(self) -> str:
        r = self._record
        return f"Job(id={r.id}, queue={r.queue!r}, attempts={r.attempts}/{r.max_attempts})"

    @property
    def id(self) -> int:
        """The job's id, unique in its database."""
        return self._record.id

    @property
    def store(self) -> StoreHandle:
        """The store the job was claimed from: a handler's way back to the
        database (its own SQL in ``store.transaction()``, follow-up jobs,
        publishes), also when ``alkstore worker`` opened the store."""
        return self._owner

    @property
    def queue(self) -> str:
        """The name of the job's queue."""
        return self._record.queue

    @property
    def payload(self) -> codec.JSON:
        """The job's JSON payload, as enqueued."""
        return self._record.payload

    def payload_as(self, target: type[T]) -> T:
        """The payload decoded into ``target`` (a dataclass, attrs class, ``msgspec.Struct``,
        ``NamedTuple``, ``TypedDict``, pydantic model, or any type msgspec converts into: enums,
        ``Literal``, datetimes, tuples, unions...); a typed payload reads back equal to what was
        enqueued. Raises ``CodecError`` naming the field on a mismatch."""
        return codec.convert(self._record.payload, target)

    @property
    def priority(self) -> int:
        """The job's priority: higher is claimed first."""
        return self._record.priority

    @property
    def attempts(self) -> int:
        """Attempts so far, this one included."""
        return self._record.attempts

    @property
    def max_attempts(self) -> int:
        """Attempts allowed before a retry sends the job to the dead letters."""
        return self._record.max_attempts

    @property
    def worker_id(self) -> str:
        """The worker id this job is claimed by."""
        return self._record.claimed_by

    @property
    def run_at(self) -> datetime:
        """When the job became (or becomes) claimable, in UTC."""
        return to_datetime(self._record.run_at_us)

    @property
    def created_at(self) -> datetime:
        """When the job was enqueued, in UTC."""
        return to_datetime(self._record.created_at_us)

    @property
    def expires_at(self) -> datetime | None:
        """The deadline for its first claim (``expires``), or ``None``."""
        us = self._record.expires_at_us
        return None if us is None else to_datetime(us)

    @property
    def claim_expires_at(self) -> datetime:
        """When this claim lapses unless renewed (``heartbeat``); another worker may then claim the
        job. A worker's own renewals move it too."""
        if self._observer is not None:
            return to_datetime(self._observer.claim_expires_us(self.id))
        return to_datetime(self._record.claim_expires_at_us)

    # -- settling ------------------------------------------------------------------
    async def ack(self, result: Any = None) -> bool:
        """Done: delete the job (into history, outcome ``acked``, when its queue kept history as
        it was claimed). ``result`` (a JSON value or typed object, as a payload; None: none)
        is kept as the job's result (``Queue.result``, the dependents'
        ``dependency_results``) for its queue's results retention. ``False`` (nothing
        changed) when this claim no longer owns it."""
        core = self._core
        encoded = None if result is None else codec.encode(result)
        plan = claim.ack(core.dialect, self._record, core.now_us(), origin=core.origin,
                         result=encoded)  # fmt: skip
        return await self._settle("ack", _as(Outcome.ACKED, plan))

    async def dependency_results(self) -> dict[int, codec.JSON]:
        """What each job this one depends on returned, by job id (None for
        one that returned nothing, or that failed while this job's policy
        was to run anyway)."""
        core = self._core
        rows = await core.run(dependencies.dependency_results(core.dialect, self.id))
        return {r.id: None if r.result is None else codec.decode(r.result) for r in rows}

    async def retry(
        self, delay: Duration | None = None, error: BaseException | str | None = None
    ) -> bool:
        """Back to pending after ``delay`` (default: the queue's backoff);
        to dead instead when no attempts are left. The attempt is recorded in
        the job's ``attempt_history`` with ``error`` (an exception's stack
        trace too)."""
        core = self._core
        delay_us = None if delay is None else duration_us(delay, "delay")
        text = error_text(error)
        plan = claim.retry(
            core.dialect, self._record, core.now_us(), delay_us=delay_us,
            backoff=self._options.backoff, draw=core.draw(), error=text, origin=core.origin,
            trace=error_trace(error), started_us=self._started_us,
        )  # fmt: skip
        return await self._settle("retry", plan, text)

    async def fail(self, error: BaseException | str | None = None) -> bool:
        """Straight to the dead letters, keeping ``error`` (and, in the job's
        ``attempt_history``, an exception's stack trace)."""
        core = self._core
        text = error_text(error)
        plan = claim.fail(core.dialect, self._record, core.now_us(), text, origin=core.origin,
                          trace=error_trace(error), started_us=self._started_us)  # fmt: skip
        return await self._settle("fail", _as(Outcome.DEAD, plan), text)

    async def release(self, *, refund: bool = True) -> bool:
        """Hand the job back, due now (for shutdown); ``refund`` returns the attempt."""
        core = self._core
        refund = check_bool(refund, "refund")
        plan = claim.release(core.dialect, self._record, core.now_us(), refund=refund)
        return await self._settle("release", _as(Outcome.HANDED_BACK, plan))

    async def _settle(
        self, operation: str, plan: Plan[Outcome | None], error: str | None = None
    ) -> bool:
        """Run a settling plan through the telemetry hook, telling the
        worker that handed the job out (if one did)."""
        observer, core = self._observer, self._core
        trace = None
        if observer is not None:
            observer.settling(self.id, operation)
            trace = observer.trace(self.id)
        outcome = await core.telemetry.settle(operation, self._record, trace, core.run(plan))
        if observer is not None:
            await observer.settled(self.id, operation, outcome, error)
        return outcome is not None

    async def heartbeat(self, extend: Duration | None = None) -> bool:
        """Push the claim's expiry to now + ``extend`` (default: the visibility timeout)."""
        core = self._core
        extend_us = (
            self._options.visibility_timeout_us
            if extend is None
            else duration_us(extend, "extend", allow_zero=False)
        )
        now = core.now_us()
        ok = await core.run(claim.heartbeat(core.dialect, self._record, now, extend_us))
        if ok:
            self._record = self._record._replace(claim_expires_at_us=now + extend_us)
            if self._observer is not None:
                self._observer.heartbeated(self.id, now + extend_us)
        return ok


def _as(outcome: Outcome, plan: Plan[bool]) -> Plan[Outcome | None]:
    """A settling plan whose ``True`` means ``outcome``."""
    owned = yield from plan
    return outcome if owned else None

