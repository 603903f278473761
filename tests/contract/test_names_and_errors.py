"""Names: reserved prefix and empty names rejected at every entry point, before any
round trip; distinct names never alias; names are data, never SQL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from alkstore import (
    LISTENER_RECONNECTED,
    RESERVED_PREFIX,
    AlkstoreError,
    Closed,
    InvalidName,
    ManualClock,
    QueueStats,
    ReservedName,
    Store,
    Transaction,
)
from tests.backends import Backend

from .helpers import SOON

BAD_NAMES: list[tuple[Any, type[AlkstoreError]]] = [
    ("", InvalidName),
    ("__alkstore_", ReservedName),
    ("__alkstore_mine", ReservedName),
    (LISTENER_RECONNECTED, ReservedName),
    (f"{RESERVED_PREFIX}outbox:mail", ReservedName),
]


async def _enter(cm: Any) -> None:
    async with cm:
        pass


# Every auto-commit entry point that takes a consumer-supplied shared name.
AUTO: dict[str, Callable[[Store, Any], Awaitable[Any]]] = {
    "notify": lambda s, n: s.notify(n),
    "listen": lambda s, n: _enter(s.listen(n)),
    "stream": lambda s, n: s.stream(n).publish(1),
    "queue": lambda s, n: s.queue(n).enqueue(1),
    "outbox": lambda s, n: s.outbox(n).enqueue(1),
    "try_lock": lambda s, n: s.try_lock(n, "owner", 10),
    "hold_lock": lambda s, n: _enter(s.hold_lock(n, "owner", 10)),
}

# Every transaction method that takes a shared name.
TX: dict[str, Callable[[Transaction, Any], Awaitable[Any]]] = {
    "tx.enqueue": lambda tx, n: tx.enqueue(n, 1),
    "tx.publish": lambda tx, n: tx.publish(n, 1),
    "tx.publish_with_key": lambda tx, n: tx.publish_with_key(n, "k", 1),
    "tx.notify": lambda tx, n: tx.notify(n),
    "tx.save_offset": lambda tx, n: tx.save_offset(n, "consumer", 1),
    "tx.outbox_enqueue": lambda tx, n: tx.outbox_enqueue(n, 1),
}


async def call(fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
    # Some entry points validate synchronously (store.queue(...)), others when
    # awaited: both count, as long as nothing reaches the database.
    await fn(*args)


@pytest.mark.producer(exclude=("try_lock", "hold_lock"))
@pytest.mark.parametrize("entry", list(AUTO))
async def test_bad_names_are_rejected_at_every_auto_commit_entry_point(
    store: Store, entry: str
) -> None:
    for name, error in BAD_NAMES:
        with pytest.raises(error) as caught:
            await call(AUTO[entry], store, name)
        assert caught.value.name == name  # type: ignore[attr-defined]


@pytest.mark.producer(exclude=("try_lock", "hold_lock"))
@pytest.mark.parametrize("entry", list(AUTO))
async def test_names_are_checked_before_any_round_trip(
    backend: Backend, location: str, clock: ManualClock, entry: str
) -> None:
    """On a closed store any round trip raises Closed; a bad name must fail first."""
    async with backend.open(location, clock=clock) as store:
        pass
    for name, error in BAD_NAMES:
        with pytest.raises(error):
            await call(AUTO[entry], store, name)
    if entry != "listen":  # listen does no IO of its own
        with pytest.raises(Closed):
            await call(AUTO[entry], store, "valid")


@pytest.mark.producer
@pytest.mark.parametrize("entry", list(TX))
async def test_bad_names_are_rejected_at_every_tx_method_without_spoiling_the_tx(
    store: Store, entry: str
) -> None:
    async with store.transaction() as tx:
        for name, error in BAD_NAMES:
            with pytest.raises(error):
                await call(TX[entry], tx, name)
        # Rejected client-side, so the transaction is still good.
        job_id = await tx.enqueue("jobs", "still fine")
    got = await store.queue("jobs").get_job(job_id)
    assert got is not None and got.payload == "still fine"
    assert await store.queue("jobs").stats() == QueueStats(1, 0, 0, 0)
    assert await store.stream("s").read_since(0) == []


@pytest.mark.producer
@pytest.mark.parametrize("entry", list(TX))
async def test_tx_names_are_checked_before_the_closed_check(store: Store, entry: str) -> None:
    async with store.transaction() as tx:
        pass
    for name, error in BAD_NAMES:
        with pytest.raises(error):
            await call(TX[entry], tx, name)
    with pytest.raises(Closed):
        await call(TX[entry], tx, "valid")


@pytest.mark.producer
async def test_non_string_names_are_invalid(store: Store) -> None:
    for bad in (None, 1, b"bytes", ["q"]):
        with pytest.raises(InvalidName):
            store.queue(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidName):
            store.stream(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidName):
            await store.notify(bad)  # type: ignore[arg-type]


async def test_empty_consumer_worker_owner_and_key_are_invalid(store: Store) -> None:
    q = store.queue("jobs")
    s = store.stream("s")
    await q.enqueue(1)
    with pytest.raises(InvalidName):
        await q.claim_one("")
    with pytest.raises(InvalidName):
        await q.claim_batch("", 5)
    with pytest.raises(InvalidName):
        await q.ack_batch([1], "")
    with pytest.raises(InvalidName):
        await store.try_lock("lock", "", 10)
    with pytest.raises(InvalidName):
        await _enter(store.hold_lock("lock", "", 10))
    with pytest.raises(InvalidName):
        await s.publish_with_key("", 1)
    with pytest.raises(InvalidName):
        await s.save_offset("", 1)
    with pytest.raises(InvalidName):
        await s.get_offset("")
    with pytest.raises(InvalidName):
        await s.read_from_consumer("")
    with pytest.raises(InvalidName):
        s.subscribe("")
    async with store.transaction() as tx:
        with pytest.raises(InvalidName):
            await tx.publish_with_key("s", "", 1)
        with pytest.raises(InvalidName):
            await tx.save_offset("s", "", 1)
    assert await q.stats() == QueueStats(1, 0, 0, 0)  # nothing was claimed
    assert await s.read_since(0) == []
    assert await store.try_lock("lock", "owner", 10) is not None


async def test_reserved_prefix_is_allowed_for_consumer_local_identifiers(store: Store) -> None:
    q = store.queue("jobs")
    await q.enqueue(1)
    job = await q.claim_one("__alkstore_worker")
    assert job is not None and job.worker_id == "__alkstore_worker"
    assert await job.ack() is True
    lock = await store.try_lock("lock", "__alkstore_owner", 10)
    assert lock is not None
    assert await store.stream("s").publish_with_key("__alkstore_key", 1) == 1


async def test_similar_long_names_never_alias(store: Store) -> None:
    """Names sharing a long prefix (beyond Postgres' 63-byte identifiers) stay distinct."""
    base = "n" * 100
    first, second = base + "-first", base + "-second"
    multibyte_a, multibyte_b = "é" * 40 + "a", "é" * 40 + "b"
    for a, b in ((first, second), (multibyte_a, multibyte_b)):
        await store.queue(a).enqueue("for a")
        assert await store.queue(b).claim_one("w") is None
        job = await store.queue(a).claim_one("w")
        assert job is not None and job.queue == a

        assert await store.stream(a).publish("a") == 1
        assert await store.stream(b).read_since(0) == []
        await store.stream(a).save_offset(a, 1)
        assert await store.stream(a).get_offset(b) == 0

        assert await store.try_lock(a, "alice", 10) is not None
        assert await store.try_lock(b, "bob", 10) is not None

        async with store.listen(b) as wakes_b, store.listen(a) as wakes_a:
            await store.notify(a)
            assert await wakes_a.recv_timeout(SOON) is not None
            assert wakes_b.try_recv() is None


async def test_names_differing_only_in_case_or_whitespace_are_distinct(store: Store) -> None:
    names = ["Jobs", "jobs", "jobs ", " jobs", "JOBS"]
    for i, name in enumerate(names):
        await store.queue(name).enqueue(i)
    for i, name in enumerate(names):
        job = await store.queue(name).claim_one("w")
        assert job is not None and job.payload == i
        assert await store.queue(name).claim_one("w") is None


async def test_names_are_data_never_sql(store: Store) -> None:
    nasty = [
        "q'; DROP TABLE __alkstore_jobs; --",
        'q"; DELETE FROM __alkstore_events; --',
        "q) OR 1=1 --",
        "q\\n$1 %s ? :name",
        "名前 🚀",
    ]
    for i, name in enumerate(nasty):
        assert await store.stream(name).publish(i) == 1
        await store.queue(name).enqueue(i)
        assert await store.try_lock(name, name, 10) is not None
        async with store.listen(name) as wakes:
            await store.notify(name)
            assert await wakes.recv_timeout(SOON) is not None
    for i, name in enumerate(nasty):
        events = await store.stream(name).read_since(0)
        assert [(e.stream, e.payload) for e in events] == [(name, i)]
        job = await store.queue(name).claim_one(name)
        assert job is not None and job.payload == i and job.queue == name


@pytest.mark.producer
async def test_nul_characters_in_names_are_invalid(store: Store) -> None:
    with pytest.raises(InvalidName):
        store.queue("a\x00b")
    with pytest.raises(InvalidName):
        await store.notify("a\x00b")
