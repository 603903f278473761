"""Prometheus text exposition of a store's metrics: what ``alkstore worker
--metrics-port N`` serves while the worker runs.

This is configuration an application would otherwise write itself, so it is
the one place alkstore uses the OpenTelemetry SDK: a ``MeterProvider`` whose
reader is OpenTelemetry's Prometheus exporter, the store instrumented with it
(``alkstore.otel.instrument``), and ``prometheus_client``'s WSGI app serving
the exposition on one thread. It needs ``pip install 'alkstore[prometheus]'``
and is imported only when the flag is given.

The server lives exactly as long as the ``serve_metrics`` block: on the way
out the store is uninstrumented, the server thread is stopped and joined and
its socket closed.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..api.store import Store
from ..protocol.values.errors import InvalidArgument, UsageError, brief
from ..protocol.values.ints import check_int

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

MISSING = (
    "serving metrics needs OpenTelemetry's Prometheus exporter: "
    "pip install 'alkstore[prometheus]'"
)
# How often the server thread looks whether it was asked to stop.
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class MetricsServer:
    """Where the metrics are served."""

    host: str
    port: int

    @property
    def url(self) -> str:
        """The scrape URL (any path serves the same exposition)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not news: nothing on stderr."""


def _server_class(host: str) -> type[WSGIServer]:
    class Server(WSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    return Server


@asynccontextmanager
async def serve_metrics(
    store: Store,
    port: int,
    *,
    host: str = "127.0.0.1",
    tracer_provider: TracerProvider | None = None,
    refresh_interval: float = 10.0,
) -> AsyncIterator[MetricsServer]:
    """Instrument ``store`` and serve its metrics in Prometheus text format on
    ``host:port`` (``port`` 0: any free port; ``MetricsServer.port`` says
    which) until the block ends. ``tracer_provider``, if given, also gets
    the store's spans; ``refresh_interval`` is how often the gauges are
    sampled (``alkstore.otel.instrument``). Raises ``UsageError`` when the
    extra is missing or the port cannot be bound."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from prometheus_client import REGISTRY, make_wsgi_app
    except ImportError as exc:
        raise UsageError(MISSING) from exc
    from .. import otel

    port = check_int(port, "metrics port", lo=0, hi=65535)
    if not isinstance(host, str) or not host:
        raise InvalidArgument(f"host must be a non-empty str, got {brief(host)}")
    runtime = store._core.runtime
    # The reader registers with prometheus_client's default registry (so the
    # exposition also has the process's own metrics) until shut down.
    reader = PrometheusMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        server = make_server(
            host, port, make_wsgi_app(REGISTRY),
            server_class=_server_class(host), handler_class=_Quiet,
        )  # fmt: skip
    except OSError as exc:
        provider.shutdown()
        raise UsageError(f"cannot serve metrics on {host}:{port}: {exc}") from exc
    try:
        telemetry = otel.instrument(
            store, meter_provider=provider, tracer_provider=tracer_provider,
            refresh_interval=refresh_interval,
        )  # fmt: skip
    except BaseException:
        server.server_close()
        provider.shutdown()
        raise
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": _POLL_S},
        name=f"alkstore-metrics-{server.server_port}", daemon=True,
    )  # fmt: skip
    thread.start()
    try:
        yield MetricsServer(host, server.server_port)
    finally:
        telemetry.close()
        # Shielded: a cancelled worker still stops its server thread.
        with runtime.shield():
            await runtime.run_in_thread(server.shutdown)
        thread.join()
        server.server_close()
        provider.shutdown()


__all__ = ["MISSING", "MetricsServer", "serve_metrics"]
