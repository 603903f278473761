"""OpenTelemetry traces and metrics for a store (``pip install 'alkstore[otel]'``).

    import alkstore.otel

    telemetry = alkstore.otel.instrument(store)

From then on the store's enqueues, claims, handler runs, acks, retries,
failures, stream publishes and deliveries and lock acquisitions make spans,
and its jobs counters, histograms and gauges, through the OpenTelemetry API
only: what becomes of them is the application's choice of SDK and exporter
(none configured: nothing, at the API's no-op cost). An enqueue puts the
current trace context into the job's headers, beside its payload, so the
handler's span continues the producer's trace, in whichever process it runs.
docs/observability.md lists every span and metric.

alkstore imports this module (and OpenTelemetry) only when you do: a store
that is not instrumented runs its operations through a null telemetry
object, which hands each round trip back untouched.
"""

from __future__ import annotations

from collections.abc import Iterable

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider
except ImportError as exc:  # pragma: no cover - what a user without the extra sees
    raise ImportError(
        "alkstore.otel needs the OpenTelemetry API: pip install 'alkstore[otel]'"
    ) from exc

from .. import __version__
from ..api.core.telemetry import NULL_TELEMETRY
from ..api.job import Job
from ..api.store import Store
from ..protocol.values.errors import Closed, InvalidArgument, UsageError, brief
from ..protocol.values.names import check_identifier, check_name
from ..protocol.values.timeconv import check_seconds
from .hooks import StoreHooks, producer_context
from .instruments import instruments_for


class Telemetry:
    """A store's instrumentation, from ``instrument``.

    Gauges (queue depth, the oldest ready job's age, consumer lag) are
    sampled by a task of the store's, every ``refresh_interval`` seconds:
    the queues named to ``instrument``, those this process's workers serve
    while they run, and the consumers named to ``instrument`` or subscribed
    in this process.
    """

    def __init__(self, hooks: StoreHooks) -> None:
        self._hooks = hooks

    async def refresh(self) -> None:
        """Sample the gauges now (a store opened without a background task
        group, such as ``open_simulated``'s, is sampled only by this)."""
        if self._hooks.closed:
            raise Closed("this telemetry was closed")
        await self._hooks.refresh()

    def close(self) -> None:
        """Stop instrumenting the store: no more spans or metrics from it,
        its gauges are no longer reported, and its sampling task ends.
        Idempotent."""
        hooks = self._hooks
        if hooks.closed:
            return
        hooks.close()
        hooks._m.discard(hooks)
        core = hooks._core
        if core.telemetry is hooks:
            core.telemetry = NULL_TELEMETRY

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._hooks.closed


def instrument(
    store: Store,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    queues: Iterable[str] = (),
    consumers: Iterable[tuple[str, str]] = (),
    refresh_interval: float = 10.0,
) -> Telemetry:
    """Instrument ``store``: spans and metrics from now until it closes (or
    ``Telemetry.close``). ``tracer_provider`` / ``meter_provider`` default
    to the global ones. ``queues`` and ``consumers`` (``(stream,
    consumer)`` pairs) are sampled for the gauges besides those this
    process works on; ``refresh_interval`` is how often, in seconds.

    Raises ``UsageError`` if the store is already instrumented, ``Closed``
    if it is closed.
    """
    if not isinstance(store, Store):
        raise InvalidArgument(f"store must be a Store, got {brief(store)}")
    if store.closed:
        raise Closed("the store is closed")
    core = store._core
    if core.telemetry is not NULL_TELEMETRY:
        raise UsageError("this store is already instrumented")
    interval = check_seconds(refresh_interval, "refresh_interval")
    names = [check_name(q, "queue") for q in _listed(queues, "queues")]
    pairs = [_pair(p) for p in _listed(consumers, "consumers")]
    tracer = trace.get_tracer("alkstore", __version__, tracer_provider=tracer_provider)
    instruments = instruments_for(meter_provider)
    hooks = StoreHooks(
        core, tracer, instruments, queues=names, consumers=pairs, refresh_interval=interval
    )
    instruments.add(hooks)
    core.telemetry = hooks
    if core.background is not None:
        core.background.start_soon(hooks.run)
    return Telemetry(hooks)


def job_context(job: Job) -> Context:
    """The trace context the code that enqueued ``job`` was in (an empty
    context if it was not instrumented): the parent for spans of your own
    when you claim jobs yourself rather than through ``Queue.work``, e.g.
    ``tracer.start_as_current_span("handle", context=job_context(job))``."""
    if not isinstance(job, Job):
        raise InvalidArgument(f"job must be a Job, got {brief(job)}")
    return producer_context(job._record)


def _listed(values: object, what: str) -> list[object]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{what} must be a list, got {brief(values)}")
    return list(values)


def _pair(value: object) -> tuple[str, str]:
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidArgument(f"consumers are (stream, consumer) pairs, got {brief(value)}")
    stream, consumer = value
    return check_name(stream, "stream"), check_identifier(consumer, "consumer")


__all__ = ["Telemetry", "instrument", "job_context"]
