"""Cancelling an operation at a random moment, on every backend.

Invariant: a cancel at any point leaves the store as if the operation
happened entirely or not at all, and the caller is told which: the
operation returned (it happened; the cancel lands at the caller's next
checkpoint) or raised the cancellation (nothing of it happened). Either way
the cancelled task ends promptly. ``Outbox.run_once`` calls the caller's
``deliver``, whose effects no rollback can undo, so it is all-or-nothing per
message rather than per call (its test says how the caller is told).

Each test states its invariant, and requires both outcomes (returned and
cancelled) over its rounds, so that it cannot pass without testing.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from alkstore import Closed, ManualClock, Store
from tests.backends import Backend
from tests.contract import aio
from tests.contract.helpers import (
    EPOCH,
    SOON,
    US,
    at,
    create_orders_table,
    order_rows,
    orders,
    placeholders,
)

ROUNDS = 30
BOUND = 10.0  # a cancelled task ends within this; it needs milliseconds


@dataclass
class Tally:
    """What the operations that returned have done, so far."""

    returned: int = 0
    values: list[Any] = field(default_factory=list)


async def cancel_at_random(
    rng: random.Random, op: Callable[[], Awaitable[Any]], window: float
) -> tuple[bool, Any]:
    """Run ``op`` in a task of its own and cancel that task after a random
    delay (sometimes at once, mostly within ``window`` seconds, while the
    operation is in flight). Returns (returned, value). Fails if the task
    outlives the cancel by more than BOUND: a lost cancel would leave it
    sleeping."""
    outcome: list[Any] = []

    async def attempt() -> None:
        outcome.append(await op())
        await aio.sleep(60)  # the cancel must land here at the latest

    delay = 0.0 if rng.random() < 0.15 else rng.uniform(0, window)
    async with aio.fail_after(BOUND), aio.open_task_group() as group:
        group.start_soon(attempt)
        if delay:
            await aio.sleep(delay)
        group.cancel()
    return bool(outcome), (outcome[0] if outcome else None)


async def run_rounds(
    op: Callable[[int], Awaitable[Any]],
    check: Callable[[int, bool, Tally], Awaitable[None]],
    seed: int,
) -> Tally:
    """ROUNDS rounds of ``op(i)`` cancelled at random; after each,
    ``check(i, returned, tally)`` compares the store with what the caller
    was told."""
    rng = random.Random(seed)
    tally = Tally()
    # The window follows the operation's speed on this backend and machine,
    # so that cancels land before, during and after it.
    window = 0.004
    for i in range(ROUNDS):
        returned, value = await cancel_at_random(rng, lambda i=i: op(i), window)  # type: ignore[misc]
        if returned:
            tally.returned += 1
            tally.values.append(value)
        window *= 0.9 if returned else 1.3
        await check(i, returned, tally)
    # The rounds hit both outcomes (else the test proves little).
    assert 0 < tally.returned < ROUNDS, tally.returned
    return tally


async def test_enqueue(store: Store) -> None:
    q = store.queue("q")

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert (await q.stats()).ready == tally.returned

    await run_rounds(lambda i: q.enqueue({"i": i}), check, seed=1)


async def test_enqueue_batch(store: Store) -> None:
    q = store.queue("q")

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert (await q.stats()).ready == 3 * tally.returned

    await run_rounds(lambda i: q.enqueue_batch([i, i, i]), check, seed=2)


async def test_publish(store: Store) -> None:
    s = store.stream("s")

    async def check(i: int, returned: bool, tally: Tally) -> None:
        events = await s.read_since(0, 1000)
        assert [e.offset for e in events] == sorted(tally.values)

    await run_rounds(lambda i: s.publish(i), check, seed=3)


async def test_transaction_with_own_sql(store: Store) -> None:
    """The caller's row, the job and the event: all three or none."""
    await create_orders_table(store)
    q, s = store.queue("q"), store.stream("s")
    a, b = placeholders(store, 2)

    async def op(i: int) -> int:
        async with store.transaction() as tx:
            await tx.execute(f"INSERT INTO {orders(store)} (id, note) VALUES ({a}, {b})", (i, "x"))
            await tx.enqueue(q, i)
            await tx.publish("s", i)
        return i

    async def check(i: int, returned: bool, tally: Tally) -> None:
        async with store.transaction() as tx:
            rows = await tx.execute(f"SELECT id FROM {orders(store)} ORDER BY id")
        assert [r[0] for r in rows] == sorted(tally.values)
        assert (await q.stats()).ready == tally.returned
        assert len(await s.read_since(0, 1000)) == tally.returned

    await run_rounds(op, check, seed=4)


async def test_try_lock(store: Store) -> None:
    async def check(i: int, returned: bool, tally: Tally) -> None:
        other = await store.try_lock(f"L{i}", "other", 30)
        assert (other is None) == returned, "the lock is held iff try_lock returned it"

    await run_rounds(lambda i: store.try_lock(f"L{i}", "me", 30), check, seed=5)


async def test_claim_one(store: Store) -> None:
    q = store.queue("q")
    await q.enqueue_batch(list(range(ROUNDS)))

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert (await q.stats()).processing == tally.returned

    await run_rounds(lambda i: q.claim_one("w"), check, seed=6)


async def test_ack(store: Store) -> None:
    q = store.queue("q")
    await q.enqueue_batch(list(range(ROUNDS)))
    jobs = await q.claim_batch("w", ROUNDS)
    assert len(jobs) == ROUNDS

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert all(tally.values)
        assert (await q.get_job(jobs[i].id) is None) == returned
        assert (await q.stats()).processing == ROUNDS - tally.returned

    await run_rounds(lambda i: jobs[i].ack(), check, seed=7)


async def test_save_offset(store: Store) -> None:
    s = store.stream("s")
    for n in range(ROUNDS):
        await s.publish(n)

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert await s.get_offset("c") == max([0, *tally.values])

    async def op(i: int) -> int:
        await s.save_offset("c", i + 1)
        return i + 1

    await run_rounds(op, check, seed=8)


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
async def test_retry_and_fail(store: Store, outcome: str) -> None:
    """retry/fail move a job (to pending or dead) or leave it processing."""
    q = store.queue("q", max_attempts=5)
    await q.enqueue_batch(list(range(ROUNDS)))
    jobs = await q.claim_batch("w", ROUNDS)

    async def op(i: int) -> bool:
        if outcome == "commit":
            return await jobs[i].retry(delay=3600)
        return await jobs[i].fail("boom")

    async def check(i: int, returned: bool, tally: Tally) -> None:
        stats = await q.stats()
        assert stats.processing == ROUNDS - tally.returned
        moved = stats.scheduled if outcome == "commit" else stats.dead
        assert moved == tally.returned

    await run_rounds(op, check, seed=9)


async def test_cancel_and_requeue_dead(store: Store) -> None:
    q = store.queue("q", max_attempts=1)
    ids = await q.enqueue_batch(list(range(2 * ROUNDS)))
    live, dead = ids[:ROUNDS], ids[ROUNDS:]
    for job in await q.claim_batch("w", 2 * ROUNDS):
        if job.id in dead:
            assert await job.fail("x")
        else:
            assert await job.release(refund=True)

    async def op(i: int) -> tuple[bool, bool]:
        return await q.cancel(live[i]), await q.requeue_dead(dead[i])

    async def check(i: int, returned: bool, tally: Tally) -> None:
        cancelled = await q.get_job(live[i]) is None
        revived = await q.get_job(dead[i])
        assert revived is not None
        if returned:
            assert tally.values[-1] == (True, True)
            assert cancelled and revived.state == "pending"
        else:
            # Each call is its own operation: the first may have happened.
            assert revived.state == "dead" or cancelled

    await run_rounds(op, check, seed=10)


async def test_trim_to(store: Store) -> None:
    s = store.stream("s")
    for n in range(ROUNDS + 1):
        await s.publish(n)

    async def op(i: int) -> int:
        await s.trim_to(i + 2)
        return i + 2

    async def check(i: int, returned: bool, tally: Tally) -> None:
        first = (await s.read_since(0, 1))[0].offset
        assert first == max([1, *tally.values])

    await run_rounds(op, check, seed=11)


async def test_lock_release(store: Store) -> None:
    """A release that returned freed the lock; one cancelled left it held."""
    locks = []
    for i in range(ROUNDS):
        lock = await store.try_lock(f"L{i}", "me", 30)
        assert lock is not None
        locks.append(lock)

    async def op(i: int) -> bool:
        return await locks[i].release()

    async def check(i: int, returned: bool, tally: Tally) -> None:
        free = await store.try_lock(f"L{i}", "other", 30) is not None
        assert free == returned

    await run_rounds(op, check, seed=12)


async def test_heartbeat(store: Store) -> None:
    q = store.queue("q", visibility_timeout=60)
    await q.enqueue_batch(list(range(ROUNDS)))
    jobs = await q.claim_batch("w", ROUNDS)
    before = {j.id: j.claim_expires_at for j in jobs}

    async def op(i: int) -> bool:
        return await jobs[i].heartbeat(3600)

    async def check(i: int, returned: bool, tally: Tally) -> None:
        info = await q.get_job(jobs[i].id)
        assert info is not None and info.claim_expires_at is not None
        assert (info.claim_expires_at > before[jobs[i].id]) == returned

    await run_rounds(op, check, seed=13)


async def test_schedule(store: Store) -> None:
    async def op(i: int) -> None:
        await store.schedule(f"sched{i}", "q", "@every 1h", i)

    async def check(i: int, returned: bool, tally: Tally) -> None:
        # A schedule exists iff it was registered: unschedule says which.
        assert await store.unschedule(f"sched{i}") == returned

    await run_rounds(op, check, seed=14)


async def test_explicit_commit(store: Store) -> None:
    """``tx.commit()`` cancelled at random: returned means committed."""
    q = store.queue("q")

    async def op(i: int) -> int:
        async with store.transaction() as tx:
            await tx.enqueue(q, i)
            await tx.commit()
        return i

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert (await q.stats()).ready == tally.returned

    await run_rounds(op, check, seed=15)


async def test_outbox_run_once(store: Store) -> None:
    """Each message a cancelled ``run_once`` claimed ends settled by what
    happened to it: acked if ``deliver`` returned for it, retried if
    ``deliver`` raised, handed back at once (due now, attempt refunded) if
    its delivery never finished. Nothing is left claimed until its
    visibility timeout."""
    ob = store.outbox("o")
    n = 3 * ROUNDS
    ids = await ob.queue.enqueue_batch(list(range(n)))
    started: list[int] = []
    delivered: list[int] = []
    failed: list[int] = []

    async def deliver(payload: Any) -> None:
        started.append(payload)
        await aio.sleep(0.0005)  # in flight: a cancel may land here
        if payload % 4 == 3:
            failed.append(payload)
            raise RuntimeError("refused")
        delivered.append(payload)

    seen = {"in_flight": 0, "after_delivery": 0}
    before = (0, 0, 0)

    async def check(i: int, returned: bool, tally: Tally) -> None:
        nonlocal before
        now = (len(started), len(delivered), len(failed))
        this_round = now[1] - before[1]
        finished = now[1] + now[2] - before[1] - before[2]
        if returned:
            assert tally.values[-1] == this_round, "run_once counts what it acked"
        else:
            # Cancelled with a delivery in flight, or after one finished
            # (both, when a later one was in flight).
            seen["in_flight"] += now[0] - before[0] > finished
            seen["after_delivery"] += finished > 0
        before = now
        stats = await ob.stats()
        assert stats.processing == 0, "a cancelled run_once left messages claimed"
        assert stats.scheduled == len(failed), "every failed delivery is retried"
        assert stats.ready == n - len(delivered) - len(failed), "the rest is back, due now"
        assert stats.dead == 0
        for payload in set(started) - set(delivered) - set(failed):
            info = await ob.queue.get_job(ids[payload])
            assert info is not None and info.state == "pending" and info.attempts == 0, info

    await run_rounds(lambda i: ob.run_once(deliver, batch=3), check, seed=16)
    assert all(seen.values()), seen


async def test_claim_batch(store: Store) -> None:
    """A claim_batch that returned owns exactly the jobs it returned; one
    cancelled claimed nothing."""
    q = store.queue("q")
    await q.enqueue_batch(list(range(3 * ROUNDS)))

    async def check(i: int, returned: bool, tally: Tally) -> None:
        if returned:
            assert len(tally.values[-1]) == 3
        claimed = [job.id for jobs in tally.values for job in jobs]
        assert len(set(claimed)) == len(claimed)
        assert (await q.stats()).processing == len(claimed)
        for job_id in claimed:
            info = await q.get_job(job_id)
            assert info is not None and info.state == "processing" and info.claimed_by == "w"

    await run_rounds(lambda i: q.claim_batch("w", 3), check, seed=17)


async def test_ack_batch(store: Store) -> None:
    """An ack_batch that returned removed all its jobs; one cancelled, none."""
    q = store.queue("q")
    await q.enqueue_batch(list(range(3 * ROUNDS)))
    jobs = await q.claim_batch("w", 3 * ROUNDS)
    assert len(jobs) == 3 * ROUNDS

    def ids(i: int) -> list[int]:
        return [job.id for job in jobs[3 * i : 3 * i + 3]]

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert all(count == 3 for count in tally.values)
        for job_id in ids(i):
            assert (await q.get_job(job_id) is None) == returned
        assert (await q.stats()).processing == 3 * (ROUNDS - tally.returned)

    await run_rounds(lambda i: q.ack_batch(ids(i), "w"), check, seed=18)


async def test_job_release(store: Store) -> None:
    """A release that returned put the job back, due now with its attempt
    refunded; one cancelled left it claimed."""
    q = store.queue("q")
    await q.enqueue_batch(list(range(ROUNDS)))
    jobs = await q.claim_batch("w", ROUNDS)

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert all(tally.values)
        info = await q.get_job(jobs[i].id)
        assert info is not None
        if returned:
            assert (info.state, info.attempts, info.claimed_by) == ("pending", 0, None)
        else:
            assert (info.state, info.attempts, info.claimed_by) == ("processing", 1, "w")
        stats = await q.stats()
        assert (stats.ready, stats.processing) == (tally.returned, ROUNDS - tally.returned)

    await run_rounds(lambda i: jobs[i].release(refund=True), check, seed=19)


async def test_lock_renew(store: Store, clock: ManualClock) -> None:
    """A renew that returned moved the lock's expiry; one cancelled left it."""
    locks = []
    for i in range(ROUNDS):
        lock = await store.try_lock(f"L{i}", "me", 30)
        assert lock is not None
        locks.append(lock)
    start = clock.now_us()

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert all(tally.values)
        clock.set(start + 100 * US)  # past the first TTL, within the renewed one
        try:
            other = await store.try_lock(f"L{i}", "other", 1)
        finally:
            clock.set(start)
        assert (other is None) == returned, "the lock outlived its TTL iff renew returned"

    await run_rounds(lambda i: locks[i].renew(3600), check, seed=20)


async def test_sweep_expired(store: Store, clock: ManualClock) -> None:
    """A sweep that returned buried every job past its deadline; one
    cancelled buried none."""
    q = store.queue("q")
    start = clock.now_us()
    for i in range(ROUNDS):
        await q.enqueue_batch([i, i], expires=at(clock, 10 * (i + 1)))
    dead_before = 0

    async def check(i: int, returned: bool, tally: Tally) -> None:
        nonlocal dead_before
        dead = (await q.stats()).dead
        if returned:
            assert dead == 2 * (i + 1)
            assert tally.values[-1] == dead - dead_before
        else:
            assert dead == dead_before
        dead_before = dead
        clock.set(start + (10 * (i + 2) + 5) * US)  # the next round's pair expires

    clock.set(start + 15 * US)
    await run_rounds(lambda i: q.sweep_expired(), check, seed=21)


async def test_purge_dead(store: Store, clock: ManualClock) -> None:
    """A purge that returned removed every dead letter older than its
    cut-off; one cancelled removed none."""
    q = store.queue("q", max_attempts=1)
    start = clock.now_us()
    await q.enqueue_batch(list(range(2 * ROUNDS)))
    for job in await q.claim_batch("w", 2 * ROUNDS):
        clock.set(start + job.payload_as(int) // 2 * US)
        assert await job.fail("x")
    clock.set(start)
    dead_before = 2 * ROUNDS

    async def op(i: int) -> int:
        return await q.purge_dead(before=EPOCH + timedelta(microseconds=start + i * US + 1))

    async def check(i: int, returned: bool, tally: Tally) -> None:
        nonlocal dead_before
        dead = (await q.stats()).dead
        if returned:
            assert dead == 2 * (ROUNDS - i - 1)
            assert tally.values[-1] == dead_before - dead
        else:
            assert dead == dead_before
        dead_before = dead

    await run_rounds(op, check, seed=22)


async def test_tx_publish_with_key(store: Store) -> None:
    """A keyed publish in a transaction: the event, with its key, exists iff
    the block returned."""
    s = store.stream("s")
    expected: list[tuple[int, str | None, Any]] = []

    async def op(i: int) -> int:
        async with store.transaction() as tx:
            offset = await tx.publish_with_key("s", f"k{i}", i)
        return offset

    async def check(i: int, returned: bool, tally: Tally) -> None:
        if returned:
            expected.append((tally.values[-1], f"k{i}", i))
        events = await s.read_since(0, 1000)
        assert [(e.offset, e.key, e.payload) for e in events] == expected

    await run_rounds(op, check, seed=23)


async def test_notify(backend: Backend, location: str, store: Store, clock: ManualClock) -> None:
    """A notify that returned wakes its listeners, here and in another store
    on the same database; one cancelled wakes nobody."""
    async with AsyncExitStack() as stack:
        other = await stack.enter_async_context(backend.open(location, clock=clock))
        sentinel = await stack.enter_async_context(other.listen("sentinel"))
        here = [await stack.enter_async_context(store.listen(f"n{i}")) for i in range(ROUNDS)]
        there = [await stack.enter_async_context(other.listen(f"n{i}")) for i in range(ROUNDS)]

        async def check(i: int, returned: bool, tally: Tally) -> None:
            # Wakes cross stores in commit order: once the sentinel's has
            # come, a committed notify of this round's has come before it.
            await store.notify("sentinel")
            assert await sentinel.recv_timeout(SOON) is not None
            assert (here[i].try_recv() is not None) == returned, "local wake"
            assert (there[i].try_recv() is not None) == returned, "wake in the other store"

        await run_rounds(lambda i: store.notify(f"n{i}", {"i": i}), check, seed=24)


async def test_unschedule(store: Store) -> None:
    """An unschedule that returned removed the schedule; one cancelled left it."""
    for i in range(ROUNDS):
        await store.schedule(f"sched{i}", "q", "@every 1h", i)

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert all(tally.values)
        # Still there iff not removed: a second unschedule says which.
        assert await store.unschedule(f"sched{i}") == (not returned)

    await run_rounds(lambda i: store.unschedule(f"sched{i}"), check, seed=25)


async def test_run_schedules(store: Store, clock: ManualClock) -> None:
    """A scheduler tick that returned enqueued one job for each due
    schedule; one cancelled enqueued none (and the next tick catches up)."""
    for name in ("a", "b", "c"):
        await store.schedule(name, "q", "@every 10s", name)
    q = store.queue("q")

    async def check(i: int, returned: bool, tally: Tally) -> None:
        if returned:
            assert tally.values[-1] == 3
        stats = await q.stats()
        assert stats.ready + stats.scheduled == 3 * tally.returned
        clock.advance(10)  # the next fire time of all three

    clock.advance(10)
    await run_rounds(lambda i: store.run_schedules(), check, seed=26)


async def test_tx_rollback(store: Store) -> None:
    """``tx.rollback()``, cancelled or not, leaves nothing of the
    transaction and frees what it held: returned means rolled back (and the
    handle is closed), cancelled means the block rolled back on its way out."""
    await create_orders_table(store)
    q = store.queue("q")
    a, b = placeholders(store, 2)

    async def op(i: int) -> int:
        async with store.transaction() as tx:
            await tx.execute(f"INSERT INTO {orders(store)} (id, note) VALUES ({a}, {b})", (i, "x"))
            await tx.enqueue(q, i)
            await tx.rollback()
            with pytest.raises(Closed):
                await tx.enqueue(q, i)
        return i

    async def check(i: int, returned: bool, tally: Tally) -> None:
        # Nothing is left holding the row or the writer slot.
        async with aio.fail_after(SOON), store.transaction() as tx:
            await tx.execute(f"INSERT INTO {orders(store)} (id, note) VALUES ({a}, {b})", (i, "p"))
            await tx.rollback()
        assert await order_rows(store) == []
        stats = await q.stats()
        assert stats.ready + stats.scheduled + stats.processing == 0

    await run_rounds(op, check, seed=27)


async def test_outbox_enqueue(store: Store) -> None:
    """An outbox enqueue that returned added one message; one cancelled, none."""
    ob = store.outbox("o")

    async def check(i: int, returned: bool, tally: Tally) -> None:
        assert (await ob.stats()).ready == tally.returned
        if returned:
            info = await ob.queue.get_job(tally.values[-1])
            assert info is not None and info.payload == {"i": i}

    await run_rounds(lambda i: ob.enqueue({"i": i}), check, seed=28)


async def test_hold_lock(store: Store) -> None:
    """``hold_lock`` holds the lock exactly while its body runs: however it
    is cancelled (acquiring, in the body, releasing), the lock is free once
    the block is left."""
    acquired_then_cancelled = 0

    async def op(i: int) -> int:
        async with store.hold_lock(f"L{i}", "me", 30) as lock:
            assert await store.try_lock(f"L{i}", "other", 30) is None, "held in the body"
            token: int = lock.token
        return token

    async def check(i: int, returned: bool, tally: Tally) -> None:
        nonlocal acquired_then_cancelled
        other = await store.try_lock(f"L{i}", "other", 30)
        assert other is not None, "the lock outlived its hold_lock block"
        if returned:
            assert other.token == tally.values[-1] + 1
        elif other.token > 1:
            acquired_then_cancelled += 1

    await run_rounds(op, check, seed=29)
    assert acquired_then_cancelled, "no round was cancelled while the lock was held"
