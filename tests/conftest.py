from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from alkstore.api.store import Store
from alkstore.runner.runtime import ManualClock, SystemClock

from .backends import BACKENDS, PG_DSN, PG_TEST_SCHEMA_PREFIX, Backend, selected_backends


def _drop_test_schemas(*, only_pid: int | None) -> None:
    """Drop this process's test schemas, or those of test runs no longer alive."""
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
            (PG_TEST_SCHEMA_PREFIX.replace("_", r"\_") + "%",),
        ).fetchall()
        for (name,) in rows:
            pid_text = name[len(PG_TEST_SCHEMA_PREFIX) :].split("_", 1)[0]
            pid = int(pid_text) if pid_text.isdigit() else None
            if only_pid is not None and pid != only_pid:
                continue
            if only_pid is None and pid is not None and _alive(pid):
                continue
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session", autouse=True)
def _postgres_test_schemas() -> Iterator[None]:
    """Each Postgres test works in a schema of its own; drop them all around
    the session. A missing server fails here, loudly: never a skip."""
    if not any(BACKENDS[b].engine == "postgres" for b in selected_backends()):
        yield
        return
    _drop_test_schemas(only_pid=None)
    yield
    _drop_test_schemas(only_pid=os.getpid())


@pytest.fixture(params=selected_backends())
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
def location(backend: Backend, tmp_path: Path) -> str:
    """A fresh database location for this test on this backend."""
    return backend.new_location(tmp_path)


@pytest.fixture
def clock() -> ManualClock:
    """A clock the test moves by hand; starts at the real current time."""
    return ManualClock(SystemClock().now_us())


@pytest.fixture
async def store(backend: Backend, location: str, clock: ManualClock) -> AsyncIterator[Store]:
    """A store on a fresh database whose time is ``clock``."""
    async with backend.open(location, clock=clock) as s:
        yield s
