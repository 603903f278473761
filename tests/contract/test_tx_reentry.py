"""An auto-commit call inside the same store's transaction.

On SQLite the transaction holds the only writer, so such a call could only
wait for itself: it raises ``UsageError`` at once instead of hanging (an
engine difference, documented in docs/engines.md). On engines with a pool of
connections it runs as its own transaction. Other tasks wait their turn.
"""

from __future__ import annotations

import pytest

from alkstore import Store, UsageError
from tests.backends import Backend

from . import aio


async def test_auto_commit_call_inside_own_transaction(backend: Backend, store: Store) -> None:
    q = store.queue("q")
    exclusive = backend.engine == "sqlite"
    spawned: list[str] = []

    async def child() -> None:
        await q.enqueue("child")
        spawned.append("ok")

    async with store.transaction() as tx:
        await tx.enqueue(q, 1)
        if exclusive:
            with pytest.raises(UsageError):
                await q.enqueue(2)
            with pytest.raises(UsageError):
                async with store.transaction():
                    pass  # pragma: no cover
            # A task spawned from inside the transaction inherits the rule.
            with pytest.RaisesGroup(UsageError):
                async with aio.open_task_group() as nursery:
                    nursery.start_soon(child)
        else:  # pragma: no cover - runs on the Postgres backends
            await q.enqueue(2)
    expected = 1 if exclusive else 2
    # The refused calls did not disturb the transaction: it committed.
    assert (await q.stats()).ready == expected
    assert spawned == []


async def test_other_tasks_wait_for_the_transaction(backend: Backend, store: Store) -> None:
    q = store.queue("q")
    order: list[str] = []
    inside = aio.event()

    async def outsider() -> None:
        await inside.wait()
        await q.enqueue("outside")
        order.append("outsider done")

    async with aio.open_task_group() as nursery:
        nursery.start_soon(outsider)  # spawned outside the transaction
        async with store.transaction() as tx:
            inside.set()
            await aio.sleep(0.05)
            await tx.enqueue(q, "inside")
            order.append("tx body done")
    if backend.engine == "sqlite":  # the writer slot: the outsider queues behind
        assert order == ["tx body done", "outsider done"]
    assert sorted(order) == ["outsider done", "tx body done"]
    assert (await q.stats()).ready == 2


async def test_reads_inside_own_transaction_run_beside_it(store: Store) -> None:
    """Read-only calls never wait for a writer (SQLite: reader connections),
    so inside the block they work on every engine, and see what had
    committed before it, not the block's own uncommitted writes."""
    q, s = store.queue("q"), store.stream("s")
    before = await q.enqueue("committed")
    await s.publish("committed")
    async with store.transaction() as tx:
        inside = await tx.enqueue(q, "uncommitted")
        await tx.publish("s", "uncommitted")
        assert (await q.stats()).ready == 1
        assert await q.get_job(inside) is None
        got = await q.get_job(before)
        assert got is not None and got.state == "pending"
        assert [e.payload for e in await s.read_since(0)] == ["committed"]
        assert await s.get_offset("c") == 0
        assert await q.dead_letters() == []
    assert (await q.stats()).ready == 2
