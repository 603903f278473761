"""The web examples that pair an app with an ``alkstore worker`` process, run as
their READMEs say: the app served by hypercorn, the worker started with the
``alkstore`` command, on one SQLite file or one Postgres schema, and the same
order story for each (``harness.check_order_flow``).

- ``fastapi_app``: FastAPI on asyncio, the store opened in the lifespan.
- ``django_app``: ``manage.py migrate``, Django served as WSGI, enqueueing through
  ``alkstore.sync`` joined to Django's own connection.
- ``flask_app``: Flask-SQLAlchemy served as WSGI, enqueueing through
  ``alkstore.sync`` joined to the session's connection.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.backends import PG_DSN

from .harness import (
    ENGINES,
    EXAMPLES,
    SOON,
    Database,
    Launcher,
    check_order_flow,
    database,
    free_port,
    processes,
    wait_for_http,
)

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class WebExample:
    directory: str
    app: str  # what hypercorn serves
    handlers: str  # what alkstore worker runs
    worker_options: tuple[str, ...] = ()
    migrate: bool = False  # Django: `manage.py migrate` first

    def prepare(self, db: Database, run: Launcher) -> None:
        if not self.migrate:
            return
        if db.engine == "postgres":
            # The test's schema stands for the user's public schema: Django's
            # migrations need it to exist before alkstore's store creates it.
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{db.env["ALKSTORE_SCHEMA"]}"')
        migrate = run.start("migrate", ["manage.py", "migrate"], cwd=self.path, env=db.env)
        assert migrate.wait() == 0, run.describe()

    @property
    def path(self) -> Path:
        return EXAMPLES / self.directory


APPS = [
    WebExample("fastapi_app", "main:app", "tasks:handlers", ("--driver", "asyncio")),
    WebExample("django_app", "shop.wsgi:application", "orders.tasks:handlers", migrate=True),
    WebExample("flask_app", "app:app", "tasks:handlers"),
]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("example", APPS, ids=[a.directory for a in APPS])
def test_an_order_is_processed_by_the_worker_and_a_failed_one_leaves_no_job(
    example: WebExample, engine: str, tmp_path: Path
) -> None:
    with database(engine, tmp_path) as db, processes(tmp_path) as run:
        example.prepare(db, run)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        web = run.start(
            "web", ["-m", "hypercorn", example.app, "--bind", f"127.0.0.1:{port}"],
            cwd=example.path, env=db.env,
        )  # fmt: skip
        # The app opens (and so creates) the database; the worker, started
        # after it as the docs say, refuses a missing SQLite file.
        wait_for_http(f"{base}/queue", run)
        worker = run.start(
            "worker",
            ["-m", "alkstore", "worker", example.handlers, *example.worker_options, *db.cli],
            cwd=example.path, env=db.env,
        )  # fmt: skip
        check_order_flow(base, run, worker)
        assert web.stop(signal.SIGTERM, SOON) == 0, run.describe()
