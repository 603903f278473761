"""Rule: ``store.join(conn)`` rides along in a transaction the application
holds on its own psycopg connection: what is done through the handle commits
with ``conn.commit()`` (jobs and events exist, listeners are woken, by
Postgres NOTIFY at commit) and vanishes with ``conn.rollback()`` (nothing
exists, nobody is woken). Sync ``psycopg.Connection`` under trio, and
``psycopg.AsyncConnection`` under asyncio."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import trio

from alkstore import UsageError, Wake
from alkstore.io_asyncio import PostgresOptions
from alkstore.io_asyncio import open_postgres as open_postgres_asyncio
from tests.backends import PG_DSN

from .pg import QUIET, SOON, open_pg


def _setup_app_table(schema: str) -> str:
    orders = f'"{schema}".orders'
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {orders} (id int PRIMARY KEY)")
    return orders


async def test_join_sync_connection_commit_and_rollback(schema: str) -> None:
    """A sync psycopg connection with an open transaction (the app inserted
    a row first): enqueue, publish and notify through ``store.join(conn)``.
    Until the app commits, nothing is visible to the store and no wake
    arrives; after ``conn.commit()`` the job, the event and the app's row
    all exist and listeners of the channel, the queue and the stream are
    woken. The same steps followed by ``conn.rollback()`` leave nothing
    behind and wake nobody."""
    async with open_pg(schema) as store, open_pg(schema, pool_size=1) as other:
        orders = _setup_app_table(schema)
        q = store.queue("jobs")
        log = store.stream("log")
        conn = psycopg.connect(PG_DSN)
        try:
            async with (
                store.listen("hello") as wakes,
                other.listen("hello") as other_wakes,
                log.subscribe("c") as events,
            ):
                for outcome in ("commit", "rollback"):
                    conn.execute(f"INSERT INTO {orders} VALUES (%s)", (len(outcome),))
                    async with store.join(conn) as tx:
                        job_id = await tx.enqueue(q, {"outcome": outcome})
                        offset = await tx.publish("log", {"outcome": outcome})
                        await tx.notify("hello", {"outcome": outcome})
                        rows = await tx.execute(
                            f"SELECT count(*) FROM {orders} WHERE id = $1", [len(outcome)]
                        )
                        assert rows == [(1,)]
                    # Not committed yet: invisible, and no wake.
                    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
                    assert await q.get_job(job_id) is None
                    assert await log.read_since(offset - 1) == []
                    assert await wakes.recv_timeout(QUIET) is None
                    assert other_wakes.try_recv() is None

                    if outcome == "commit":
                        await trio.to_thread.run_sync(conn.commit)
                        assert await wakes.recv_timeout(SOON) == Wake("hello")
                        assert await other_wakes.recv_timeout(SOON) == Wake("hello")
                        with trio.fail_after(SOON):
                            event = await events.recv()
                        assert event is not None and event.offset == offset
                        job = await q.claim_one("w")
                        assert job is not None and job.id == job_id
                        assert await job.ack()
                    else:
                        await trio.to_thread.run_sync(conn.rollback)
                        assert await wakes.recv_timeout(QUIET) is None
                        assert other_wakes.try_recv() is None
                        assert events.try_recv() is None
                        assert await q.get_job(job_id) is None
                        assert await q.claim_one("w") is None
                        assert [e.offset for e in await log.read_since(0)] == [1]
                with psycopg.connect(PG_DSN) as check:
                    rows = check.execute(f"SELECT id FROM {orders} ORDER BY id").fetchall()
                assert rows == [(len("commit"),)]
        finally:
            conn.close()


async def test_join_fresh_connection_without_statement_rolls_back(schema: str) -> None:
    """A connection not in autocommit mode on which the app has run nothing
    yet: the join's writes are still the app's transaction, so
    ``conn.rollback()`` removes them (the join does not commit on its own)."""
    async with open_pg(schema) as store:
        q = store.queue("jobs")
        with psycopg.connect(PG_DSN) as conn:
            async with store.join(conn) as tx:
                job_id = await tx.enqueue(q, "x")
            await trio.to_thread.run_sync(conn.rollback)
        assert await q.get_job(job_id) is None
        assert (await q.stats()).ready == 0


def test_join_async_connection_under_asyncio(schema: str) -> None:
    """``psycopg.AsyncConnection`` joined by a store opened with
    ``alkstore.io_asyncio.open_postgres``: commit makes the job and event
    exist and wakes the listener; rollback leaves nothing and wakes nobody."""

    async def main() -> None:
        options = PostgresOptions(schema=schema, pool_size=2)
        async with (
            open_postgres_asyncio(PG_DSN, options=options) as store,
            await psycopg.AsyncConnection.connect(PG_DSN) as conn,
            store.listen("hello") as wakes,
        ):
            orders = _setup_app_table(schema)
            q = store.queue("jobs")
            log = store.stream("log")
            for outcome in ("commit", "rollback"):
                await conn.execute(f"INSERT INTO {orders} VALUES (%s)", (len(outcome),))
                async with store.join(conn) as tx:
                    job_id = await tx.enqueue(q, outcome)
                    offset = await tx.publish("log", outcome)
                    await tx.notify("hello")
                assert await q.get_job(job_id) is None
                assert await wakes.recv_timeout(QUIET) is None
                if outcome == "commit":
                    await conn.commit()
                    assert await wakes.recv_timeout(SOON) == Wake("hello")
                    info = await q.get_job(job_id)
                    assert info is not None and info.payload == "commit"
                    assert [e.offset for e in await log.read_since(0)] == [offset]
                else:
                    await conn.rollback()
                    assert await wakes.recv_timeout(QUIET) is None
                    assert await q.get_job(job_id) is None
                    assert [e.payload for e in await log.read_since(0)] == ["commit"]
            cur = await conn.execute(f"SELECT id FROM {orders} ORDER BY id")
            assert await cur.fetchall() == [(len("commit"),)]

    asyncio.run(main())


async def test_a_joined_handle_refuses_commit_and_rollback(schema: str) -> None:
    """The application owns a joined transaction: ``tx.commit()`` and
    ``tx.rollback()`` raise ``UsageError`` and leave the handle usable."""
    async with open_pg(schema) as store:
        conn = psycopg.connect(PG_DSN)
        try:
            async with store.join(conn) as tx:
                for end in (tx.commit, tx.rollback):
                    with pytest.raises(UsageError):
                        await end()
                await tx.enqueue("jobs", 1)  # still open
            conn.commit()
        finally:
            conn.close()
        assert (await store.queue("jobs").stats()).ready == 1
