"""What the tests of ``alkstore.otel`` share: an OpenTelemetry SDK whose
spans and metrics stay in memory, and a store instrumented with it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import alkstore.otel
from alkstore import Store

ATTRIBUTES = {
    "queue": "messaging.destination.name",
    "stream": "messaging.destination.name",
    "consumer": "messaging.consumer.group.name",
    "state": "alkstore.job.state",
    "reason": "alkstore.job.dead_reason",
    "error": "error.type",
}


@dataclass
class Capture:
    """An SDK tracer and meter provider that keep everything in memory."""

    spans_out: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)

    def __post_init__(self) -> None:
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_out))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("tests")

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """Finished spans, oldest first (those named ``name``, if given)."""
        found = list(self.spans_out.get_finished_spans())
        return [s for s in found if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        """The one finished span named ``name``."""
        (found,) = self.spans(name)
        return found

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric`` now (empty when it has none)."""
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        if data is None:
            return out
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        out += list(m.data.data_points)
        return out

    def value(self, metric: str, **attributes: Any) -> Any:
        """The value (a counter's or gauge's; a histogram's count) of the one
        point of ``metric`` whose attributes include ``attributes`` (by the
        short names of ``ATTRIBUTES``); None when there is none."""
        wanted = {ATTRIBUTES[k]: v for k, v in attributes.items()}
        hits = [p for p in self.points(metric) if wanted.items() <= dict(p.attributes).items()]
        assert len(hits) <= 1, hits
        if not hits:
            return None
        point = hits[0]
        return point.count if hasattr(point, "bucket_counts") else point.value

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def capture() -> Iterator[Capture]:
    c = Capture()
    yield c
    c.shutdown()


@pytest.fixture
async def instrumented(store: Store, capture: Capture) -> AsyncIterator[alkstore.otel.Telemetry]:
    """``store`` instrumented with ``capture``'s providers (gauges sampled
    only when the test says: ``refresh()``)."""
    telemetry = alkstore.otel.instrument(
        store,
        tracer_provider=capture.tracer_provider,
        meter_provider=capture.meter_provider,
        refresh_interval=3600.0,
    )
    yield telemetry
    telemetry.close()
