"""Rule: Postgres NOTIFY payloads are limited to 8000 bytes of JSON, and the
limit is enforced client-side, before any round trip (contract section 2)."""

from __future__ import annotations

import orjson
import pytest
import trio

from alkstore import PayloadTooLarge, Wake

from .pg import QUIET, SOON, asql, open_pg, table

LIMIT = 8000


def sized(n: int, char: str = "x") -> str:
    """A JSON string payload whose encoding is exactly ``n`` bytes."""
    width = len(char.encode())
    assert (n - 2) % width == 0
    value = char * ((n - 2) // width)
    assert len(orjson.dumps(value)) == n
    return value


async def test_store_notify_over_limit_fails_before_any_round_trip(schema: str) -> None:
    """``store.notify`` with an 8001-byte (or larger, or multi-byte 8002-byte)
    payload raises ``PayloadTooLarge(limit=8000)`` without touching the
    database: the store's only pool connection is held by an open
    transaction, so any round trip would block until the deadline. An
    exactly-8000-byte payload is accepted and wakes a listener in another
    store; the refused ones wake nobody."""
    async with (
        open_pg(schema, pool_size=1) as store,
        open_pg(schema, pool_size=1) as other,
        other.listen("big") as wakes,
    ):
        too_big = [sized(LIMIT + 1), sized(LIMIT + 2, "é"), {"k": sized(LIMIT)}, [sized(LIMIT)]]
        async with store.transaction() as tx:  # holds the only connection
            await tx.execute("SELECT 1")
            for payload in too_big:
                with trio.fail_after(2), pytest.raises(PayloadTooLarge) as info:
                    await store.notify("big", payload)
                assert info.value.limit == LIMIT
                assert info.value.size == len(orjson.dumps(payload))
        assert await wakes.recv_timeout(QUIET) is None

        await store.notify("big", sized(LIMIT))
        assert await wakes.recv_timeout(SOON) == Wake("big")
        await store.notify("big", sized(LIMIT, "é"))  # 8000 bytes, fewer characters
        assert await wakes.recv_timeout(SOON) == Wake("big")


async def test_tx_notify_over_limit_leaves_transaction_usable(schema: str) -> None:
    """``tx.notify`` over the limit raises ``PayloadTooLarge`` before any
    round trip: the transaction's backend shows no new statement in
    pg_stat_activity (``query_start`` unchanged, still idle in transaction),
    the transaction goes on and commits its other writes, and no wake for the
    refused notify arrives. An exactly-8000-byte ``tx.notify`` in the same
    transaction wakes the listener after commit."""
    async with (
        open_pg(schema, pool_size=2) as store,
        open_pg(schema, pool_size=1) as other,
        other.listen("refused") as refused,
        other.listen("accepted") as accepted,
    ):
        orders = table(store, "orders")
        async with store.transaction() as tx:
            await tx.execute(f"CREATE TABLE {orders} (id int PRIMARY KEY)")
        q = store.queue("jobs")
        async with store.transaction() as tx:
            await tx.execute(f"INSERT INTO {orders} VALUES (1)")
            [(pid,)] = await tx.execute("SELECT pg_backend_pid()")
            before = await asql(
                "SELECT state, query_start, query FROM pg_stat_activity WHERE pid = %s", (pid,)
            )
            for payload in (sized(LIMIT + 1), {"a": [sized(LIMIT)]}):
                with pytest.raises(PayloadTooLarge) as info:
                    await tx.notify("refused", payload)
                assert info.value.limit == LIMIT
            after = await asql(
                "SELECT state, query_start, query FROM pg_stat_activity WHERE pid = %s", (pid,)
            )
            assert after == before
            assert after[0][0] == "idle in transaction"
            # Still usable, and it commits everything else.
            await tx.execute(f"INSERT INTO {orders} VALUES (2)")
            job_id = await tx.enqueue(q, {"n": 1})
            offset = await tx.publish("log", {"n": 1})
            await tx.notify("accepted", sized(LIMIT))
        assert await accepted.recv_timeout(SOON) == Wake("accepted")
        assert await refused.recv_timeout(QUIET) is None
        async with store.transaction() as tx:
            rows = await tx.execute(f"SELECT id FROM {orders} ORDER BY id")
        assert rows == [(1,), (2,)]
        info_ = await q.get_job(job_id)
        assert info_ is not None and info_.state == "pending"
        assert [e.offset for e in await store.stream("log").read_since(0)] == [offset]
