"""A producer in a process of its own (``python -m tests.otel.producer
ENGINE LOCATION SPANS``): under a span of its own, it enqueues one job into
queue ``cross`` of the store at LOCATION (a SQLite file, or a Postgres
schema on $ALKSTORE_DSN) through an instrumented store, and writes every
span it made to SPANS, one JSON object a line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import IO

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import alkstore.otel
from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite
from tests.backends import PG_DSN


class JsonLines(SpanExporter):
    """Each span as a line of JSON: name, kind, ids (hex) and parent."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            assert span.context is not None
            record = {
                "name": span.name,
                "kind": span.kind.name,
                "trace_id": f"{span.context.trace_id:032x}",
                "span_id": f"{span.context.span_id:016x}",
                "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
            }
            self._out.write(json.dumps(record) + "\n")
        self._out.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._out.close()


async def produce(engine: str, location: str, provider: TracerProvider) -> None:
    opener = (
        open_sqlite(location)
        if engine == "sqlite"
        else open_postgres(PG_DSN, options=PostgresOptions(schema=location))
    )
    async with opener as store:
        alkstore.otel.instrument(store, tracer_provider=provider)
        with provider.get_tracer("producer").start_as_current_span("web request"):
            await store.queue("cross").enqueue({"order": 7})


def main() -> None:
    engine, location, spans = sys.argv[1:]
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLines(open(spans, "w"))))  # noqa: SIM115
    trio.run(produce, engine, location, provider)
    provider.shutdown()


if __name__ == "__main__":
    main()
