"""Rule: a Postgres store survives a network that goes silent, slow or
broken between it and the server, by itself and losing nothing (docs/reliability.md).

Each test puts ``tests.chaos.proxy.FaultyProxy`` between the store and the
server. A blackholed connection stays open and answers nothing, which no TCP
keepalive can see (the proxy's kernel acknowledges everything): the
listener's probe and the pool's response_timeout must. The bounds here are
set small so the tests are quick; docs/reliability.md gives the defaults.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import trio

from alkstore import LISTENER_RECONNECTED, DatabaseError, Job, Store, Wake
from alkstore.io_trio import ListenerOptions, PostgresOptions, open_postgres
from tests.backends import PG_DSN
from tests.postgres.pg import fresh_schema, sql, table, wait_until

from .proxy import FaultyProxy, faulty_proxy

PROBE = 0.3  # listener probe_interval and probe_timeout
RESPONSE = 1.0  # pool response_timeout
# A listener is noticed dead within 2 * PROBE, a pooled connection within
# RESPONSE; everything here must happen well inside this.
RECOVERED = 15.0


def chaos_options(schema: str, pool_size: int = 2) -> PostgresOptions:
    return PostgresOptions(
        schema=schema,
        pool_size=pool_size,
        response_timeout=RESPONSE,
        connect_timeout=2.0,
        listener=ListenerOptions(
            probe_interval=PROBE, probe_timeout=PROBE, connect_timeout=2.0, reconnect_cap=0.5
        ),
    )


class Ran:
    """A handler that records the payloads it ran, in order."""

    def __init__(self) -> None:
        self.payloads: list[object] = []

    async def __call__(self, job: Job) -> None:
        self.payloads.append(job.payload)


@asynccontextmanager
async def through(proxy: FaultyProxy, schema: str) -> AsyncIterator[Store]:
    async with open_postgres(proxy.dsn(PG_DSN), options=chaos_options(schema)) as store:
        yield store


@asynccontextmanager
async def pair(schema: str) -> AsyncIterator[tuple[FaultyProxy, Store, Store]]:
    """A proxy, a store through it, and another straight to the server."""
    with faulty_proxy(PG_DSN) as proxy:
        async with through(proxy, schema) as store, direct(schema) as other:
            yield proxy, store, other


@asynccontextmanager
async def direct(schema: str) -> AsyncIterator[Store]:
    async with open_postgres(PG_DSN, options=PostgresOptions(schema=schema, pool_size=1)) as store:
        yield store


async def test_a_blackholed_listener_is_noticed_and_replaced_and_workers_carry_on() -> None:
    """Every connection goes mute (new ones work): within the probe bound the
    listener reconnects and wakes every receiver, the worker's next claim
    drops the mute pool and the job enqueued meanwhile runs, long before the
    worker's 60 s poll backstop."""
    schema = fresh_schema()
    handler = Ran()
    done = handler.payloads

    async with (
        pair(schema) as (proxy, store, other),
        store.listen("ch") as rx,
        trio.open_nursery() as nursery,
    ):
        work = partial(store.queue("q").work, handler, poll_interval=60.0)
        await nursery.start(work)
        await other.queue("q").enqueue("before")
        await wait_until(lambda: done == ["before"], timeout=RECOVERED)

        proxy.blackhole()
        await other.queue("q").enqueue("during")
        with trio.fail_after(RECOVERED):
            assert await rx.recv() == Wake(LISTENER_RECONNECTED)
        await wait_until(lambda: done == ["before", "during"], timeout=RECOVERED)
        assert store._core.executor._listener.reconnects >= 1  # type: ignore[attr-defined]

        # The new listener hears notifies again.
        await other.notify("ch")
        with trio.fail_after(RECOVERED):
            while (wake := await rx.recv()) == Wake(LISTENER_RECONNECTED):
                pass
        assert wake == Wake("ch")
        nursery.cancel_scope.cancel()


async def test_an_operation_on_a_mute_connection_fails_in_bounded_time_writing_nothing() -> None:
    """A pooled connection goes mute: the enqueue on it fails with
    DatabaseError within response_timeout (not a hang), nothing of it is
    written, and the next enqueue succeeds on a new connection."""
    schema = fresh_schema()
    with faulty_proxy(PG_DSN) as proxy:
        async with through(proxy, schema) as store:
            q = store.queue("q")
            await q.enqueue("warm")  # a pooled connection exists and is idle
            proxy.blackhole()
            started = trio.current_time()
            try:
                with trio.fail_after(RESPONSE + 10):
                    await q.enqueue("lost")
            except DatabaseError as exc:
                assert "response_timeout" in str(exc)
            else:
                raise AssertionError("an enqueue on a mute connection succeeded")
            assert trio.current_time() - started < RESPONSE + 5
            with trio.fail_after(RECOVERED):
                await q.enqueue("after")
            rows = sql(f"SELECT payload FROM {table(store, 'jobs')} ORDER BY id")
            assert [r[0] for r in rows] == ['"warm"', '"after"']  # JSON text


async def test_cut_connections_are_replaced_and_every_receiver_hears_of_it() -> None:
    """Every connection is reset: receivers get the reconnect wake, later
    operations succeed, a worker processes every job exactly once."""
    schema = fresh_schema()
    handler = Ran()
    done = handler.payloads

    async with (
        pair(schema) as (proxy, store, other),
        store.listen("a") as ra,
        store.listen("b") as rb,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(store.queue("q").work, handler)  # type: ignore[arg-type]
        for i in range(3):
            proxy.cut()
            await other.queue("q").enqueue(i)
            with trio.fail_after(RECOVERED):
                assert await ra.recv() == Wake(LISTENER_RECONNECTED)
                assert await rb.recv() == Wake(LISTENER_RECONNECTED)
            await wait_until(lambda: len(done) >= i + 1, timeout=RECOVERED)  # noqa: B023
        nursery.cancel_scope.cancel()
    assert sorted(done) == [0, 1, 2]


async def test_a_partition_fails_operations_in_bounded_time_and_heals_losing_nothing() -> None:
    """Nothing gets through, new connections included, for a while: every
    enqueue tried meanwhile returns (ok or DatabaseError) within a bound, and
    after the heal every enqueue reported ok is there once and the worker
    runs each of them exactly once."""
    schema = fresh_schema()
    handler = Ran()
    done = handler.payloads

    with faulty_proxy(PG_DSN) as proxy:
        async with through(proxy, schema) as store:
            q = store.queue("q")
            ok: list[int] = []
            async with trio.open_nursery() as nursery:
                await nursery.start(q.work, handler)  # type: ignore[arg-type]
                await q.enqueue(-1)
                proxy.blackhole(new=True)
                for i in range(3):
                    try:
                        with trio.fail_after(RESPONSE + 10):
                            await q.enqueue(i)
                        ok.append(i)
                    except DatabaseError:
                        pass
                # The partition's flows are lost (cut first: nothing they
                # held is delivered late), then the network is back.
                proxy.cut()
                proxy.heal()
                for i in range(3, 5):
                    with trio.fail_after(RECOVERED):
                        await q.enqueue(i)
                    ok.append(i)
                await wait_until(lambda: len(done) >= len(ok) + 1, timeout=RECOVERED)
                await trio.sleep(0.3)
                nursery.cancel_scope.cancel()
            rows = sql(f"SELECT payload FROM {table(store, 'jobs')}")
    assert sorted(done) == [-1, *ok]
    assert rows == []
    assert 3 in ok and 4 in ok


async def test_work_on_a_slow_network_processes_every_job_once() -> None:
    """10 ms added to every round trip: work() still runs every job exactly
    once (throughput under latency is bench/chaos.py's to report)."""
    schema = fresh_schema()
    handler = Ran()
    done = handler.payloads

    with faulty_proxy(PG_DSN) as proxy:
        proxy.delay = 0.005
        async with through(proxy, schema) as store:
            q = store.queue("q")
            await q.enqueue_batch(list(range(100)))
            async with trio.open_nursery() as nursery:
                await nursery.start(q.work, handler)  # type: ignore[arg-type]
                await wait_until(lambda: len(done) >= 100, timeout=60)
                nursery.cancel_scope.cancel()
    assert sorted(done) == list(range(100))
