"""examples/flask_app run as its README says: the Flask app (Flask-SQLAlchemy)
served by hypercorn (WSGI) enqueueing through ``alkstore.sync`` joined to the
session's own connection, and the worker started with ``alkstore worker``, on one
SQLite file or one Postgres schema."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .harness import (
    ENGINES,
    EXAMPLES,
    SOON,
    check_order_flow,
    database,
    free_port,
    processes,
    wait_for_http,
)

pytestmark = pytest.mark.slow

APP = EXAMPLES / "flask_app"


@pytest.mark.parametrize("engine", ENGINES)
def test_an_order_is_processed_by_the_worker_and_a_failed_one_leaves_no_job(
    engine: str, tmp_path: Path
) -> None:
    with database(engine, tmp_path) as db, processes(tmp_path) as run:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web = run.start(
            "web", ["-m", "hypercorn", "app:app", "--bind", f"127.0.0.1:{port}"],
            cwd=APP, env=db.env,
        )  # fmt: skip
        worker = run.start(
            "worker", ["-m", "alkstore", "worker", "tasks:handlers", *db.cli], cwd=APP, env=db.env
        )
        wait_for_http(f"{base}/queue", run)
        check_order_flow(base, run, worker)
        assert web.stop(signal.SIGTERM, SOON) == 0, run.describe()
