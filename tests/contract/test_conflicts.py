"""Transactions that conflict with concurrent ones raise ``TransactionConflict``
(a ``DatabaseError``) on every backend: nothing of them committed, and
running them again succeeds once the conflict is gone."""

from __future__ import annotations

import sqlite3

import pytest

from alkstore import TransactionConflict
from alkstore.io_trio import SqliteOptions
from tests.backends import Backend


async def test_a_write_lock_held_elsewhere_past_busy_timeout_is_a_conflict(
    backend: Backend, location: str
) -> None:
    """Another connection holds the lock alkstore needs for longer than the
    engine waits: the operation raises ``TransactionConflict``, nothing of
    it is written, and it succeeds once the lock is gone."""
    if backend.engine == "sqlite":
        async with backend.open(location, options=SqliteOptions(busy_timeout=0.1)) as store:
            other = sqlite3.connect(location, isolation_level=None)
            try:
                other.execute("BEGIN IMMEDIATE")
                with pytest.raises(TransactionConflict):
                    await store.queue("q").enqueue(1)
                with pytest.raises(TransactionConflict):
                    async with store.transaction() as tx:
                        await tx.enqueue("q", 2)
                other.execute("ROLLBACK")
            finally:
                other.close()
            assert (await store.queue("q").stats()).ready == 0
            await store.queue("q").enqueue(3)
            assert (await store.queue("q").stats()).ready == 1
        return
    async with backend.open(location) as store, backend.open(location) as other:
        await store.stream("s").publish(0)
        async with other.transaction() as holder:
            await holder.publish("s", 1)  # holds the stream's counter row
            with pytest.raises(TransactionConflict):
                async with store.transaction() as tx:
                    await tx.execute("SET LOCAL lock_timeout = '100ms'")
                    await tx.publish("s", 2)
        assert [e.payload for e in await store.stream("s").read_since(0)] == [0, 1]
        async with store.transaction() as tx:
            await tx.publish("s", 2)
        assert [e.payload for e in await store.stream("s").read_since(0)] == [0, 1, 2]
