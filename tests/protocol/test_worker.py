"""The worker's pure decisions (``WorkerPolicy``, draining included,
``settle_bound``), without IO or a clock."""

from __future__ import annotations

import pytest

from alkstore.protocol.machines.leases import Wait
from alkstore.protocol.machines.worker import (
    Claim,
    HandBack,
    Stop,
    Sweep,
    WorkerPolicy,
    settle_bound,
)
from alkstore.protocol.values.errors import InvalidArgument
from alkstore.protocol.values.outcomes import Outcome
from alkstore.protocol.values.types import JobRecord

S = 1_000_000
T0 = 1_700_000_000 * S


def policy(concurrency: int = 2, poll: int = 60 * S) -> WorkerPolicy:
    p = WorkerPolicy.of(
        concurrency=concurrency, visibility_timeout_us=300 * S, poll_interval_us=poll
    )
    assert p.next_action(T0) == Sweep()
    p.swept(T0)
    return p


def test_defaults_follow_the_visibility_timeout() -> None:
    p = WorkerPolicy.of(concurrency=1, visibility_timeout_us=300 * S, poll_interval_us=S)
    assert p.heartbeat_interval_us == 75 * S  # four beats per timeout
    assert p.sweep_interval_us == 30 * S
    short = WorkerPolicy.of(concurrency=1, visibility_timeout_us=S // 2, poll_interval_us=S)
    assert short.sweep_interval_us == S  # never more often than once a second


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_concurrency_is_validated(bad: object) -> None:
    with pytest.raises(InvalidArgument):
        WorkerPolicy.of(concurrency=bad, visibility_timeout_us=S, poll_interval_us=S)  # type: ignore[arg-type]


def test_first_sweeps_then_claims_what_it_can_run() -> None:
    p = policy(concurrency=3)
    assert p.next_action(T0) == Claim(3)


def test_a_short_claim_sleeps_until_the_next_job_is_due() -> None:
    p = policy()
    assert p.next_action(T0) == Claim(2)
    p.claimed(T0, got=0, asked=2, next_due_us=T0 + 3 * S)
    assert p.next_action(T0 + 1) == Wait(T0 + 3 * S)
    assert p.next_action(T0 + 3 * S) == Claim(2)


def test_an_empty_queue_sleeps_until_the_poll_backstop() -> None:
    p = policy(poll=60 * S)
    p.next_action(T0)
    p.claimed(T0, got=0, asked=2, next_due_us=None)
    assert p.next_action(T0 + S) == Wait(T0 + 30 * S)  # the sweep comes first
    p.swept(T0 + 30 * S)
    assert p.next_action(T0 + 30 * S) == Wait(T0 + 60 * S)
    assert p.next_action(T0 + 60 * S) == Sweep()
    p.swept(T0 + 60 * S)
    assert p.next_action(T0 + 60 * S) == Claim(2)


def test_a_wake_makes_it_look_at_once() -> None:
    p = policy()
    p.next_action(T0)
    p.claimed(T0, got=0, asked=2, next_due_us=None)
    assert isinstance(p.next_action(T0 + 1), Wait)
    p.woke()
    assert p.next_action(T0 + 2) == Claim(2)


def test_a_wake_during_a_claim_is_not_lost() -> None:
    p = policy()
    assert p.next_action(T0) == Claim(2)
    p.woke()  # arrives while the claim is in flight: its job may be missed
    p.claimed(T0, got=0, asked=2, next_due_us=None)
    assert p.next_action(T0 + 1) == Claim(2)


def test_a_full_batch_waits_for_a_free_slot_then_claims_again() -> None:
    p = policy(concurrency=2)
    p.next_action(T0)
    p.claimed(T0, got=2, asked=2, next_due_us=None)
    action = p.next_action(T0 + 1)
    assert action == Wait(p.next_sweep_us)  # nothing can start: only a finish helps
    p.woke()
    assert isinstance(p.next_action(T0 + 2), Wait)  # still full
    p.finished(Outcome.ACKED)
    assert p.next_action(T0 + 3) == Claim(1)


def test_an_acked_job_does_not_cause_a_look_but_a_retried_one_does() -> None:
    p = policy(concurrency=2)
    p.next_action(T0)
    p.claimed(T0, got=1, asked=2, next_due_us=None)
    p.finished(Outcome.ACKED)
    assert isinstance(p.next_action(T0 + 1), Wait)
    p.next_action(T0 + 2)
    p.woke()
    assert p.next_action(T0 + 3) == Claim(2)
    p.claimed(T0 + 3, got=1, asked=2, next_due_us=None)
    p.finished(Outcome.RETRIED)  # pending again after its backoff: learn when
    assert p.next_action(T0 + 4) == Claim(2)


def test_a_due_but_unclaimed_job_asks_for_one_sweep_then_looks_again_never_spinning() -> None:
    """Invariant: a job due yet not claimed (a passed deadline, or a row
    locked at that instant) is swept once, then looked for after pauses that
    double from 1 ms to the poll interval: never a spin, never a poll
    interval's wait for a lock held a moment."""
    p = policy(poll=4 * S)
    p.next_action(T0)
    p.claimed(T0, got=0, asked=2, next_due_us=T0 - S)
    assert p.next_action(T0 + 1) == Sweep()
    p.swept(T0 + 2)
    assert p.next_action(T0 + 3) == Claim(2)
    now, pauses = T0 + 3, []
    for _ in range(16):  # still there: a row held locked by another transaction
        p.claimed(now, got=0, asked=2, next_due_us=T0 - S)
        action = p.next_action(now)
        assert isinstance(action, Wait)
        pauses.append(action.until_us - now)
        now = action.until_us
        assert p.next_action(now) == Claim(2)
    assert pauses[:4] == [1_000, 2_000, 4_000, 8_000]
    assert max(pauses) == 4 * S and pauses == sorted(pauses)
    # Claimed at last: the pauses start over next time.
    p.claimed(now, got=1, asked=2, next_due_us=None)
    p.finished(Outcome.ACKED)
    p.claimed(now + 1, got=0, asked=2, next_due_us=T0 - S)
    assert p.next_action(now + 1) == Sweep()


def test_a_failed_claim_backs_off_exponentially() -> None:
    p = policy(poll=60 * S)
    p.next_action(T0)
    p.claim_failed(T0)
    first = p.next_action(T0)
    assert isinstance(first, Wait) and first.until_us == T0 + 50_000
    assert p.next_action(T0 + 50_000) == Claim(2)
    p.claim_failed(T0 + 50_000)
    second = p.next_action(T0 + 50_000)
    assert isinstance(second, Wait) and second.until_us == T0 + 150_000
    for _ in range(30):
        p.claim_failed(T0)
    capped = p.next_action(T0)
    assert isinstance(capped, Wait) and capped.until_us == T0 + 5 * S


def _claimed_until(expires_us: int) -> JobRecord:
    return JobRecord(1, "q", None, 0, 1, 3, T0, T0, None, "w", expires_us, 1)


def test_settling_waits_while_the_longest_claim_lasts_plus_a_grace() -> None:
    """The shield over settling ends with the claims (plus 2 s), never before now."""
    assert settle_bound(T0, [_claimed_until(T0 + 10 * S), _claimed_until(T0 + 4 * S)]) == 12.0
    assert settle_bound(T0, [_claimed_until(T0 - 5 * S)]) == 2.0  # lapsed: grace only
    assert settle_bound(T0, []) == 2.0


def test_claiming_more_is_due_once_the_jobs_claimed_ahead_run_low() -> None:
    """A start says "claim more" once fewer than half the claim-ahead target
    (or none at all) still wait for a slot, so the next claim is back in time."""
    p = policy(concurrency=1)
    p.ahead = 8
    p.claimed(T0, 9, 9, None, T0)
    assert [p.started() for _ in range(9)] == [False] * 4 + [True] * 5
    p.ahead = 0
    p.claimed(T0, 1, 1, None, T0)
    assert p.started() is True  # nothing claimed ahead: the next claim is due


def _finish_at_rate(p: WorkerPolicy, per_second: int, seconds: float, start_us: int) -> int:
    """Finish jobs evenly at ``per_second`` for ``seconds``; returns the time after."""
    step = S // per_second
    now = start_us
    for _ in range(int(per_second * seconds)):
        p.running += 1
        p.started()
        p.finished(Outcome.ACKED, now)
        now += step
    return now


def test_claims_ahead_a_horizon_of_work_and_longer_when_claims_take_longer() -> None:
    """Invariant: the work claimed ahead covers max(20 ms, two claim durations)
    at the measured finishing rate, so a distant server's slow claims do not
    leave the slots idle between batches; a quick local claim changes nothing."""
    local, distant = policy(concurrency=10), policy(concurrency=10)
    local.claimed(T0, 10, 10, None, T0 + 300)  # a 0.3 ms claim
    distant.claimed(T0, 10, 10, None, T0 + 60_000)  # three 20 ms round trips
    for p in (local, distant):
        p.running -= 10
        p.queued -= 10
        _finish_at_rate(p, 5_000, 0.5, T0)
    assert local.ahead == pytest.approx(5_000 * 0.020, rel=0.1)  # 20 ms of work
    assert distant.ahead == pytest.approx(5_000 * 0.120, rel=0.1)  # two 60 ms claims
    assert distant.capacity() == 10 + distant.ahead - distant.running


def test_a_fast_worker_learns_its_rate_within_four_claims_worth_of_jobs() -> None:
    """Invariant: the claim-ahead is set once four claims' worth of jobs
    (``concurrency + ahead`` each) have finished, or 50 ms have passed,
    whichever comes first: a worker finishing 40,000 jobs a second claims
    ahead after 1 ms, not after its first 50 ms of one-slot claims; a slow
    one still waits out the 50 ms."""
    fast, slow = policy(concurrency=10), policy(concurrency=10)
    end = _finish_at_rate(fast, 40_000, 0.001, T0)  # 40 jobs in 1 ms
    assert fast.ahead == pytest.approx(40_000 * 0.020, rel=0.1)
    _finish_at_rate(slow, 100, 0.049, T0)  # 4 jobs in 49 ms: no window yet
    assert slow.ahead == 0
    _finish_at_rate(slow, 100, 0.02, T0 + 49_000)  # its 50 ms passed
    assert slow.ahead == 2  # 100 jobs/s x 20 ms
    # The next window waits for four claims of the larger batch.
    before = fast.ahead
    _finish_at_rate(fast, 80_000, 0.0005, end)  # 40 jobs: under 4 x (10 + 800)
    assert fast.ahead == before


def _claim_and_finish(p: WorkerPolicy, now: int, claim_us: int, full: bool) -> int:
    """A claim of ``concurrency`` jobs that takes ``claim_us`` to come back
    (full, or one job short) to a worker with nothing running; its jobs
    then finish 10 us apart. Returns the time after the last."""
    asked = p.concurrency
    got = asked if full else asked - 1
    p.claimed(now, got, asked, None if full else now + S, now + claim_us)
    now += claim_us
    for _ in range(got):
        p.started()
        now += 10
        p.finished(Outcome.ACKED, now)
    return now


def test_waiting_for_a_full_claim_does_not_lower_the_rate_but_a_dry_queue_does() -> None:
    """Invariant: the time a worker sits with nothing to run while a claim
    that comes back full is on its way (the queue had work; the claim waited
    for SQLite's write lock behind other processes) is left out of the rate
    that sets the claim-ahead; time spent on claims that come back short
    (the queue ran dry) still lowers it. Counted, the lock's waits shrank
    the claim-ahead, and many small claims then waited for the lock."""
    stalled, dry = policy(concurrency=10), policy(concurrency=10)
    now_s = now_d = T0
    for _ in range(10):  # 5 ms claims, 100 us of work each: 100 ms
        now_s = _claim_and_finish(stalled, now_s, 5_000, full=True)
        now_d = _claim_and_finish(dry, now_d, 5_000, full=False)
    # Working, the first finishes 100,000 jobs a second: 20 ms of that is
    # more than the most a worker claims ahead (1,000).
    assert stalled.ahead == 1000
    # Over the whole time, 9 jobs per 5.09 ms: about 1,770 a second.
    assert dry.ahead == pytest.approx(1_770 * 0.020, rel=0.15)


# -- draining ---------------------------------------------------------------------------
def busy(concurrency: int = 2, started: int = 2, ahead: int = 3) -> WorkerPolicy:
    """A policy holding ``started`` running handlers and ``ahead`` jobs claimed
    ahead, waiting for a slot."""
    p = policy(concurrency)
    p.next_action(T0)
    p.claimed(T0, got=started + ahead, asked=started + ahead, next_due_us=None)
    for _ in range(started):
        p.started()
    return p


def test_a_drain_hands_back_what_waits_then_waits_for_the_running_handlers() -> None:
    """Invariant: once draining, the policy never claims or sweeps again."""
    p = busy(started=2, ahead=3)
    p.drain(T0 + S, 30 * S)
    assert p.next_action(T0 + S) == HandBack()
    p.dropped(3)  # handed back
    assert p.next_action(T0 + S) == Wait(T0 + 31 * S)
    p.woke()  # an enqueue, a poll or a sweep due: none of it matters now
    assert p.next_action(T0 + 10 * S) == Wait(T0 + 31 * S)
    assert p.next_action(T0 + 3600 * S) != Sweep()
    p.finished(Outcome.ACKED, T0 + 2 * S)
    assert p.next_action(T0 + 2 * S) == Wait(T0 + 31 * S)
    p.finished(Outcome.RETRIED, T0 + 3 * S)  # a retry is no reason to claim either
    assert p.next_action(T0 + 3 * S) == Stop(cancel=False)


def test_a_drain_whose_deadline_passes_cancels_the_handlers_still_running() -> None:
    p = busy(started=2, ahead=0)
    p.drain(T0, 5 * S)
    assert p.next_action(T0 + 5 * S - 1) == Wait(T0 + 5 * S)
    p.finished(Outcome.ACKED, T0 + S)
    assert p.next_action(T0 + 5 * S) == Stop(cancel=True)


def test_an_idle_worker_stops_at_once_and_waiting_jobs_go_back_with_the_stop() -> None:
    """Nothing running: no separate hand-back round trip, the stop's hand-back takes them."""
    idle = policy()
    idle.drain(T0, 30 * S)
    assert idle.next_action(T0) == Stop(cancel=False)
    waiting = busy(started=0, ahead=2)
    waiting.drain(T0, 30 * S)
    assert waiting.next_action(T0) == Stop(cancel=False)


def test_a_second_drain_only_brings_the_deadline_closer() -> None:
    p = busy(started=1, ahead=0)
    p.drain(T0, 30 * S)
    p.drain(T0 + S, 60 * S)  # later: ignored
    assert p.next_action(T0 + S) == Wait(T0 + 30 * S)
    p.drain(T0 + 2 * S, None)  # no deadline: ignored too
    assert p.next_action(T0 + 2 * S) == Wait(T0 + 30 * S)
    p.drain(T0 + 3 * S, 0)  # "now"
    assert p.next_action(T0 + 3 * S) == Stop(cancel=True)


def test_a_drain_without_a_deadline_waits_for_the_handlers_however_long() -> None:
    p = busy(started=1, ahead=1)
    p.drain(T0, None)
    assert p.next_action(T0) == HandBack()
    p.dropped()
    action = p.next_action(T0 + 86_400 * S)
    assert isinstance(action, Wait)  # looks again each poll interval, never stops by itself
    assert action.until_us == T0 + 86_400 * S + p.poll_interval_us
    p.finished(Outcome.LOST)  # its claim lapsed: nothing runs any more
    assert p.next_action(T0 + 86_400 * S) == Stop(cancel=False)


def test_a_claim_that_returns_while_draining_hands_its_jobs_back() -> None:
    """A claim in flight when the drain began: its jobs never start."""
    p = policy(concurrency=2)
    assert p.next_action(T0) == Claim(2)
    p.drain(T0, 30 * S)
    p.claimed(T0, got=2, asked=2, next_due_us=None)
    assert p.next_action(T0) == Stop(cancel=False)  # nothing started: the stop hands back
