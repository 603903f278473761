"""Helpers for the Postgres engine-rule tests: fresh schemas, stores opened
straight through ``alkstore.io_trio.open_postgres``, and a side connection
(plain psycopg, autocommit) for looking at and poking the server.

Every schema is named ``alk_t_<pid>_<hex>`` by ``tests.backends``, so the
session fixture in ``tests/conftest.py`` drops them afterwards. Nothing here
skips: an unreachable server makes the tests fail.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import trio

from alkstore import Clock, Store
from alkstore.io_trio import ListenerOptions, PostgresOptions, open_postgres
from tests.backends import BACKENDS, PG_DSN

# Generous bound for what must happen "soon"; tests never wait this long
# when they pass.
SOON = 5.0
# How long to wait before concluding that something did NOT happen.
QUIET = 0.3


def fresh_schema() -> str:
    """A new, empty schema name of this test process (dropped at session end)."""
    return BACKENDS["postgres-trio"].new_location(Path("."))


def app_name() -> str:
    """A unique ``application_name``, so a test can find its own backends."""
    return f"alk_test_{uuid.uuid4().hex[:12]}"


def dsn_with_app(application_name: str, dsn: str = PG_DSN) -> str:
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}application_name={application_name}"


@asynccontextmanager
async def open_pg(
    schema: str,
    *,
    pool_size: int = 4,
    clock: Clock | None = None,
    application_name: str | None = None,
    listener: ListenerOptions | None = None,
    seed: int | None = 0,
) -> AsyncIterator[Store]:
    """A trio store on ``schema`` (created or migrated on open)."""
    options = PostgresOptions(schema=schema, pool_size=pool_size)
    if listener is not None:
        options.listener = listener
    dsn = dsn_with_app(application_name) if application_name else PG_DSN
    async with open_postgres(dsn, options=options, clock=clock, seed=seed) as store:
        yield store


def sql(query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """One statement on a fresh autocommit side connection; its rows."""
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return [tuple(r) for r in cur.fetchall()] if cur.description is not None else []


async def asql(query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``sql`` off the event loop (it blocks on the network)."""
    return await trio.to_thread.run_sync(lambda: sql(query, params))


async def terminate_backend(pid: int) -> bool:
    """``pg_terminate_backend(pid)`` from a separate connection; waits for the
    backend to be gone (up to ``SOON``)."""
    rows = await asql("SELECT pg_terminate_backend(%s, %s)", (pid, int(SOON * 1000)))
    return bool(rows and rows[0][0])


async def backends_of(application_name: str) -> list[tuple[int, str, str | None]]:
    """(pid, state, wait_event_type) of every backend with this application name."""
    rows = await asql(
        "SELECT pid, coalesce(state, ''), wait_event_type FROM pg_stat_activity "
        "WHERE application_name = %s ORDER BY pid",
        (application_name,),
    )
    return [(int(r[0]), str(r[1]), r[2]) for r in rows]


def table(store: Store, name: str) -> str:
    """A caller's own table, inside the store's (per-test) schema."""
    return f'"{store._core.dialect.schema}".{name}'


async def wait_until(predicate: Any, timeout: float = SOON, step: float = 0.005) -> None:
    """Poll a synchronous predicate (real time) until it holds."""
    with trio.fail_after(timeout):
        while True:
            if predicate():
                return
            await trio.sleep(step)
