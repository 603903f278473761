"""Rule: cancelling a task while its statement is in flight leaves the
store fully usable: nothing of the cancelled transaction is committed, the
server stops working for it (its locks are released), and the pool does not
leak connections (architecture: structured concurrency)."""

from __future__ import annotations

import pytest
import trio

from tests.backends import PG_DSN

from .pg import SOON, app_name, asql, backends_of, open_pg, table

POOL = 2


async def _settled(name: str, limit: int) -> list[tuple[int, str, str | None]]:
    """Our backends, once no more than ``limit`` of them remain (bounded wait)."""
    with trio.fail_after(SOON):
        while True:
            rows = await backends_of(name)
            if len(rows) <= limit:
                return rows
            await trio.sleep(0.02)


async def test_cancelled_statement_rolls_back_and_frees_everything(schema: str) -> None:
    """``tx.execute('SELECT pg_sleep(30)')`` under ``trio.move_on_after(0.1)``
    inside a transaction that already enqueued, published, took a lock row
    and wrote the caller's own table: the cancel returns promptly, none of
    those writes is visible, the server-side statement stops (the same
    stream's counter row, locked by the cancelled publish, is free again at
    once, not after 30 s), and the store's backends stay within pool size +
    listener. Repeated twenty times, nothing accumulates."""
    name = app_name()
    async with open_pg(schema, pool_size=POOL, application_name=name) as store:
        orders = table(store, "orders")
        async with store.transaction() as tx:
            await tx.execute(f"CREATE TABLE {orders} (id int PRIMARY KEY)")
        q = store.queue("jobs")
        for round_ in range(20):
            with trio.move_on_after(0.1) as scope:
                async with store.transaction() as tx:
                    await tx.execute(f"INSERT INTO {orders} VALUES ($1)", [round_])
                    await tx.enqueue(q, round_)
                    await tx.publish("log", round_)
                    await tx.execute("SELECT pg_sleep(30)")
            assert scope.cancelled_caught
            # The stream's counter row is not held by a lingering backend.
            with trio.fail_after(2):
                assert await store.stream("log").publish(f"ok-{round_}") == round_ + 1
            rows = await _settled(name, POOL + 1)
            assert all(wait != "Lock" for _, _, wait in rows)
            assert store._core.executor._pool._total <= POOL

        # Nothing of any cancelled transaction was committed.
        async with store.transaction() as tx:
            assert await tx.execute(f"SELECT count(*) FROM {orders}") == [(0,)]
        stats = await q.stats()
        assert (stats.ready, stats.scheduled, stats.processing) == (0, 0, 0)
        events = await store.stream("log").read_since(0, 100)
        assert [e.payload for e in events] == [f"ok-{i}" for i in range(20)]
        # And everything still works.
        job_id = await q.enqueue("after")
        job = await q.claim_one("w")
        assert job is not None and job.id == job_id and await job.ack()
        rows = await _settled(name, POOL + 1)
        assert not any(state == "active" for _, state, _ in rows)


async def test_cancelled_auto_commit_operations_and_waiters(schema: str) -> None:
    """Cancel auto-commit operations at varying points (some mid-statement,
    some waiting for a pool connection held by a slow transaction): the
    pool's count never exceeds its size, no connection is lost for good
    (all POOL connections can be checked out together afterwards), no
    backend of ours is left running, and every operation that returned is
    committed."""
    name = app_name()
    async with open_pg(schema, pool_size=POOL, application_name=name) as store:
        q = store.queue("jobs")
        done: list[int] = []

        async def enqueue(i: int) -> None:
            done.append(await q.enqueue(i))

        async def slow_tx() -> None:
            async with store.transaction() as tx:
                await tx.execute("SELECT pg_sleep(0.05)")

        for round_ in range(30):
            with trio.move_on_after(0.001 * (round_ % 7)):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(slow_tx)
                    for i in range(4):
                        nursery.start_soon(enqueue, round_ * 10 + i)
            assert store._core.executor._pool._total <= POOL
        await _settled(name, POOL + 1)

        # Every connection can still be had, at once.
        both = trio.Event()
        entered = []

        async def hold() -> None:
            async with store.transaction() as tx:
                await tx.execute("SELECT 1")
                entered.append(1)
                if len(entered) == POOL:
                    both.set()
                await both.wait()

        with trio.fail_after(SOON):
            async with trio.open_nursery() as nursery:
                for _ in range(POOL):
                    nursery.start_soon(hold)
        # Every enqueue that returned is there. A cancel that lands while the
        # COMMIT is in flight cannot be known to have lost the race: such an
        # enqueue may be committed although its caller saw the cancellation.
        stats = await q.stats()
        assert len(done) <= stats.ready <= 30 * 4
        ids = {job.id for job in await q.claim_batch("w", 1000)}
        assert set(done) <= ids


def test_cancelled_statement_under_asyncio(schema: str) -> None:
    """The same rule on the asyncio driver: a statement cancelled by
    ``asyncio.timeout`` rolls its transaction back, the server stops it (the
    stream's counter row it locked is free at once), and the store goes on."""
    import asyncio

    from alkstore.io_asyncio import PostgresOptions, open_postgres
    from tests.backends import PG_DSN

    async def main() -> None:
        options = PostgresOptions(schema=schema, pool_size=POOL)
        async with open_postgres(PG_DSN, options=options) as store:
            for round_ in range(5):
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.1), store.transaction() as tx:
                        await tx.publish("log", round_)
                        await tx.execute("SELECT pg_sleep(30)")
                async with asyncio.timeout(2):
                    assert await store.stream("log").publish(f"ok-{round_}") == round_ + 1
                assert store._core.executor._pool._total <= POOL
            events = await store.stream("log").read_since(0)
            assert [e.payload for e in events] == [f"ok-{i}" for i in range(5)]

    asyncio.run(main())


async def test_cancelled_listen_leaves_channels_working(schema: str) -> None:
    """Cancel ``store.listen(ch)`` while it is being entered, sometimes
    before its LISTEN is sent and sometimes while the LISTEN's result is on
    its way (the canceller fires once every task is blocked). Afterwards a
    receiver on the same channel, and one on a fresh channel opened right
    away, both get wakes notified by another store: no channel is left
    believing it LISTENs when it does not, and no command result is handed
    to the wrong caller."""
    from trio.testing import wait_all_tasks_blocked

    async with open_pg(schema) as store, open_pg(schema, pool_size=1) as other:
        for i in range(60):
            with trio.CancelScope() as cs:
                if i % 2:
                    cs.cancel()  # cancelled before anything is sent

                async def canceller(scope: trio.CancelScope = cs) -> None:
                    await wait_all_tasks_blocked()
                    scope.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(canceller)
                    async with store.listen(f"c{i}"):
                        await trio.sleep_forever()
            async with store.listen(f"c{i}") as same, store.listen(f"d{i}") as fresh:
                await other.notify(f"c{i}")
                await other.notify(f"d{i}")
                assert await same.recv_timeout(SOON) is not None, i
                assert await fresh.recv_timeout(SOON) is not None, i
        assert store._core.executor._listener._refs == {}


@pytest.mark.parametrize("when", ["statement-running", "answer-unread"])
async def test_a_cancelled_round_trip_frees_its_locks_before_the_cancel_goes_on(
    schema: str, when: str
) -> None:
    """The row a cancelled transaction locked is free (another session's
    ``FOR UPDATE NOWAIT`` gets it) the moment the cancellation reaches the
    caller, while its connection is still open: whether the cancel landed
    while the statement ran on the server or after the server had answered
    and before the answer was read (a cancel request stops nothing then)."""
    from alkstore.io_trio.runtime import TrioRuntime
    from alkstore.protocol.plan import Statement
    from alkstore.runner.postgres.conn import PgConnection

    t = f'"{schema}".locked'
    await asql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    await asql(f"CREATE TABLE {t} (id int PRIMARY KEY)")
    await asql(f"INSERT INTO {t} VALUES (1)")
    conn = await PgConnection.connect(TrioRuntime(), PG_DSN, timeout=SOON, pipeline=True)
    try:
        await conn.command("BEGIN")
        await conn.rows(Statement(f"SELECT id FROM {t} WHERE id = 1 FOR UPDATE", ()))
        with trio.CancelScope() as scope:
            if when == "statement-running":
                scope.deadline = trio.current_time() + 0.2
                await conn.rows(Statement("SELECT pg_sleep(30)", ()))
            else:
                scope.cancel()  # lands at the first wait for the answer
                await conn.rows(Statement("SELECT 1", ()))
        assert scope.cancelled_caught and conn.broken
        rows = await asql(f"SELECT id FROM {t} WHERE id = 1 FOR UPDATE NOWAIT")
        assert rows == [(1,)]
    finally:
        conn.close()
