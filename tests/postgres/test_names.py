"""Rule: names Postgres would truncate (identifiers keep 63 bytes), fold
(unquoted identifiers are lower-cased) or need quoted never alias: two
distinct names are two distinct queues, streams, consumers, locks and wake
channels (contract section 4)."""

from __future__ import annotations

from contextlib import AsyncExitStack

import trio

from alkstore import Wake
from alkstore.engines.postgres.names import MAX_IDENTIFIER_BYTES, channel_identifier

from .pg import QUIET, SOON, fresh_schema, open_pg

P63 = "n" * 63
NAMES = [
    # Longer than 63 bytes, sharing the first 63 (Postgres' identifier limit).
    P63 + "a",
    P63 + "b",
    P63 + "A",
    P63,
    "x" * 100 + "1",
    "x" * 100 + "2",
    "x" * 1024,
    "x" * 1023 + "y",
    # Multi-byte: truncation at 63 bytes would cut inside a character.
    "é" * 32,
    "é" * 31,
    "é" * 31 + "x",
    "é" * 40 + "1",
    "é" * 40 + "2",
    # Differing only in case (unquoted identifiers fold to lower case).
    "Orders",
    "orders",
    "ORDERS",
    "Straße",
    "STRASSE",
    "strasse",
    # Quotes, spaces, SQL and placeholder syntax, control characters.
    'has"quote',
    'has""quote',
    "has'quote",
    "has space",
    " has space",
    "has space ",
    'a"; DROP TABLE jobs; --',
    "a.b",
    "a\\b",
    "tab\tname",
    "line\nname",
    "$1",
    "%s",
    "%(p1)s",
    # Unicode, composed and decomposed.
    "naïve",
    "nai\u0308ve",
    "日本語",
    "🚀",
]


def test_names_are_distinct_and_identifiers_fit() -> None:
    """The name list really is distinct, and every wake channel maps to a
    distinct identifier Postgres keeps whole (at most 63 ASCII bytes)."""
    assert len(set(NAMES)) == len(NAMES)
    idents = [channel_identifier(n) for n in NAMES]
    assert len(set(idents)) == len(NAMES)
    for ident in idents:
        assert ident.isascii() and ident == ident.lower()
        assert len(ident.encode()) <= MAX_IDENTIFIER_BYTES


async def test_queues_never_alias(schema: str) -> None:
    """Each name is its own queue: a job enqueued into one is claimed only
    from that one, and a worker id that differs only past byte 63 or in case
    does not own another's claim."""
    async with open_pg(schema) as store:
        ids = {}
        for name in NAMES:
            ids[name] = await store.queue(name).enqueue({"name": name})
        for name in NAMES:
            q = store.queue(name)
            stats = await q.stats()
            assert (stats.ready, stats.scheduled, stats.processing) == (1, 0, 0), name
            jobs = await q.claim_batch("w", 10)
            assert [(j.id, j.payload, j.queue) for j in jobs] == [(ids[name], {"name": name}, name)]
            assert (await q.get_job(ids[name])) is not None
        # The job of one queue is invisible through the handle of another.
        assert await store.queue("orders").get_job(ids["Orders"]) is None
        assert not await store.queue("orders").cancel(ids["ORDERS"])

        q = store.queue("workers")
        await q.enqueue(1)
        [job] = await q.claim_batch(P63 + "a", 1)
        assert await q.ack_batch([job.id], P63 + "b") == 0
        assert await q.ack_batch([job.id], P63 + "A") == 0
        assert await q.ack_batch([job.id], P63 + "a") == 1


async def test_streams_and_consumers_never_alias(schema: str) -> None:
    """Each name is its own stream (its own dense offsets from 1), and each
    consumer name its own saved offset."""
    async with open_pg(schema) as store:
        for name in NAMES:
            assert await store.stream(name).publish({"name": name}) == 1
        for name in NAMES:
            events = await store.stream(name).read_since(0)
            assert [(e.offset, e.stream, e.payload) for e in events] == [(1, name, {"name": name})]
        log = store.stream("log")
        for _ in NAMES:
            await log.publish(None)
        for i, consumer in enumerate(NAMES, start=1):
            await log.save_offset(consumer, i)
        for i, consumer in enumerate(NAMES, start=1):
            assert await log.get_offset(consumer) == i
        async with store.transaction() as tx:
            for i, consumer in enumerate(NAMES, start=1):
                await tx.save_offset("log2", consumer, 1000 + i)
        for i, consumer in enumerate(NAMES, start=1):
            assert await store.stream("log2").get_offset(consumer) == 1000 + i


async def test_locks_never_alias(schema: str) -> None:
    """Each name is its own lock: different owners take every name at once,
    each with its own first token; owners differing only in case or past
    byte 63 are different owners."""
    async with open_pg(schema) as store:
        held = {}
        for i, name in enumerate(NAMES):
            lock = await store.try_lock(name, f"owner-{i}", 60)
            assert lock is not None, name
            assert lock.token == 1
            held[name] = lock
        for name in NAMES:
            assert await store.try_lock(name, "intruder", 60) is None
        for name in NAMES:
            assert await held[name].release()

        first = await store.try_lock("owned", P63 + "a", 60)
        assert first is not None
        assert await store.try_lock("owned", P63 + "b", 60) is None
        assert await store.try_lock("owned", "Owner", 60) is None
        again = await store.try_lock("owned", P63 + "a", 60)
        assert again is not None and again.token == first.token


async def test_channels_never_alias(schema: str) -> None:
    """A notify on one channel wakes its listeners only, never a listener of
    another name, whether it comes from another store (through Postgres
    NOTIFY and the mapped identifiers) or from the listening store itself.

    Notifications from one session arrive in commit order, so once the
    sentinel's wake is in, any wake a notify could have caused is in too."""
    async with (
        open_pg(schema) as store,
        open_pg(schema, pool_size=1) as sender,
        AsyncExitStack() as stack,
    ):
        receivers = {name: await stack.enter_async_context(store.listen(name)) for name in NAMES}
        sentinel = await stack.enter_async_context(store.listen("sentinel"))
        for source in (sender, store):
            for name in NAMES:
                await source.notify(name)
                await source.notify("sentinel")
                assert await sentinel.recv_timeout(SOON) == Wake("sentinel")
                assert receivers[name].try_recv() == Wake(name), name
                woken = [n for n, rx in receivers.items() if rx.try_recv() is not None]
                assert woken == [], (name, woken)
        await trio.sleep(QUIET)
        assert [n for n, rx in receivers.items() if rx.try_recv() is not None] == []


async def test_stores_in_two_schemas_do_not_wake_each_other(schema: str) -> None:
    """LISTEN/NOTIFY are per database, but a wake is a store's own: a notify
    in one schema reaches that schema's listeners only, whatever the names
    the two stores share (queues, streams, channels)."""
    async with (
        open_pg(schema) as ours,
        open_pg(fresh_schema(), pool_size=1) as theirs,
        ours.listen("orders") as rx,
        ours.listen("sentinel") as sentinel,
    ):
        await theirs.notify("orders")
        await theirs.queue("orders").enqueue(1)
        await theirs.notify("sentinel")
        await ours.notify("sentinel")  # in ours: arrives after anything theirs could cause
        assert await sentinel.recv_timeout(SOON) == Wake("sentinel")
        await trio.sleep(QUIET)
        assert rx.try_recv() is None
        assert sentinel.try_recv() is None  # theirs never arrived
        await ours.notify("orders")
        assert await rx.recv_timeout(SOON) == Wake("orders")
