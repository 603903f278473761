"""Rule: a stream subscriber rides out dropped connections. Invariant:
whatever backends of the subscriber's store the server terminates (pooled
ones mid-read included, the listening one too), ``async for`` over the
receiver never raises and never ends: every event published arrives, in
order, once.

Two ways to cut a connection off: terminating every backend of the store
at once (as in the field: whether a read finds its connection dead depends
on timing), and terminating a backend while its read waits on a table lock
the test holds (the read is surely cut off mid-way, every time).

Both drivers: the tests take the contract suite's ``backend`` fixture
(Postgres backends only), so each runs on trio and on asyncio
(``tests/conftest.py`` runs the asyncio ones on a loop of their own)."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import pytest

from alkstore import QueueStats, Store, StreamEvent
from tests.backends import BACKENDS, PG_DSN, Backend, selected_backends
from tests.contract import aio

from .pg import SOON, app_name, dsn_with_app, sql

TRIALS = 20


@pytest.fixture(params=[b for b in selected_backends() if BACKENDS[b].engine == "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@asynccontextmanager
async def open_named(
    backend: Backend, schema: str, application_name: str, *, pool_size: int
) -> AsyncIterator[Store]:
    """A store of ``backend``'s driver whose every server connection carries
    ``application_name``, so the test can find (and terminate) them all."""
    driver = importlib.import_module(f"alkstore.io_{backend.driver}")
    options = driver.PostgresOptions(schema=schema, pool_size=pool_size)
    async with driver.open_postgres(dsn_with_app(application_name), options=options) as store:
        yield store


def _terminate_without_waiting(name: str) -> int:
    """``pg_terminate_backend`` on every backend of ``name``, not waiting for
    them to go: the store may take a connection whose end is still on its way.
    (Blocking calls on purpose: a few milliseconds, and the same on trio and
    asyncio.)"""
    rows = sql("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,))
    for (pid,) in rows:
        sql("SELECT pg_terminate_backend(%s)", (pid,))
    return len(rows)


async def test_a_subscriber_rides_out_terminated_connections(
    backend: Backend, location: str
) -> None:
    name = app_name()
    async with (
        open_named(backend, location, name, pool_size=2) as store,
        backend.open(location) as publisher,
    ):
        stream = publisher.stream("s")
        got: list[int] = []
        async with (
            aio.fail_after(SOON * TRIALS),
            store.stream("s").subscribe("c", backstop=0.2) as events,
        ):
            for trial in range(TRIALS):
                killed = _terminate_without_waiting(name)
                assert killed >= 1
                await stream.publish(trial)
                async with aio.fail_after(SOON):
                    event = await events.recv()
                assert event is not None, "the receiver ended"
                got.append(event.payload)
        assert got == list(range(TRIALS))


async def test_a_read_retries_once_on_a_fresh_connection(backend: Backend, location: str) -> None:
    """A read-only plan whose pooled connection turns out dead runs again on
    a new one, so the caller never sees the drop."""
    name = app_name()
    async with open_named(backend, location, name, pool_size=1) as store:
        q = store.queue("q")
        await q.enqueue(1)
        for _ in range(5):
            _terminate_without_waiting(name)
            assert (await q.stats()).ready == 1


@asynccontextmanager
async def table_locked(schema: str, table: str) -> AsyncIterator[None]:
    """An ACCESS EXCLUSIVE lock on one of alkstore's tables, held by a side
    connection for the block: every read of that table waits for it."""
    with psycopg.connect(PG_DSN) as locker:
        locker.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')
        try:
            yield
        finally:
            locker.rollback()


async def next_waiter(name: str, seen: set[int]) -> int:
    """The pid of a backend of ``name``, not in ``seen``, waiting on a lock
    (a read in flight), once there is one."""
    async with aio.fail_after(SOON):
        while True:
            rows = sql(
                "SELECT pid FROM pg_stat_activity "
                "WHERE application_name = %s AND wait_event_type = 'Lock'",
                (name,),
            )
            fresh = [pid for (pid,) in rows if pid not in seen]
            if fresh:
                return int(fresh[0])
            await aio.sleep(0.01)


async def cut_off_next_waiter(name: str, seen: set[int]) -> int:
    """Terminate the next read in flight of ``name`` (``next_waiter``); its
    pid joins ``seen``."""
    pid = await next_waiter(name, seen)
    sql("SELECT pg_terminate_backend(%s)", (pid,))
    seen.add(pid)
    return pid


async def test_a_read_cut_off_mid_way_runs_again_on_a_fresh_connection(
    backend: Backend, location: str
) -> None:
    """A read whose connection dies while the read is in flight runs again,
    once, on a new connection: the caller gets its answer, not the drop."""
    name = app_name()
    async with open_named(backend, location, name, pool_size=1) as store:
        q = store.queue("q")
        await q.enqueue(1)
        got: list[QueueStats] = []

        async def read() -> None:
            got.append(await q.stats())

        seen: set[int] = set()
        # (The lock is released before the task group waits for the read.)
        async with aio.open_task_group() as group, table_locked(location, "jobs"):
            group.start_soon(read)
            await cut_off_next_waiter(name, seen)
            # The same read, again, on a fresh connection (waiting on the lock).
            await next_waiter(name, seen)
        assert [s.ready for s in got] == [1]


async def test_a_subscriber_rides_out_reads_cut_off_mid_way(
    backend: Backend, location: str
) -> None:
    """A subscriber's read cut off twice in a row (the one run again on a
    fresh connection too, so the read itself fails) and once more: ``recv``
    waits and reads again each time, and returns the event once it can."""
    name = app_name()
    async with (
        open_named(backend, location, name, pool_size=2) as store,
        backend.open(location) as publisher,
    ):
        got: list[StreamEvent | None] = []
        async with store.stream("s").subscribe("c", backstop=0.2) as events:

            async def receive() -> None:
                async with aio.fail_after(SOON * 4):
                    got.append(await events.recv())

            seen: set[int] = set()
            async with aio.open_task_group() as group:
                async with table_locked(location, "events"):
                    group.start_soon(receive)
                    for _ in range(3):
                        await cut_off_next_waiter(name, seen)
                    await aio.sleep(0.1)
                    assert not got, "recv returned while every read was failing"
                await publisher.stream("s").publish("after")
        assert len(got) == 1 and got[0] is not None, got
        assert got[0].payload == "after"
