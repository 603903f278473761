"""Rule: a lock excludes other owners while held, bounded by its TTL, and
its fencing token increases on every acquisition (contract section 3,
locks). Sixteen tasks on two stores race ``try_lock`` on one name.

Each holder's interval runs from the clock reading right after ``try_lock``
returned to the earlier of its expiry and the reading just before it
released (a holder that renews extends its expiry). Exclusion means these
intervals never overlap. For a lock that lapsed (rather than being
released), the next acquisition's own ``now`` (its expiry minus its TTL) is
at or after the lapsed expiry, to the microsecond."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import trio

from alkstore import Clock, Lock, ManualClock, SystemClock

from .pg import open_pg, wait_until

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US = 1_000_000
TASKS = 16


def us(dt: datetime) -> int:
    return (dt - EPOCH) // timedelta(microseconds=1)


@dataclass
class Hold:
    owner: str
    token: int
    acquired_now: int  # the ``now`` the acquiring statement used
    start: int  # clock reading after try_lock returned
    end: int  # min(expiry, reading before a successful release)
    released: bool


def check(holds: list[Hold]) -> None:
    assert len(holds) > 20, len(holds)
    by_token = sorted(holds, key=lambda h: h.token)
    # Tokens: one per acquisition, strictly increasing in acquisition order.
    assert [h.token for h in by_token] == list(range(1, len(holds) + 1))
    for prev, nxt in itertools.pairwise(by_token):
        assert prev.end <= nxt.start, (prev, nxt)  # never two holders at once
        if not prev.released:
            assert nxt.acquired_now >= prev.end, (prev, nxt)
    by_start = sorted(holds, key=lambda h: (h.start, h.token))
    assert [h.token for h in by_start] == [h.token for h in by_token]


async def race(stores: list, clock: Clock, ttl: float, duration: float, sleep_until) -> list[Hold]:  # type: ignore[no-untyped-def]
    holds: list[Hold] = []
    ttl_us = round(ttl * US)

    async def contender(i: int, stop: trio.Event) -> None:
        rng = random.Random(i)
        store = stores[i % len(stores)]
        owner = f"owner-{i}"
        while not stop.is_set():
            lock: Lock | None = await store.try_lock("the-lock", owner, ttl)
            start = clock.now_us()
            if lock is None:
                await trio.sleep(rng.uniform(0, 0.003))
                continue
            expires = us(lock.expires_at)
            acquired_now = expires - ttl_us
            await trio.sleep(rng.uniform(0, ttl * 0.8))
            if rng.random() < 0.3 and await lock.renew(ttl):
                expires = us(lock.expires_at)
                await trio.sleep(rng.uniform(0, ttl * 0.8))
            released = False
            end = expires
            if rng.random() < 0.6:
                before = clock.now_us()
                if await lock.release():
                    released, end = True, min(before, expires)
            holds.append(Hold(owner, lock.token, acquired_now, start, end, released))
            if not released:
                await sleep_until(expires)  # lapsed: only then try again

    stop = trio.Event()
    with trio.fail_after(duration + 10):
        async with trio.open_nursery() as nursery:
            for i in range(TASKS):
                nursery.start_soon(contender, i, stop)
            await trio.sleep(duration)
            stop.set()
    return holds


async def test_lock_race_real_clock(schema: str) -> None:
    """Real clock, TTL 40 ms, 16 contenders for 2 s: holders never overlap,
    lapsed locks are taken only after their expiry, tokens count up by one
    per acquisition in acquisition order."""
    clock = SystemClock()

    async def sleep_until(deadline_us: int) -> None:
        await trio.sleep(max(0, deadline_us - clock.now_us()) / US + 0.0005)

    async with open_pg(schema, clock=clock) as a, open_pg(schema, clock=clock) as b:
        holds = await race([a, b], clock, ttl=0.04, duration=2.0, sleep_until=sleep_until)
    check(holds)
    assert any(h.released for h in holds) and any(not h.released for h in holds)


async def test_lock_race_manual_clock(schema: str) -> None:
    """The same race on a shared ManualClock that the test moves forward in
    steps of 7 ms of a 50 ms TTL while the contenders run, so expiries and
    takeovers fall on exact microseconds."""
    clock = ManualClock(1_000_000_000 * US)

    async def sleep_until(deadline_us: int) -> None:
        await wait_until(lambda: clock.now_us() >= deadline_us, step=0.001)

    async def tick(stop: trio.Event) -> None:
        while not stop.is_set():
            clock.advance(0.007)
            await trio.sleep(0.003)

    async with open_pg(schema, clock=clock) as a, open_pg(schema, clock=clock) as b:
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick, stop)
            holds = await race([a, b], clock, ttl=0.05, duration=2.0, sleep_until=sleep_until)
            stop.set()
    check(holds)
    assert any(h.released for h in holds) and any(not h.released for h in holds)
