"""Rule: when another client has taken every connection the server allows,
opening a store fails at once with a clear DatabaseError, and a running
store retries with backoff (no hot loop) and resumes by itself once
connections free up (docs/reliability.md).

The server filled is a cluster of the test's own
(``tests/postgres/private_cluster.py``): filling the shared one would fail
the tests running beside this one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from functools import partial

import psycopg
import pytest
import trio

from alkstore import DatabaseError, Job
from alkstore.io_trio import ListenerOptions, PostgresOptions, open_postgres
from tests.backends import PG_DSN
from tests.postgres.pg import fresh_schema, wait_until
from tests.postgres.private_cluster import Cluster, private_cluster

from .proxy import faulty_proxy

WINDOW = 3.0  # seconds the server stays full while attempts are counted


@contextmanager
def every_free_connection(dsn: str = PG_DSN) -> Iterator[list[psycopg.Connection]]:
    """Connections taken until the server refuses more, closed afterwards."""
    hogs: list[psycopg.Connection] = []
    try:
        while True:
            try:
                hogs.append(psycopg.connect(dsn, connect_timeout=5, autocommit=True))
            except psycopg.OperationalError as exc:
                assert "too many clients" in str(exc), exc
                break
            assert len(hogs) < 10_000
        yield hogs
    finally:
        for conn in hogs:
            with suppress(psycopg.Error):
                conn.close()


@pytest.fixture
def server() -> Iterator[Cluster]:
    with private_cluster(max_connections=20) as cluster:
        yield cluster


async def test_a_full_server_refuses_new_stores_clearly_and_running_ones_back_off(
    server: Cluster,
) -> None:
    """The server is full: ``open_postgres`` raises DatabaseError saying so;
    a running worker whose connections were cut tries again a bounded number
    of times (not a hot loop), and runs the job that came due meanwhile once
    connections are free again."""
    schema = fresh_schema()
    done: list[object] = []

    async def handler(job: Job) -> None:
        done.append(job.payload)

    options = PostgresOptions(
        schema=schema,
        pool_size=2,
        connect_timeout=2.0,
        listener=ListenerOptions(connect_timeout=2.0, reconnect_cap=1.0),
    )
    with faulty_proxy(server.dsn) as proxy:
        async with (
            open_postgres(proxy.dsn(server.dsn), options=options) as store,
            trio.open_nursery() as nursery,
        ):
            q = store.queue("q")
            await nursery.start(partial(q.work, handler, poll_interval=0.5))
            await q.enqueue("first")
            await wait_until(lambda: done == ["first"], timeout=15)
            await q.enqueue("due-while-full", delay=1.0)

            # The store loses its connections and the freed slots are taken
            # before it can reconnect.
            proxy.refuse = True
            proxy.cut()
            await trio.sleep(0.5)  # the server notices the closed sockets
            with every_free_connection(server.dsn):
                try:
                    async with open_postgres(server.dsn, options=PostgresOptions(schema=schema)):
                        raise AssertionError("a store opened on a full server")
                except DatabaseError as exc:
                    assert "too many clients" in str(exc)
                proxy.refuse = False
                before = proxy.accepted
                await trio.sleep(WINDOW)
                attempts = proxy.accepted - before
                assert 1 <= attempts <= 40, attempts  # tried again, never in a hot loop
                assert done == ["first"]
            await wait_until(lambda: done == ["first", "due-while-full"], timeout=20)
            nursery.cancel_scope.cancel()
