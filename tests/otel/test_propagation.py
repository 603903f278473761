"""The trace context crosses processes with the job: a producer process
enqueues under a span; the handler runs here, and its span continues the
producer's trace, its parent the producer's enqueue span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import alkstore.otel
from alkstore import Job
from tests.backends import Backend
from tests.contract import aio
from tests.contract.helpers import wait_until

from .conftest import Capture

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run_producer(engine: str, location: str, spans: Path) -> list[dict[str, Any]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    subprocess.run(
        [sys.executable, "-m", "tests.otel.producer", engine, location, str(spans)],
        cwd=ROOT, env=env, check=True, timeout=120, capture_output=True,
    )  # fmt: skip
    return [json.loads(line) for line in spans.read_text().splitlines()]


async def test_the_handler_in_another_process_continues_the_producers_trace(
    backend: Backend, location: str, tmp_path: Path, capture: Capture
) -> None:
    # The producer runs first, alone (nothing of this process's is open yet).
    produced = {s["name"]: s for s in run_producer(backend.engine, location, tmp_path / "p.jsonl")}
    request, enqueue = produced["web request"], produced["enqueue cross"]
    assert enqueue["kind"] == "PRODUCER" and enqueue["parent_id"] == request["span_id"]
    assert enqueue["trace_id"] == request["trace_id"]

    async with backend.open(location) as store:
        telemetry = alkstore.otel.instrument(store, tracer_provider=capture.tracer_provider)
        seen: list[Any] = []

        async def handler(job: Job) -> None:
            seen.append(job.payload)

        async def worker(task_status: Any = None) -> None:
            await store.queue("cross").work(handler, task_status=task_status)

        async with aio.open_task_group() as group:
            await group.start(worker)
            await wait_until(lambda: capture.spans("process cross"))
            group.cancel()
        telemetry.close()
    assert seen == [{"order": 7}]  # the payload is the user's alone
    process = capture.span("process cross")
    assert f"{process.context.trace_id:032x}" == enqueue["trace_id"]
    assert process.parent is not None and process.parent.is_remote
    assert f"{process.parent.span_id:016x}" == enqueue["span_id"]
