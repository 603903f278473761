"""Rule: time comes from the core's ``now`` input, i.e. each client's own
clock, never the server's. Consequently, between clients whose clocks are
skewed, every deadline one client stores is read by the other shifted by the
skew: a deadline set by a fast client lasts longer (by the skew) for a slow
one, and a deadline set by a slow client ends earlier (by the skew) for a
fast one. Claims, lock TTLs and delays alike.

Both clocks are ManualClocks set in 2001, far from the server's clock, and
"real time" passing is modelled by advancing both clocks together, so the
boundaries are checked to the microsecond.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alkstore import ManualClock

from .pg import asql, open_pg

US = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = 1_000_000_000 * US  # 2001-09-09T01:46:40Z
SKEW = 10
VT = 30


def clocks() -> tuple[ManualClock, ManualClock]:
    """(fast, slow): the fast clock reads SKEW seconds ahead of the slow one."""
    return ManualClock(T + SKEW * US), ManualClock(T)


def elapse(seconds: float, *cs: ManualClock) -> None:
    """Real time passes: every clock moves by the same amount."""
    for c in cs:
        c.advance(seconds)


async def stored_visible_at(schema: str, job_id: int) -> int:
    [(value,)] = await asql(f'SELECT visible_at FROM "{schema}".jobs WHERE id = %s', (job_id,))
    return int(value)


async def test_claim_by_fast_client_lasts_skew_longer_for_slow_client(schema: str) -> None:
    """The fast client (clock T+10) claims with visibility_timeout 30: the
    stored claim expiry is its clock + 30 = T+40 exactly (the server clock is
    not involved). The slow client (clock T) can reclaim only when its own
    clock reaches T+40: not a microsecond before, i.e. 40 s after the claim
    instead of 30. The fast client's own ownership ends at its clock T+40,
    30 s after claiming, as it expects."""
    fast_clock, slow_clock = clocks()
    async with (
        open_pg(schema, clock=fast_clock) as fast,
        open_pg(schema, clock=slow_clock) as slow,
    ):
        job_id = await slow.queue("q").enqueue("job")  # run_at = T (slow clock)
        fq = fast.queue("q", visibility_timeout=VT)
        sq = slow.queue("q", visibility_timeout=VT)
        job = await fq.claim_one("fast-worker")
        assert job is not None and job.id == job_id
        assert await stored_visible_at(schema, job_id) == T + (SKEW + VT) * US

        elapse(SKEW + VT - 1e-6, fast_clock, slow_clock)  # 39.999999 s later
        assert await sq.claim_one("slow-worker") is None
        # The fast client's claim lapsed 9.999999 s ago by its own clock.
        assert not await job.heartbeat()

        elapse(1e-6, fast_clock, slow_clock)  # 40 s after the claim
        again = await sq.claim_one("slow-worker")
        assert again is not None and again.id == job_id and again.attempts == 2
        assert not await job.ack()
        assert await again.ack()


async def test_claim_by_slow_client_is_cut_short_by_skew_for_fast_client(schema: str) -> None:
    """The other direction: the slow client (clock T) claims with
    visibility_timeout 30, stored expiry T+30. The fast client reclaims as
    soon as its clock reads T+30, only 20 s after the claim, while the slow
    client still believes it owns the job for 10 more seconds: its ack then
    returns False (the job is the fast client's now)."""
    fast_clock, slow_clock = clocks()
    async with (
        open_pg(schema, clock=fast_clock) as fast,
        open_pg(schema, clock=slow_clock) as slow,
    ):
        job_id = await slow.queue("q").enqueue("job")
        sq = slow.queue("q", visibility_timeout=VT)
        fq = fast.queue("q", visibility_timeout=VT)
        job = await sq.claim_one("slow-worker")
        assert job is not None
        assert await stored_visible_at(schema, job_id) == T + VT * US

        elapse(VT - SKEW - 1e-6, fast_clock, slow_clock)  # 19.999999 s later
        assert await fq.claim_one("fast-worker") is None
        elapse(1e-6, fast_clock, slow_clock)  # 20 s after the claim
        stolen = await fq.claim_one("fast-worker")
        assert stolen is not None and stolen.id == job_id and stolen.attempts == 2
        # By its own clock the slow worker is 20 s into a 30 s claim.
        assert slow_clock.now_us() < job._record.claim_expires_at_us
        assert not await job.ack()
        assert await stolen.ack()


async def test_delays_shift_by_the_skew(schema: str) -> None:
    """A job enqueued with ``delay=5`` carries run_at = enqueuer's clock + 5.
    From the fast client it becomes claimable by the slow one 15 s later
    (not 5); from the slow client it is claimable by the fast one at once.
    A job enqueued with no delay by the fast client is invisible to the slow
    one for the first 10 s."""
    fast_clock, slow_clock = clocks()
    async with (
        open_pg(schema, clock=fast_clock) as fast,
        open_pg(schema, clock=slow_clock) as slow,
    ):
        delayed = await fast.queue("a").enqueue("from-fast", delay=5)
        assert await stored_visible_at(schema, delayed) == T + (SKEW + 5) * US
        elapse(SKEW + 5 - 1e-6, fast_clock, slow_clock)
        assert await slow.queue("a").claim_one("s") is None
        elapse(1e-6, fast_clock, slow_clock)
        job = await slow.queue("a").claim_one("s")
        assert job is not None and job.id == delayed

        early = await slow.queue("b").enqueue("from-slow", delay=5)
        job = await fast.queue("b").claim_one("f")  # no wait at all
        assert job is not None and job.id == early

        now_job = await fast.queue("c").enqueue("now")
        elapse(SKEW - 1e-6, fast_clock, slow_clock)
        assert await slow.queue("c").claim_one("s") is None
        elapse(1e-6, fast_clock, slow_clock)
        job = await slow.queue("c").claim_one("s")
        assert job is not None and job.id == now_job


async def test_lock_ttls_shift_by_the_skew(schema: str) -> None:
    """Locks likewise. A lock the fast client takes with ttl 30 expires at
    its clock + 30 = T+40: the slow client can take it over only when its
    own clock reaches T+40 (40 s later), with the next fencing token. A lock
    the slow client takes with ttl 30 (expiry T+30) is taken over by the
    fast client 20 s later, while the slow holder still thinks it has 10 s
    left: its renew and release then return False."""
    fast_clock, slow_clock = clocks()
    async with (
        open_pg(schema, clock=fast_clock) as fast,
        open_pg(schema, clock=slow_clock) as slow,
    ):
        held = await fast.try_lock("L", "fast", VT)
        assert held is not None and held.token == 1
        [(expires,)] = await asql(
            f'SELECT expires_at FROM "{schema}".locks WHERE name = %s', ("L",)
        )
        assert expires == T + (SKEW + VT) * US
        elapse(SKEW + VT - 1e-6, fast_clock, slow_clock)
        assert await slow.try_lock("L", "slow", VT) is None
        elapse(1e-6, fast_clock, slow_clock)
        taken = await slow.try_lock("L", "slow", VT)
        assert taken is not None and taken.token == 2
        assert not await held.release()

        # Reverse: the slow client holds; the fast one takes over early.
        base = slow_clock.now_us()
        assert taken.expires_at == EPOCH + timedelta(microseconds=base + VT * US)
        elapse(VT - SKEW - 1e-6, fast_clock, slow_clock)
        assert await fast.try_lock("L", "fast", VT) is None
        elapse(1e-6, fast_clock, slow_clock)
        over = await fast.try_lock("L", "fast", VT)
        assert over is not None and over.token == 3
        assert slow_clock.now_us() == base + (VT - SKEW) * US  # 10 s left, it thinks
        assert not await taken.renew(VT)
        assert not await taken.release()
        assert await over.release()
