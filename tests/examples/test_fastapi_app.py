"""examples/fastapi_app run as its README says: the FastAPI app served by hypercorn
(asyncio) and the worker started with ``alkstore worker``, as two processes on one
SQLite file or one Postgres schema."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .harness import (
    ENGINES,
    EXAMPLES,
    SOON,
    STARTUP,
    database,
    free_port,
    http,
    processes,
    until,
    wait_for_http,
)

pytestmark = pytest.mark.slow

APP = EXAMPLES / "fastapi_app"


@pytest.mark.parametrize("engine", ENGINES)
def test_an_order_is_processed_by_the_worker_and_a_failed_one_leaves_no_job(
    engine: str, tmp_path: Path
) -> None:
    with database(engine, tmp_path) as db, processes(tmp_path) as run:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web = run.start(
            "web", ["-m", "hypercorn", "main:app", "--bind", f"127.0.0.1:{port}"],
            cwd=APP, env=db.env,
        )  # fmt: skip
        worker = run.start(
            "worker",
            ["-m", "alkstore", "worker", "tasks:handlers", "--driver", "asyncio", *db.cli],
            cwd=APP, env=db.env,
        )  # fmt: skip
        wait_for_http(f"{base}/queue", run)

        status, body = http("POST", f"{base}/orders", {"id": "A-1", "item": "book"})
        assert status == 201, body

        def processed() -> bool:
            status, order = http("GET", f"{base}/orders/A-1")
            assert status == 200, order
            return bool(order["status"] == "processed")

        until(processed, STARTUP, "order A-1 processed by the worker", run)
        assert worker.stop(signal.SIGTERM) == 0, run.describe()  # drained cleanly

        # With no worker left, what the queue holds is what the requests enqueued. The
        # duplicate's job was enqueued before its INSERT failed: the rollback took it.
        status, body = http("POST", f"{base}/orders", {"id": "A-1", "item": "lamp"})
        assert status == 409, body
        status, body = http("POST", f"{base}/orders", {"id": "B-2", "item": "lamp"})
        assert status == 201, body
        status, stats = http("GET", f"{base}/queue")
        assert status == 200 and (stats["ready"], stats["processing"]) == (1, 0), stats
        status, order = http("GET", f"{base}/orders/A-1")
        assert (order["item"], order["status"]) == ("book", "processed")

        assert web.stop(signal.SIGTERM, SOON) == 0, run.describe()
