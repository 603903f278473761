"""Rule: connections die and the store recovers (contract section 3,
notify/listen, and section 2, errors).

- The listening connection: when its backend is terminated, the driver
  reconnects on its own and sends ``Wake("__alkstore_listener_reconnected__")``
  to every open receiver (wakes may have been missed meanwhile); later
  notifies arrive again.
- A statement connection of the pool: an operation whose connection is
  killed under it fails with ``alkstore.DatabaseError`` (never a raw psycopg
  error); the pool discards the broken connection and later operations
  succeed.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import psycopg
import pytest
import trio

from alkstore import LISTENER_RECONNECTED, DatabaseError, Wake
from alkstore.protocol.values.names import stream_channel

from .pg import (
    QUIET,
    SOON,
    app_name,
    backends_of,
    open_pg,
    sql,
    terminate_backend,
    wait_until,
)


def listener_pid(store) -> int | None:  # type: ignore[no-untyped-def]
    return store._core.executor._listener.backend_pid


async def wait_listener(store, not_pid: int | None = None) -> int:  # type: ignore[no-untyped-def]
    """The listener's backend pid once it is connected (and not ``not_pid``)."""
    with trio.fail_after(SOON):
        while True:
            pid = listener_pid(store)
            if pid is not None and pid != not_pid:
                return pid
            await trio.sleep(0.005)


async def test_listener_reconnect_wakes_every_receiver(schema: str) -> None:
    """Kill the listening backend with ``pg_terminate_backend``: every open
    WakeReceiver (three channels, two receivers on one of them) gets
    ``Wake(LISTENER_RECONNECTED)``; a stream subscriber, whose new event was
    committed without any NOTIFY reaching it, re-reads because of the
    reconnect wake and delivers the event long before its 60 s backstop.
    Afterwards notifies from another store arrive again on every channel,
    through a new listening backend."""
    async with (
        open_pg(schema) as store,
        open_pg(schema, pool_size=1) as other,
        AsyncExitStack() as stack,
    ):
        channels = ["alpha", "beta", "gamma", "alpha"]
        receivers = [await stack.enter_async_context(store.listen(c)) for c in channels]
        events = await stack.enter_async_context(
            store.stream("feed").subscribe("c1", backstop=60.0)
        )
        old = await wait_listener(store)
        assert store._core.executor._listener.reconnects == 0

        # Notifies work before the kill.
        await other.notify("beta")
        assert await receivers[1].recv_timeout(SOON) == Wake("beta")

        got: list[object] = []

        async def subscriber() -> None:
            while len(got) < 2:
                event = await events.recv()
                assert event is not None
                got.append(event.payload)

        # The publish's NOTIFY reaches this store before the subscriber
        # starts (a probe on the same internal channel sees it), so no stray
        # wake is left to make the subscriber re-read later.
        async with store._core.subscribe(stream_channel("feed")) as probe:
            await other.stream("feed").publish("first")
            assert await probe.recv_timeout(SOON) is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(subscriber)
            await wait_until(lambda: bool(got))
            await trio.sleep(QUIET)  # the subscriber found nothing more and waits
            # An event committed behind the subscriber's back, as by a writer
            # whose NOTIFY was lost: rows written directly, no NOTIFY.
            s_ = f'"{schema}"'
            sql(
                f"WITH o AS (INSERT INTO {s_}.streams AS s (name, last_offset) "
                "VALUES ('feed', 1) ON CONFLICT (name) DO UPDATE "
                "SET last_offset = s.last_offset + 1 RETURNING last_offset) "
                f'INSERT INTO {s_}.events (stream, "offset", key, payload, created_at) '
                "SELECT 'feed', last_offset, NULL, '\"missed\"', 0 FROM o"
            )
            await trio.sleep(QUIET)
            assert got == ["first"]  # no wake: it waits for its 60 s backstop
            assert await terminate_backend(old)
            new = await wait_listener(store, not_pid=old)
            await wait_until(lambda: len(got) >= 2)
        assert got == ["first", "missed"]
        assert store._core.executor._listener.reconnects == 1
        assert new != old

        for rx in receivers:
            assert await rx.recv_timeout(SOON) == Wake(LISTENER_RECONNECTED)
            assert rx.try_recv() is None

        # Later notifies arrive again, through the new connection.
        for rx, channel in zip(receivers, channels, strict=True):
            await other.notify(channel)
            assert await rx.recv_timeout(SOON) == Wake(channel)
        await other.stream("feed").publish("after")
        with trio.fail_after(SOON):
            event = await events.recv()
        assert event is not None and event.payload == "after"
        # The stream channel is still listened to on the new connection.
        assert stream_channel("feed") in store._core.executor._listener._channels.values()


async def test_listener_reconnects_again_and_again(schema: str) -> None:
    """Three kills in a row: each one yields one reconnect wake per receiver
    and the channel keeps working; a receiver opened while reconnecting
    still LISTENs once the connection is back."""
    async with (
        open_pg(schema) as store,
        open_pg(schema, pool_size=1) as other,
        store.listen("ch") as wakes,
    ):
        pid = await wait_listener(store)
        for round_ in range(1, 4):
            assert await terminate_backend(pid)
            pid = await wait_listener(store, not_pid=pid)
            assert await wakes.recv_timeout(SOON) == Wake(LISTENER_RECONNECTED)
            assert store._core.executor._listener.reconnects == round_
            await other.notify("ch")
            assert await wakes.recv_timeout(SOON) == Wake("ch")
        # Kill, and open a receiver at once (maybe while disconnected).
        assert await terminate_backend(pid)
        async with store.listen("late") as late:
            await wait_listener(store, not_pid=pid)
            await other.notify("late")
            with trio.fail_after(SOON):
                while True:
                    wake = await late.recv()
                    if wake == Wake("late"):
                        break
                    assert wake == Wake(LISTENER_RECONNECTED)


async def test_killed_statement_connection_raises_database_error(schema: str) -> None:
    """Terminate the pool connection running ``SELECT pg_sleep(30)`` inside
    ``store.transaction()``: the operation fails with ``DatabaseError``
    (not a psycopg exception; psycopg's is chained as the cause), nothing of
    that transaction is committed, and the next operations succeed on a
    fresh connection (the broken one was discarded, the pool's count stays
    within its size)."""
    name = app_name()
    async with open_pg(schema, pool_size=1, application_name=name) as store:
        q = store.queue("jobs")
        await q.enqueue("warm-up")  # the one pool connection exists
        pool = store._core.executor._pool
        [statement_pid] = list(pool.backend_pids)

        async def kill_when_sleeping() -> None:
            with trio.fail_after(SOON):
                while True:
                    rows = await backends_of(name)
                    if any(p == statement_pid and s == "active" for p, s, _ in rows):
                        break
                    await trio.sleep(0.01)
            assert await terminate_backend(statement_pid)

        with trio.fail_after(SOON):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_when_sleeping)
                with pytest.raises(DatabaseError) as info:
                    async with store.transaction() as tx:
                        await tx.enqueue(q, "doomed")
                        await tx.execute("SELECT pg_sleep(30)")
        assert not isinstance(info.value, psycopg.Error)
        assert isinstance(info.value.__cause__, psycopg.Error)
        assert pool._total <= 1
        assert statement_pid not in pool.backend_pids

        # Later operations succeed, on a new connection.
        job = await q.claim_one("w")
        assert job is not None and job.payload == "warm-up"
        assert await job.ack()
        assert await q.claim_one("w") is None  # "doomed" never committed
        await q.enqueue("later")
        assert (await q.stats()).ready == 1
        assert pool.backend_pids and statement_pid not in pool.backend_pids
        pids = {p for p, _, _ in await backends_of(name)}
        assert statement_pid not in pids
        assert len(pids) <= 2  # one statement connection, one listener


async def test_killed_auto_commit_operation_raises_database_error(schema: str) -> None:
    """An auto-commit operation (``Queue.cancel``) blocked on a row lock that
    the application's own transaction holds: terminating its backend makes
    it fail with ``DatabaseError`` (psycopg's error only as the cause); the
    application's transaction then commits, and the same operation retried
    succeeds on a fresh connection."""
    name = app_name()
    async with (
        open_pg(schema, pool_size=2, application_name=name) as store,
        open_pg(schema, pool_size=1) as app,
    ):
        q = store.queue("jobs")
        job_id = await q.enqueue("x")
        locked = trio.Event()
        release = trio.Event()

        async def hold_row() -> None:
            async with app.transaction() as tx:
                await tx.execute(
                    f'SELECT id FROM "{schema}".jobs WHERE id = $1 FOR UPDATE', [job_id]
                )
                locked.set()
                await release.wait()

        async def kill_waiter() -> None:
            with trio.fail_after(SOON):
                while True:
                    rows = await backends_of(name)
                    waiting = [p for p, _, wait in rows if wait == "Lock"]
                    if waiting:
                        break
                    await trio.sleep(0.01)
            assert await terminate_backend(waiting[0])

        with trio.fail_after(SOON):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hold_row)
                await locked.wait()
                nursery.start_soon(kill_waiter)
                with pytest.raises(DatabaseError) as info:
                    await q.cancel(job_id)
                release.set()
        assert not isinstance(info.value, psycopg.Error)
        assert isinstance(info.value.__cause__, psycopg.Error)
        assert await q.cancel(job_id)
        assert await q.get_job(job_id) is None


async def test_killed_idle_pool_connection_is_replaced(schema: str) -> None:
    """Terminate every idle pool connection between operations (as a server
    restart or an idle-session timeout would): the pool notices when it
    hands a connection out (it reads the termination message and EOF, no
    round trip), discards it and connects afresh, so the next operations,
    auto-commit and transactions alike, all succeed."""
    async with open_pg(schema, pool_size=2) as store:
        q = store.queue("jobs")
        async with trio.open_nursery() as nursery:  # open both connections
            for _ in range(2):
                nursery.start_soon(q.enqueue, "x")
        pool = store._core.executor._pool
        old = set(pool.backend_pids)
        assert len(old) == 2
        for pid in old:
            assert await terminate_backend(pid)
        for _ in range(4):
            await q.enqueue("y")
        async with store.transaction() as tx:
            await tx.enqueue(q, "z")
        assert not (pool.backend_pids & old)
        assert pool._total <= 2
        assert (await q.stats()).ready == 2 + 4 + 1
