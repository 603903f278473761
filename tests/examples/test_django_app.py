"""examples/django_app run as its README says: ``manage.py migrate``, the Django
app served by hypercorn (WSGI) enqueueing through ``alkstore.sync`` joined to
Django's own connection, and the worker started with ``alkstore worker``, on one
SQLite file or one Postgres schema."""

from __future__ import annotations

import signal
from pathlib import Path

import psycopg
import pytest

from tests.backends import PG_DSN

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

APP = EXAMPLES / "django_app"


@pytest.mark.parametrize("engine", ENGINES)
def test_an_order_is_processed_by_the_worker_and_a_failed_one_leaves_no_job(
    engine: str, tmp_path: Path
) -> None:
    with database(engine, tmp_path) as db, processes(tmp_path) as run:
        if engine == "postgres":
            # The test's schema stands for the user's public schema: Django's
            # migrations need it to exist.
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{db.env["ALKSTORE_SCHEMA"]}"')
        migrate = run.start("migrate", ["manage.py", "migrate"], cwd=APP, env=db.env)
        assert migrate.wait() == 0, run.describe()

        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web = run.start(
            "web", ["-m", "hypercorn", "shop.wsgi:application", "--bind", f"127.0.0.1:{port}"],
            cwd=APP, env=db.env,
        )  # fmt: skip
        worker = run.start(
            "worker", ["-m", "alkstore", "worker", "orders.tasks:handlers", *db.cli],
            cwd=APP, env=db.env,
        )  # fmt: skip
        wait_for_http(f"{base}/queue", run)
        check_order_flow(base, run, worker)
        assert web.stop(signal.SIGTERM, SOON) == 0, run.describe()
