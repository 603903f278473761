"""The trio driver: ``open_sqlite`` (and, later, ``open_postgres``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..api.store import Store
from ..runner.open_postgres import PostgresOptions, open_postgres_store
from ..runner.open_sqlite import SqliteOptions, open_sqlite_store
from ..runner.runtime import Clock
from .runtime import TrioRuntime


@asynccontextmanager
async def open_sqlite(
    path: str | os.PathLike[str],
    *,
    options: SqliteOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
) -> AsyncIterator[Store]:
    """Open (creating or migrating) a SQLite store at ``path`` for trio code.

    Background tasks (the cross-process watcher, maintenance) run in a nursery
    owned by this block and are cancelled and joined when it ends.
    """
    async with open_sqlite_store(
        TrioRuntime(), path, options=options, clock=clock, seed=seed
    ) as store:
        yield store



@asynccontextmanager
async def open_postgres(
    dsn: str | None = None,
    *,
    options: PostgresOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
) -> AsyncIterator[Store]:
    """Open (creating or migrating) a Postgres store.

    ``dsn`` defaults to ``$ALKSTORE_PG_DSN``, then the local test server.
    The listener task runs in a task group owned by this block.
    """
    async with open_postgres_store(
        TrioRuntime(), dsn, options=options, clock=clock, seed=seed
    ) as store:
        yield store

__all__ = [
    "PostgresOptions",
    "SqliteOptions",
    "TrioRuntime",
    "open_postgres",
    "open_sqlite",
]
