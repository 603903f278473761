"""The hooks an instrumented store calls (``api/core/telemetry.py``): spans and
metrics around alkstore's operations, through the OpenTelemetry API only.

Each hook awaits the operation it is handed inside a span, records what
came back, and returns it unchanged; an exception is recorded on the span
(status ERROR, ``error.type``) and raised again as it came.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
)
from opentelemetry.util.types import AttributeValue

from ..api.core.handle import StoreCore
from ..api.core.telemetry import Trace
from ..protocol.plans import dependencies as dependency_plans
from ..protocol.plans import queues as queue_plans
from ..protocol.plans import streams as stream_plans
from ..protocol.plans.worker import ClaimResult
from ..protocol.values.errors import AlkstoreError, Closed
from ..protocol.values.headers import decode_headers, encode_headers
from ..protocol.values.outcomes import Outcome
from ..protocol.values.timeconv import US_PER_S
from ..protocol.values.types import JobRecord, NewJob, StreamEvent
from ..runner.runtime import Signal
from . import names as n
from .instruments import Instruments, QueueSample

T = TypeVar("T")
Attributes = dict[str, AttributeValue]

log = logging.getLogger("alkstore.otel")


def _error_type(error: BaseException) -> str:
    kind = type(error)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _record_error(span: Span, error: BaseException) -> None:
    span.set_attribute(n.ERROR_TYPE, _error_type(error))
    if isinstance(error, Exception):
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    else:
        # Cancelled (a lapsed claim, a shutdown, a timeout): not a failure of
        # the operation's own, but it did not finish.
        span.set_status(Status(StatusCode.ERROR, "cancelled"))


def _base(operation_type: str, operation: str, destination: str) -> Attributes:
    return {
        n.SYSTEM: n.SYSTEM_NAME,
        n.OPERATION_TYPE: operation_type,
        n.OPERATION_NAME: operation,
        n.DESTINATION: destination,
    }


def _valid(value: object) -> SpanContext | None:
    return value if isinstance(value, SpanContext) and value.is_valid else None


# The OpenTelemetry SDK keeps 128 links a span by default: a fan-in's run
# points at that many of its dependencies' runs, not at ten thousand.
MAX_DEPENDENCY_LINKS = 128


def producer_context(record: JobRecord) -> Context:
    """The context the enqueuing code's span left in the job's headers (an
    empty one when there is none)."""
    return propagate.extract(decode_headers(record.headers), context=Context())


class StoreHooks:
    """The hooks of one instrumented store (``api.core.telemetry.Telemetry``)."""

    def __init__(
        self,
        core: StoreCore,
        tracer: Tracer,
        instruments: Instruments,
        *,
        queues: Sequence[str],
        consumers: Sequence[tuple[str, str]],
        refresh_interval: float,
    ) -> None:
        self._core = core
        self._tracer = tracer
        self._m = instruments
        self._interval = refresh_interval
        self._kick: Signal | None = None
        self.closed = False
        # What to sample: queue -> how many reasons (named, workers running);
        # the consumers named, and those of the receivers open (a receiver
        # dropped without closing it drops out too).
        self._queues: dict[str, int] = {}
        for queue in queues:
            self._watch_queue(queue)
        self._consumers = frozenset(consumers)
        self._receivers: weakref.WeakKeyDictionary[object, tuple[str, str]] = (
            weakref.WeakKeyDictionary()
        )
        self._queue_samples: dict[str, QueueSample] = {}
        self._lag_samples: dict[tuple[str, str], int] = {}

    # -- spans ---------------------------------------------------------------------
    @contextmanager
    def _span(
        self,
        name: str,
        kind: SpanKind,
        attributes: Attributes,
        *,
        context: Context | None = None,
        links: Sequence[Link] | None = None,
    ) -> Iterator[Span]:
        """A span that is current for the block (under ``context``, else the
        current context), ends with it, and records an error raised from it."""
        span = self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, links=links
        )
        token = otel_context.attach(trace.set_span_in_context(span, context))
        try:
            yield span
        except BaseException as exc:
            _record_error(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    def _after(
        self,
        name: str,
        kind: SpanKind,
        attributes: Attributes,
        start_ns: int,
        *,
        context: Context | None = None,
        error: BaseException | None = None,
    ) -> SpanContext:
        """A span made once an operation is over (from ``start_ns``): for
        polls, which get a span only when they brought something back."""
        span = self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=start_ns
        )
        if error is not None:
            _record_error(span, error)
        span.end()
        return span.get_span_context()

    # -- queues --------------------------------------------------------------------
    def _headers(self, span: Span, context: Context | None = None) -> str | None:
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span, context))
        return encode_headers(carrier)

    async def enqueue(self, job: NewJob, insert: Callable[[NewJob], Awaitable[int]]) -> int:
        attrs = _base(n.SEND, "enqueue", job.queue)
        with self._span(f"enqueue {job.queue}", SpanKind.PRODUCER, attrs) as span:
            job_id = await insert(job._replace(headers=self._headers(span)))
            span.set_attribute(n.MESSAGE_ID, str(job_id))
        self._m.enqueued.add(1, {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: job.queue})
        return job_id

    async def enqueue_many(
        self,
        queue: str,
        jobs: list[NewJob],
        insert: Callable[[list[NewJob]], Awaitable[list[int]]],
    ) -> list[int]:
        attrs = _base(n.SEND, "enqueue", queue)
        attrs[n.BATCH_COUNT] = len(jobs)
        with self._span(f"enqueue {queue}", SpanKind.PRODUCER, attrs) as span:
            # Every job of the batch continues the batch's span.
            headers = self._headers(span)
            ids = await insert([job._replace(headers=headers) for job in jobs])
        self._m.enqueued.add(len(ids), {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue})
        return ids

    def _claimed(self, queue: str, count: int) -> None:
        if count:
            self._m.claimed.add(count, {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue})

    async def claim(
        self, queue: str, worker: str, n_jobs: int, run: Awaitable[list[JobRecord]]
    ) -> list[JobRecord]:
        attrs = _base(n.RECEIVE, "claim", queue)
        attrs[n.CLIENT_ID] = worker
        with self._span(f"claim {queue}", SpanKind.CLIENT, attrs) as span:
            records = await run
            span.set_attribute(n.BATCH_COUNT, len(records))
        self._claimed(queue, len(records))
        return records

    async def process(
        self,
        record: JobRecord,
        run: Callable[[Trace], Awaitable[None]],
        *,
        worker: str | None = None,
        claim: SpanContext | None = None,
    ) -> None:
        """The handler's run: a CONSUMER span whose parent is the enqueuing
        code's span (from the job's headers; none: a new trace), linked to
        the claim that took the job. The job's trace while it runs is the
        run's span (``run`` gets it): its settling spans go under it."""
        attrs = _base(n.PROCESS, "process", record.queue)
        attrs[n.MESSAGE_ID] = str(record.id)
        attrs[n.JOB_ATTEMPT] = record.attempts
        if worker is not None:
            attrs[n.CLIENT_ID] = worker
        links = [Link(claim)] if claim is not None else []
        if record.kept:
            links += await self._dependency_links(record)
        runtime = self._core.runtime
        started = runtime.monotonic()
        metric: Attributes = {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: record.queue}
        try:
            context = producer_context(record)
            with self._span(
                f"process {record.queue}", SpanKind.CONSUMER, attrs, context=context,
                links=links or None,
            ) as span:
                await run(span.get_span_context())
        except BaseException as exc:
            metric[n.ERROR_TYPE] = _error_type(exc)
            raise
        finally:
            self._m.duration.record(max(0.0, runtime.monotonic() - started), metric)

    async def _dependency_links(self, record: JobRecord) -> list[Link]:
        """Links to the runs of the job's dependencies (their finishes
        recorded each run's context): a dependent's run points at what it
        waited for. A read that fails leaves the links out, not the run."""
        core = self._core
        try:
            finished = await core.run(dependency_plans.dependency_results(core.dialect, record.id))
        except Closed:
            raise
        except AlkstoreError:
            log.warning("reading the dependencies of job %d failed", record.id, exc_info=True)
            return []
        links: list[Link] = []
        for dep in finished:
            if dep.headers is None:
                continue
            ran = _valid(
                trace.get_current_span(
                    propagate.extract(decode_headers(dep.headers), context=Context())
                ).get_span_context()
            )
            if ran is not None:
                links.append(Link(ran, {n.MESSAGE_ID: str(dep.id)}))
                if len(links) >= MAX_DEPENDENCY_LINKS:
                    break
        return links

    def _settle_context(self, job_trace: Trace) -> Context | None:
        """Where a settling span goes. A worker's job that has run: under its
        run, unless the current span is of the run's trace (the handler
        settling its own job, under its own spans); the worker's settling
        task may be in some span of the application's, which is not the
        job's. Any other job: under the current span."""
        ran = _valid(job_trace)
        if ran is None:
            return None
        if trace.get_current_span().get_span_context().trace_id == ran.trace_id:
            return None
        return trace.set_span_in_context(NonRecordingSpan(ran), Context())

    async def settle(
        self, operation: str, record: JobRecord, job_trace: Trace, run: Awaitable[Outcome | None]
    ) -> Outcome | None:
        queue = record.queue
        attrs = _base(n.SETTLE, operation, queue)
        attrs[n.MESSAGE_ID] = str(record.id)
        attrs[n.CLIENT_ID] = record.claimed_by
        context = self._settle_context(job_trace)
        with self._span(f"{operation} {queue}", SpanKind.CLIENT, attrs, context=context) as span:
            outcome = await run
            span.set_attribute(n.JOB_OWNED, outcome is not None)
            if operation == "retry" and outcome is Outcome.DEAD:
                span.set_attribute(n.DEAD_REASON, "max_attempts")
        metric: Attributes = {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue}
        if outcome is Outcome.ACKED:
            self._m.acked.add(1, metric)
        elif outcome is Outcome.RETRIED:
            self._m.retried.add(1, metric)
        elif outcome is Outcome.DEAD:
            metric[n.DEAD_REASON] = "failed" if operation == "fail" else "max_attempts"
            self._m.dead.add(1, metric)
        return outcome

    async def ack_batch(self, queue: str, count: int, run: Awaitable[int]) -> int:
        attrs = _base(n.SETTLE, "ack", queue)
        attrs[n.BATCH_COUNT] = count
        with self._span(f"ack {queue}", SpanKind.CLIENT, attrs) as span:
            acked = await run
            span.set_attribute(n.ACKED_COUNT, acked)
        self.acked(queue, acked)
        return acked

    def acked(self, queue: str, count: int) -> None:
        if count:
            self._m.acked.add(count, {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue})

    def buried(self, queue: str, buried: Sequence[tuple[int, str]]) -> None:
        for _, reason in buried:
            self._m.dead.add(
                1, {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue, n.DEAD_REASON: reason}
            )

    def worker(self, queue: str, worker_id: str) -> WorkerHooks:
        return WorkerHooks(self, queue, worker_id)

    # -- streams -------------------------------------------------------------------
    async def publish(self, stream: str, run: Awaitable[int]) -> int:
        attrs = _base(n.SEND, "publish", stream)
        with self._span(f"publish {stream}", SpanKind.PRODUCER, attrs) as span:
            offset = await run
            span.set_attribute(n.MESSAGE_ID, str(offset))
        return offset

    async def receive(
        self, stream: str, consumer: str, run: Awaitable[list[StreamEvent]]
    ) -> list[StreamEvent]:
        attrs = _base(n.RECEIVE, "receive", stream)
        attrs[n.CONSUMER_GROUP] = consumer
        start = time.time_ns()
        try:
            events = await run
        except Exception as exc:
            self._after(f"receive {stream}", SpanKind.CLIENT, attrs, start, error=exc)
            raise
        if events:
            attrs[n.BATCH_COUNT] = len(events)
            attrs[n.FIRST_OFFSET] = events[0].offset
            attrs[n.LAST_OFFSET] = events[-1].offset
            self._after(f"receive {stream}", SpanKind.CLIENT, attrs, start)
        return events

    def subscribed(self, receiver: object, stream: str, consumer: str) -> None:
        self._receivers[receiver] = (stream, consumer)
        self._wake()

    def unsubscribed(self, receiver: object) -> None:
        self._receivers.pop(receiver, None)

    # -- locks ---------------------------------------------------------------------
    async def lock(self, name: str, owner: str, run: Awaitable[T]) -> T:
        attrs: Attributes = {n.LOCK_NAME: name, n.LOCK_OWNER: owner}
        with self._span("acquire lock", SpanKind.CLIENT, attrs) as span:
            got = await run
            span.set_attribute(n.LOCK_ACQUIRED, got is not None)
            token = getattr(got, "token", None)
            if isinstance(token, int):
                span.set_attribute(n.LOCK_TOKEN, token)
        return got

    # -- gauges --------------------------------------------------------------------
    def _watch_queue(self, queue: str) -> None:
        self._queues[queue] = self._queues.get(queue, 0) + 1
        self._wake()

    def _unwatch_queue(self, queue: str) -> None:
        left = self._queues.get(queue, 0) - 1
        if left > 0:
            self._queues[queue] = left
        else:
            self._queues.pop(queue, None)

    def _wake(self) -> None:
        """Sample now (something new to watch), not at the next interval."""
        if self._kick is not None:
            self._kick.set()

    def queue_samples(self) -> dict[str, QueueSample]:
        """The last sample of each watched queue (read by the exporter's thread)."""
        return self._queue_samples

    def lag_samples(self) -> dict[tuple[str, str], int]:
        """The last sample of each watched consumer's lag."""
        return self._lag_samples

    async def refresh(self) -> None:
        """Sample every watched queue and consumer now. A queue or consumer
        whose read fails is left out of the gauges until a read succeeds."""
        core = self._core
        queues: dict[str, QueueSample] = {}
        for queue in sorted(self._queues):
            now = core.now_us()
            try:
                plan = queue_plans.depth(core.dialect, queue, now)
                stats, oldest = await core.run(plan, bulk=True)
            except Closed:
                raise
            except AlkstoreError:
                log.warning("sampling queue %s failed", queue, exc_info=True)
                continue
            age = 0.0 if oldest is None else max(0, now - oldest) / US_PER_S
            queues[queue] = QueueSample(stats, age)
        lags: dict[tuple[str, str], int] = {}
        for stream, consumer in sorted(self._consumers | set(self._receivers.values())):
            try:
                lags[stream, consumer] = await core.run(
                    stream_plans.consumer_lag(core.dialect, stream, consumer)
                )
            except Closed:
                raise
            except AlkstoreError:
                log.warning("sampling the lag of %s on %s failed", consumer, stream,
                            exc_info=True)  # fmt: skip
        # Replaced whole: the exporter's thread reads them.
        self._queue_samples = queues
        self._lag_samples = lags

    async def run(self) -> None:
        """Sample every ``refresh_interval`` seconds (and at once when a
        worker or receiver starts) until closed: a task of the store's."""
        runtime = self._core.runtime
        try:
            while not self.closed:
                kick = self._kick = runtime.signal()
                try:
                    await self.refresh()
                except Closed:
                    return
                except Exception:
                    # Telemetry must never take the store down with it.
                    log.exception("sampling the gauges failed; trying again next interval")
                if not kick.is_set():
                    await runtime.wait_signal(kick, self._interval)
        finally:
            # The store closed (or this was closed): its last samples are
            # not news any more.
            self._queue_samples, self._lag_samples = {}, {}

    def close(self) -> None:
        self.closed = True
        self._queue_samples, self._lag_samples = {}, {}
        self._wake()


class WorkerHooks:
    """The hooks of one worker (``api.core.telemetry.WorkerTelemetry``).

    Its spans start new traces (the worker may have been started under some
    span of the application's, which its jobs have nothing to do with),
    except each job's run, which continues its producer's.
    """

    def __init__(self, store: StoreHooks, queue: str, worker_id: str) -> None:
        self._store = store
        self._queue = queue
        self._wid = worker_id
        self._claim: SpanContext | None = None
        # Since when this worker has had nothing to claim (the first of its
        # claims that left nothing behind, with none full since): a job due
        # from then on became due while it was idle, so the time from its
        # due time to its claim is the wake path's (commit, wake, claim).
        # None while there may be a backlog, whose waits are not latency.
        self._idle_since_us: int | None = None
        store._watch_queue(queue)

    async def claimed(self, n_jobs: int, now_us: int, run: Awaitable[ClaimResult]) -> ClaimResult:
        """A claim round. It gets a span only when it took jobs (or failed):
        an idle worker's rounds would bury the traces that matter."""
        store, queue = self._store, self._queue
        attrs = _base(n.RECEIVE, "claim", queue)
        attrs[n.CLIENT_ID] = self._wid
        start = time.time_ns()
        try:
            result = await run
        except Exception as exc:
            store._after(f"claim {queue}", SpanKind.CLIENT, attrs, start, context=Context(),
                         error=exc)  # fmt: skip
            raise
        jobs = result.jobs
        if jobs:
            attrs[n.BATCH_COUNT] = len(jobs)
            self._claim = store._after(
                f"claim {queue}", SpanKind.CLIENT, attrs, start, context=Context()
            )
            store._claimed(queue, len(jobs))
            idle = self._idle_since_us
            if idle is not None:
                metric: Attributes = {n.SYSTEM: n.SYSTEM_NAME, n.DESTINATION: queue}
                for record in jobs:
                    if record.run_at_us >= idle:
                        latency = max(0, now_us - record.run_at_us) / US_PER_S
                        store._m.wake_latency.record(latency, metric)
        if len(jobs) >= n_jobs:
            self._idle_since_us = None  # there may be a backlog: not idle
        elif self._idle_since_us is None:
            self._idle_since_us = now_us  # drained: idle from this look on
        return result

    def dispatched(self, record: JobRecord) -> Trace:
        return self._claim

    async def process(
        self, record: JobRecord, job_trace: Trace, run: Callable[[Trace], Awaitable[None]]
    ) -> None:
        await self._store.process(record, run, worker=self._wid, claim=_valid(job_trace))

    async def acked(
        self, jobs: Sequence[tuple[JobRecord, Trace]], run: Awaitable[set[int]]
    ) -> set[int]:
        """A round of acks: one span, linked to the run of each job it acks
        (their spans have ended; a link is how a batch points at them)."""
        store, queue = self._store, self._queue
        links = [Link(ctx) for _, job_trace in jobs if (ctx := _valid(job_trace))]
        attrs = _base(n.SETTLE, "ack", queue)
        attrs[n.CLIENT_ID] = self._wid
        attrs[n.BATCH_COUNT] = len(jobs)
        with store._span(
            f"ack {queue}", SpanKind.CLIENT, attrs, context=Context(), links=links
        ) as span:
            acked = await run
            span.set_attribute(n.ACKED_COUNT, len(acked))
        store.acked(queue, len(acked))
        return acked

    def finish_headers(self, trace_: Trace) -> str | None:
        """The run's context, as headers: its dependents' runs link to it."""
        ran = _valid(trace_)
        if ran is None:
            return None
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(NonRecordingSpan(ran)))
        return encode_headers(carrier)

    def stopped(self) -> None:
        self._store._unwatch_queue(self._queue)
