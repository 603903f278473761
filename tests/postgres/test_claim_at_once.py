"""Rule: on Postgres the worker's claim is one statement that goes out with
BEGIN and COMMIT in one round trip (``claim_at_once``), and it claims what
the step-by-step claim (``claim_for_worker``: the claim, then the next-due
read) claims, in the same order, with the same next-due instant; it takes
nothing where the step-by-step claim has to find out why (a limited or
paused queue, a newer claim generation), and a row another transaction
holds locked is skipped and still counted as due."""

from __future__ import annotations

import psycopg
import pytest

from alkstore import ClaimRulesChanged, ManualClock, Store
from alkstore.protocol.plans.worker import ClaimResult, claim_at_once, claim_for_worker
from alkstore.protocol.values.timeconv import US_PER_S

from ..backends import PG_DSN
from .pg import fresh_schema, open_pg, table

VT_US = 300 * US_PER_S


def _conns_roundtrips(store: Store) -> int:
    return sum(c.roundtrips for c in store._core.executor._pool._pool._idle)  # type: ignore[attr-defined]


async def _at_once(store: Store, queue: str, n: int) -> ClaimResult | None:
    core = store._core
    plan = claim_at_once(core.dialect, queue, "w", n, core.now_us(), VT_US)
    assert plan is not None
    return await core.run(plan)  # type: ignore[no-any-return]


async def _stepwise(store: Store, queue: str, n: int) -> ClaimResult:
    core = store._core
    plan = claim_for_worker(core.dialect, queue, "w", n, core.now_us(), VT_US)
    return await core.run(plan)  # type: ignore[no-any-return]


async def _fill(store: Store) -> None:
    """Jobs of every kind the claim looks at: due ones of three priorities,
    a scheduled one, one claimed by another worker whose lease runs."""
    q = store.queue("q", visibility_timeout=60)
    for priority in (0, 5, 0, 9, 5):
        await q.enqueue({"p": priority}, priority=priority)
    await q.enqueue("later", delay=90)
    other = store.queue("q", visibility_timeout=120)
    await other.enqueue("taken-elsewhere", priority=100)
    core = store._core
    await core.run(claim_for_worker(core.dialect, "q", "other", 1, core.now_us(), 120 * US_PER_S))


@pytest.mark.parametrize("n", [1, 3, 5, 6, 10])
async def test_it_claims_what_the_step_by_step_claim_claims(n: int) -> None:
    """The same jobs in the same order and the same next-due instant (None
    when all ``n`` were claimed), on two schemas filled alike."""
    results = []
    for how in (_at_once, _stepwise):
        clock = ManualClock()
        async with open_pg(fresh_schema(), clock=clock) as store:
            await _fill(store)
            clock.advance(1.0)
            got = await how(store, "q", n)
            assert got is not None
            results.append(([j.id for j in got.jobs], [j.claims for j in got.jobs],
                             got.next_due_us))  # fmt: skip
            assert not got.limited
    at_once, stepwise = results
    assert at_once == stepwise
    assert len(at_once[0]) == min(n, 5)
    assert (at_once[2] is None) == (n <= 5)


async def test_a_woken_claim_is_one_round_trip() -> None:
    clock = ManualClock()
    async with open_pg(fresh_schema(), pool_size=1, clock=clock) as store:
        q = store.queue("q")
        await q.enqueue("warm")
        await _at_once(store, "q", 10)  # the connection's statements are prepared
        await q.enqueue("x")
        before = _conns_roundtrips(store)
        got = await _at_once(store, "q", 10)
        assert _conns_roundtrips(store) - before == 1
        assert got is not None and [j.payload for j in got.jobs] == ["x"]
        # Nothing else is live but the two claimed jobs: the next instant is
        # when the older claim lapses.
        assert got.next_due_us == store._core.now_us() + VT_US  # (the clock stands still)


async def test_nothing_claimed_is_none_and_the_step_by_step_claim_says_why() -> None:
    clock = ManualClock()
    async with open_pg(fresh_schema(), clock=clock) as store:
        assert await _at_once(store, "q", 5) is None  # no work
        q = store.queue("q")
        await q.enqueue("a", concurrency_key="k")
        await q.set_limits(concurrency_per_key=1)
        assert await _at_once(store, "q", 5) is None  # limited
        got = await _stepwise(store, "q", 5)
        assert got.limited and [j.payload for j in got.jobs] == ["a"]
        # A worker told so claims a limited queue step by step from then on.
        core = store._core
        assert claim_at_once(core.dialect, "q", "w", 5, core.now_us(), VT_US, limited=True) is None
        await q.set_limits(concurrency_per_key=None)
        await q.enqueue("b")
        await q.pause()
        assert await _at_once(store, "q", 5) is None  # paused
        await q.resume()
        async with store.transaction() as tx:
            await tx.execute(
                f"UPDATE {table(store, 'meta')} SET value = '999' WHERE key = $1",
                ["claim_generation"],
            )
        assert await _at_once(store, "q", 5) is None  # a newer release's rules
        with pytest.raises(ClaimRulesChanged):
            await core.run(claim_for_worker(core.dialect, "q", "w", 5, core.now_us(), VT_US))


async def test_a_row_locked_elsewhere_is_skipped_and_still_due() -> None:
    """Another transaction holds the first job's row (a cancel, an awaiter):
    the claim takes the second and says the first is due already, so the
    worker looks again soon rather than at its next poll."""
    clock = ManualClock()
    schema = fresh_schema()
    async with open_pg(schema, clock=clock) as store:
        q = store.queue("q")
        first = await q.enqueue("first", priority=1)
        await q.enqueue("second")
        clock.advance(1.0)
        with psycopg.connect(PG_DSN) as other:
            other.execute(f'SELECT 1 FROM "{schema}".jobs WHERE id = %s FOR UPDATE', [first])
            got = await _at_once(store, "q", 10)
            other.rollback()
        assert got is not None and [j.payload for j in got.jobs] == ["second"]
        assert got.next_due_us is not None and got.next_due_us <= store._core.now_us()
