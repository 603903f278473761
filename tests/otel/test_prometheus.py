"""``serve_metrics`` (``alkstore worker --metrics-port``): the store's
metrics in Prometheus text exposition, scraped over HTTP and read with
prometheus_client's parser, on every backend; nothing left behind after."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import urllib.request
from typing import Any

import pytest
import sniffio
import trio
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from alkstore import Job, Store, UsageError
from alkstore.cli.metrics import MISSING, serve_metrics
from tests.contract import aio
from tests.contract.helpers import wait_until


async def in_thread(fn: Any) -> Any:
    if sniffio.current_async_library() == "trio":
        return await trio.to_thread.run_sync(fn)
    return await asyncio.to_thread(fn)


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every alkstore sample of an exposition: (name, labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("alkstore_"):
                labels = {k: v for k, v in s.labels.items() if not k.startswith("otel_scope")}
                out[s.name, frozenset(labels.items())] = s.value
    return out


def labels(**kw: str) -> frozenset[tuple[str, str]]:
    return frozenset({"messaging_system": "alkstore", **kw}.items())


def metrics_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("alkstore-metrics")]


async def test_the_exposition_has_the_stores_metrics(store: Store) -> None:
    q = store.queue("q")
    done: list[Any] = []

    async def handler(job: Job) -> None:
        done.append(job.payload)

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, task_status=task_status)

    async with serve_metrics(store, 0, refresh_interval=0.05) as server:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}/metrics"
        await q.enqueue("now")
        await q.enqueue("later", delay=3600)
        async with aio.open_task_group() as group:
            await group.start(worker)
            await wait_until(lambda: done == ["now"])

            def scrape() -> dict[Any, float]:
                with urllib.request.urlopen(server.url, timeout=10) as answer:
                    assert answer.status == 200
                    assert answer.headers["Content-Type"].startswith("text/plain")
                    return samples(answer.read().decode())

            async def scraped_until(**values: float) -> dict[Any, float]:
                """Scrape until the samples of ``values`` (by (name, labels)) are so."""
                wanted = {eval_key(k): v for k, v in values.items()}
                seen: dict[Any, float] = {}
                async with aio.fail_after(10):
                    while any(seen.get(k) != v for k, v in wanted.items()):
                        seen = await in_thread(scrape)
                        await aio.sleep(0.02)
                return seen

            queue = {"messaging_destination_name": "q"}

            def eval_key(name: str) -> Any:
                metric, _, state = name.partition("__")
                extra = {"alkstore_job_state": state} if state else {}
                return metric, labels(**queue, **extra)

            got = await scraped_until(alkstore_jobs_acked_total=1.0)
            assert got["alkstore_jobs_enqueued_total", labels(**queue)] == 2.0
            assert got["alkstore_jobs_claimed_total", labels(**queue)] == 1.0
            assert got["alkstore_job_duration_seconds_count", labels(**queue)] == 1.0
            # The worker's queue is sampled while it runs.
            got = await scraped_until(
                alkstore_queue_depth__scheduled=1.0, alkstore_queue_depth__ready=0.0,
                alkstore_queue_depth__processing=0.0,
            )  # fmt: skip
            assert got["alkstore_queue_oldest_ready_age_seconds", labels(**queue)] == 0.0
            group.cancel()
        port = server.port
    # Gone: the thread, the socket, and the metrics from the default registry.
    assert metrics_threads() == []
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert b"alkstore_" not in generate_latest(REGISTRY)


async def test_a_port_in_use_or_the_extra_missing_is_a_usage_error(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(UsageError, match="cannot serve metrics"):
            async with serve_metrics(store, taken.getsockname()[1]):
                pass
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.prometheus", None)
    with pytest.raises(UsageError) as refused:
        async with serve_metrics(store, 0):
            pass
    assert str(refused.value) == MISSING and "alkstore[prometheus]" in MISSING
    assert metrics_threads() == []
    # Nothing was left instrumented: the next try can instrument the store.
    monkeypatch.delitem(sys.modules, "opentelemetry.exporter.prometheus")
    async with serve_metrics(store, 0):
        pass
