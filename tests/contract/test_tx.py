"""The transaction seam: the caller's SQL and alkstore's operations commit together."""

from __future__ import annotations

import sqlite3

import pytest

from alkstore import Closed, DatabaseError, ManualClock, QueueStats, Store, Transaction, Wake
from tests.backends import Backend

from . import aio
from .helpers import QUIET, SOON, at, create_orders_table, order_rows, orders, placeholders


class Boom(Exception):
    pass


@pytest.mark.producer
async def test_commit_makes_every_write_visible_together(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with (
        backend.open(location, clock=clock) as store,
        backend.open(location, clock=clock) as observer,
    ):
        await create_orders_table(store)
        await store.stream("events").publish("before")
        q = observer.queue("jobs")
        events = observer.stream("events")
        ob = observer.outbox("mail")
        async with store.listen("ch") as wakes:
            async with store.transaction() as tx:
                a, b = placeholders(store, 2)
                await tx.execute(
                    f"INSERT INTO {orders(store)} (id, note) VALUES ({a}, {b})", (1, "first")
                )
                job_id = await tx.enqueue("jobs", {"order": 1}, priority=2)
                off = await tx.publish("events", {"order": 1})
                keyed = await tx.publish_with_key("events", "order-1", {"order": 1, "k": True})
                await tx.save_offset("events", "billing", off)
                mail_id = await tx.outbox_enqueue("mail", {"to": "a@example.com"})
                await tx.notify("ch", "hello")

                # Nothing is visible to anyone else before commit...
                assert await q.get_job(job_id) is None
                assert await q.stats() == QueueStats(0, 0, 0, 0)
                assert [e.offset for e in await events.read_since(0)] == [1]
                assert await events.get_offset("billing") == 0
                assert await ob.stats() == QueueStats(0, 0, 0, 0)
                # ...and the notify wakes nobody yet.
                assert await wakes.recv_timeout(QUIET) is None

            assert await wakes.recv_timeout(SOON) == Wake("ch")

        assert (off, keyed) == (2, 3)
        got = await q.get_job(job_id)
        assert got is not None
        assert (got.state, got.payload, got.priority) == ("pending", {"order": 1}, 2)
        assert got.created_at == at(clock)
        evs = await events.read_since(1)
        assert [(e.offset, e.key, e.payload) for e in evs] == [
            (2, None, {"order": 1}),
            (3, "order-1", {"order": 1, "k": True}),
        ]
        assert await events.get_offset("billing") == 2
        assert await ob.stats() == QueueStats(1, 0, 0, 0)
        delivered: list[object] = []

        async def deliver(payload: object) -> None:
            delivered.append(payload)

        assert await ob.run_once(deliver) == 1
        assert delivered == [{"to": "a@example.com"}]
        assert mail_id > 0
        assert await order_rows(observer) == [(1, "first")]


@pytest.mark.producer
async def test_an_exception_rolls_everything_back(store: Store) -> None:
    await create_orders_table(store)
    q = store.queue("jobs")
    s = store.stream("events")
    await s.publish("kept")
    await s.save_offset("billing", 1)
    job_id = -1
    async with store.listen("ch") as wakes:
        with pytest.raises(Boom):
            async with store.transaction() as tx:
                await tx.execute(f"INSERT INTO {orders(store)} (id, note) VALUES (7, 'lost')")
                job_id = await tx.enqueue("jobs", "lost")
                await tx.enqueue(q, "lost too", delay=5)
                await tx.publish("events", "lost")
                await tx.publish_with_key("events", "k", "lost")
                await tx.save_offset("events", "billing", 3)
                await tx.save_offset("events", "fresh", 1)
                await tx.outbox_enqueue("mail", "lost")
                await tx.notify("ch")
                raise Boom
        # A rolled-back notify wakes nobody.
        assert await wakes.recv_timeout(QUIET) is None
    assert await order_rows(store) == []
    assert await q.get_job(job_id) is None
    assert await q.stats() == QueueStats(0, 0, 0, 0)
    assert [e.payload for e in await s.read_since(0)] == ["kept"]
    assert await s.get_offset("billing") == 1
    assert await s.get_offset("fresh") == 0
    assert await store.outbox("mail").stats() == QueueStats(0, 0, 0, 0)
    # The store is fully usable afterwards.
    assert await s.publish("next") > 1
    assert await q.enqueue("next") > 0


@pytest.mark.producer
async def test_a_rolled_back_notify_wakes_no_other_store(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with (
        backend.open(location, clock=clock) as store,
        backend.open(location, clock=clock) as other,
        other.listen("ch") as wakes,
    ):
        with pytest.raises(Boom):
            async with store.transaction() as tx:
                await tx.notify("ch")
                raise Boom
        assert await wakes.recv_timeout(QUIET) is None
        async with store.transaction() as tx:
            await tx.notify("ch")
        assert await wakes.recv_timeout(SOON) == Wake("ch")


async def test_cancellation_rolls_back(store: Store) -> None:
    q = store.queue("jobs")
    async with aio.move_on_after(0.05), store.transaction() as tx:
        await tx.enqueue("jobs", "cancelled")
        await aio.sleep(SOON)
    assert await q.stats() == QueueStats(0, 0, 0, 0)
    assert await q.enqueue("after") > 0


@pytest.mark.producer
async def test_tx_enqueue_honours_options_and_queue_defaults(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=9)
    async with store.transaction() as tx:
        by_handle = await tx.enqueue(q, "h")
        by_name = await tx.enqueue("jobs", "n", delay=10, priority=4, max_attempts=2, expires=60)
        at_time = await tx.enqueue("jobs", "t", run_at=at(clock, 30))
    h = await q.get_job(by_handle)
    n = await q.get_job(by_name)
    t = await q.get_job(at_time)
    assert h is not None and n is not None and t is not None
    assert h.max_attempts == 9
    assert (n.run_at, n.priority, n.max_attempts, n.expires_at) == (
        at(clock, 10),
        4,
        2,
        at(clock, 60),
    )
    assert t.run_at == at(clock, 30)
    assert await q.stats() == QueueStats(1, 2, 0, 0)


@pytest.mark.producer
async def test_tx_save_offset_is_monotonic(store: Store) -> None:
    s = store.stream("s")
    await s.save_offset("c", 5)
    async with store.transaction() as tx:
        await tx.save_offset("s", "c", 2)
    assert await s.get_offset("c") == 5


@pytest.mark.producer
async def test_tx_publish_continues_the_stream_offsets(store: Store) -> None:
    s = store.stream("s")
    assert await s.publish(1) == 1
    async with store.transaction() as tx:
        assert await tx.publish("s", 2) == 2
        assert await tx.publish_with_key("s", "k", 3) == 3
    assert await s.publish(4) == 4


@pytest.mark.producer
async def test_execute_returns_rows_and_binds_parameters(store: Store) -> None:
    await create_orders_table(store)
    a, b = placeholders(store, 2)
    tricky = "'); DROP TABLE orders; --"
    async with store.transaction() as tx:
        assert (
            await tx.execute(
                f"INSERT INTO {orders(store)} (id, note) VALUES ({a}, {b})", (1, tricky)
            )
            == []
        )
        rows = await tx.execute(f"SELECT id, note FROM {orders(store)} WHERE id = {a}", (1,))
    assert [tuple(r) for r in rows] == [(1, tricky)]
    assert await order_rows(store) == [(1, tricky)]


@pytest.mark.producer
async def test_a_database_error_is_wrapped_and_rolls_back(store: Store) -> None:
    await create_orders_table(store)
    with pytest.raises(DatabaseError) as caught:
        async with store.transaction() as tx:
            await tx.enqueue("jobs", "lost")
            await tx.execute(f"INSERT INTO {orders(store)} (id, note) VALUES (1, 'a')")
            await tx.execute("SELECT * FROM no_such_table")
    assert caught.value.__cause__ is not None
    assert not isinstance(caught.value, sqlite3.Error)
    assert await order_rows(store) == []
    assert await store.queue("jobs").stats() == QueueStats(0, 0, 0, 0)


async def use_every_method(tx: Transaction) -> list[str]:
    """Call every tx method; returns the names of those that did not raise Closed."""
    calls = {
        "execute": lambda: tx.execute("SELECT 1"),
        "enqueue": lambda: tx.enqueue("jobs", 1),
        "publish": lambda: tx.publish("s", 1),
        "publish_with_key": lambda: tx.publish_with_key("s", "k", 1),
        "notify": lambda: tx.notify("ch"),
        "save_offset": lambda: tx.save_offset("s", "c", 1),
        "outbox_enqueue": lambda: tx.outbox_enqueue("mail", 1),
        "commit": tx.commit,
        "rollback": tx.rollback,
    }
    survivors = []
    for name, call in calls.items():
        try:
            await call()
        except Closed:
            continue
        survivors.append(name)
    return survivors


@pytest.mark.producer
async def test_the_handle_is_closed_after_commit(store: Store) -> None:
    async with store.transaction() as tx:
        pass
    assert await use_every_method(tx) == []
    assert await store.queue("jobs").stats() == QueueStats(0, 0, 0, 0)
    assert await store.stream("s").read_since(0) == []


@pytest.mark.producer
async def test_the_handle_is_closed_after_rollback(store: Store) -> None:
    with pytest.raises(Boom):
        async with store.transaction() as tx:
            raise Boom
    assert await use_every_method(tx) == []
    assert await store.queue("jobs").stats() == QueueStats(0, 0, 0, 0)
    assert await store.stream("s").get_offset("c") == 0


@pytest.mark.producer
async def test_commit_inside_the_block_commits_at_once_and_closes_the_handle(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    """``tx.commit()``: everything is visible (and wakes fire) before the
    block ends; the handle is closed; the block's end does nothing more."""
    async with (
        backend.open(location, clock=clock) as store,
        backend.open(location, clock=clock) as observer,
    ):
        q = observer.queue("jobs")
        async with store.listen("ch") as wakes:
            async with store.transaction() as tx:
                job_id = await tx.enqueue("jobs", 1)
                await tx.notify("ch")
                await tx.commit()
                assert await wakes.recv_timeout(SOON) == Wake("ch")
                got = await q.get_job(job_id)
                assert got is not None and got.state == "pending"
                assert await use_every_method(tx) == []
            assert await wakes.recv_timeout(QUIET) is None  # not woken twice
        assert (await q.stats()).ready == 1


async def test_a_cancel_pending_when_commit_is_called_commits_nothing(store: Store) -> None:
    """A cancel requested before ``tx.commit()`` is taken where it starts:
    nothing commits and the handle stays open."""
    async with store.transaction() as tx:
        await tx.enqueue("jobs", 1)
        async with aio.cancel_requested():
            await tx.commit()
        assert not tx._finished
        assert (await store.queue("jobs").stats()).ready == 0  # a read beside the block
        await tx.rollback()
    assert (await store.queue("jobs").stats()).ready == 0


@pytest.mark.producer
async def test_an_error_after_commit_leaves_the_commit_standing(store: Store) -> None:
    with pytest.raises(Boom):
        async with store.transaction() as tx:
            await tx.enqueue("jobs", 1)
            await tx.commit()
            raise Boom
    assert (await store.queue("jobs").stats()).ready == 1


@pytest.mark.producer
async def test_rollback_inside_the_block_undoes_everything_and_closes_the_handle(
    store: Store,
) -> None:
    async with store.listen("ch") as wakes:
        async with store.transaction() as tx:
            await tx.enqueue("jobs", 1)
            await tx.publish("s", 1)
            await tx.notify("ch")
            await tx.rollback()
            assert await use_every_method(tx) == []
            # The writer is free again (SQLite): the store works inside the block.
        assert await wakes.recv_timeout(QUIET) is None
    assert await store.queue("jobs").stats() == QueueStats(0, 0, 0, 0)
    assert await store.stream("s").read_since(0) == []
    # Nothing was left half-open: a new transaction commits normally.
    async with store.transaction() as tx:
        await tx.enqueue("jobs", 2)
    assert (await store.queue("jobs").stats()).ready == 1
