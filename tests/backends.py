"""The backends every contract test runs on.

A backend knows how to open a fresh store on its engine x driver pair. Add a
pair here and every test that takes the ``backend`` or ``store`` fixture runs
on it, unedited: a test on a trio backend runs under pytest-trio, one on an
asyncio backend on an asyncio event loop of its own (``tests/conftest.py``).
Test bodies written against trio itself (``tests/worker``, ``tests/process``)
take their ``backend`` from ``selected_backends(driver="trio")`` instead.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alkstore import Clock, Store

Opener = Callable[..., AbstractAsyncContextManager[Store]]


@dataclass(frozen=True)
class Backend:
    id: str
    engine: str
    driver: str
    # open(location, clock=None, seed=None): a store on the same database as
    # every other store opened with the same location.
    open_at: Callable[..., AbstractAsyncContextManager[Store]]
    # A fresh, empty location (a file path, a schema name, ...).
    new_location: Callable[[Path], str]

    @asynccontextmanager
    async def open(
        self, location: str, *, clock: Clock | None = None, seed: int | None = 0, **kw: Any
    ) -> AsyncIterator[Store]:
        async with self.open_at(location, clock=clock, seed=seed, **kw) as store:
            yield store


def _sqlite_location(tmp: Path) -> str:
    return str(tmp / f"alkstore-{uuid.uuid4().hex[:8]}.db")


# ``housekeeping_interval=`` (seconds, or None for none) is taken by every
# opener below, whatever the engine: tests that must not see a background
# prune (a model compared row for row) turn it off.
_DEFAULT = object()


def _sqlite_trio(location: str, **kw: Any) -> AbstractAsyncContextManager[Store]:
    from alkstore.io_trio import SqliteOptions, open_sqlite

    interval = kw.pop("housekeeping_interval", _DEFAULT)
    if interval is not _DEFAULT:
        kw["options"] = SqliteOptions(housekeeping_interval=interval)
    return open_sqlite(location, **kw)


def _sqlite_asyncio(location: str, **kw: Any) -> AbstractAsyncContextManager[Store]:
    from alkstore.io_asyncio import SqliteOptions, open_sqlite

    interval = kw.pop("housekeeping_interval", _DEFAULT)
    if interval is not _DEFAULT:
        kw["options"] = SqliteOptions(housekeeping_interval=interval)
    return open_sqlite(location, **kw)


PG_DSN = os.environ.get("ALKSTORE_DSN") or "postgresql://postgres@127.0.0.1:5432/test"
# Every Postgres test gets its own schema, named for the test process so that
# concurrent test runs never drop each other's: alk_t_<pid>_<random>.
PG_TEST_SCHEMA_PREFIX = "alk_t_"


def _pg_location(tmp: Path) -> str:
    return f"{PG_TEST_SCHEMA_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"


def _postgres_trio(location: str, **kw: Any) -> AbstractAsyncContextManager[Store]:
    from alkstore.io_trio import PostgresOptions, open_postgres

    options = kw.pop("options", None) or PostgresOptions(schema=location, pool_size=4)
    interval = kw.pop("housekeeping_interval", _DEFAULT)
    if interval is not _DEFAULT:
        options.housekeeping_interval = interval
    return open_postgres(PG_DSN, options=options, **kw)


def _postgres_asyncio(location: str, **kw: Any) -> AbstractAsyncContextManager[Store]:
    from alkstore.io_asyncio import PostgresOptions, open_postgres

    options = kw.pop("options", None) or PostgresOptions(schema=location, pool_size=4)
    interval = kw.pop("housekeeping_interval", _DEFAULT)
    if interval is not _DEFAULT:
        options.housekeeping_interval = interval
    return open_postgres(PG_DSN, options=options, **kw)


# The trio backends' tests run under pytest-trio; the asyncio backends' tests
# run on a fresh asyncio event loop each (tests/conftest.py).
BACKENDS: dict[str, Backend] = {
    "sqlite-trio": Backend("sqlite-trio", "sqlite", "trio", _sqlite_trio, _sqlite_location),
    "postgres-trio": Backend("postgres-trio", "postgres", "trio", _postgres_trio, _pg_location),
    "sqlite-asyncio": Backend(
        "sqlite-asyncio", "sqlite", "asyncio", _sqlite_asyncio, _sqlite_location
    ),
    "postgres-asyncio": Backend(
        "postgres-asyncio", "postgres", "asyncio", _postgres_asyncio, _pg_location
    ),
}



def _sync_backend(engine: str, companion: Opener) -> Backend:
    from .sync_adapter import opener

    new_location = _sqlite_location if engine == "sqlite" else _pg_location
    return Backend(f"{engine}-sync", engine, "sync", opener(engine, companion), new_location)


# The blocking stores of ``alkstore.sync`` (tests/sync_adapter.py): only the
# tests marked ``producer`` run on them; their consumer side (claims,
# workers, subscriptions, listening) is an async trio store on the same
# database.
BACKENDS["sqlite-sync"] = _sync_backend("sqlite", _sqlite_trio)
BACKENDS["postgres-sync"] = _sync_backend("postgres", _postgres_trio)


def selected_backends(*, driver: str | None = None, sync: bool = False) -> list[str]:
    """All backends, or those named in ALKSTORE_BACKENDS (comma-separated);
    only those of ``driver`` when it is given; the blocking ``*-sync`` ones
    only when ``sync`` (or ``driver="sync"``)."""
    wanted = os.environ.get("ALKSTORE_BACKENDS")
    names = [n.strip() for n in wanted.split(",") if n.strip()] if wanted else list(BACKENDS)
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise RuntimeError(f"unknown backends in ALKSTORE_BACKENDS: {unknown}")
    if driver is not None:
        return [n for n in names if BACKENDS[n].driver == driver]
    return [n for n in names if sync or BACKENDS[n].driver != "sync"]
