"""The worker's and the watcher's pure decisions, without IO or a clock."""

from __future__ import annotations

import pytest

from alkstore import InvalidArgument
from alkstore.io_trio import WatcherOptions
from alkstore.protocol.leases import Idle, Lapsed, Leases, Renew, Wait
from alkstore.protocol.types import JobRecord
from alkstore.protocol.worker import (
    Claim,
    Outcome,
    SelfSettled,
    Sweep,
    WorkerPolicy,
    settle_bound,
)
from alkstore.runner.sqlite_watcher import WatchCadence

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


def test_a_due_but_unclaimable_job_asks_for_one_sweep_and_never_spins() -> None:
    p = policy()
    p.next_action(T0)
    # next_due in the past, yet the claim took nothing: a passed deadline.
    p.claimed(T0, got=0, asked=2, next_due_us=T0 - S)
    assert p.next_action(T0 + 1) == Sweep()
    p.swept(T0 + 2)
    assert p.next_action(T0 + 3) == Claim(2)
    p.claimed(T0 + 3, got=0, asked=2, next_due_us=T0 - S)  # still there
    action = p.next_action(T0 + 4)
    assert isinstance(action, Wait) and action.until_us > T0 + S


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


def test_leases_renew_from_the_claim_and_lapse_at_expiry() -> None:
    """Invariant: a held lease is renewed every interval from its start (or
    last renewal), retried sooner after a failed round trip, and reported
    lapsed (and dropped) once its expiry passes without a renewal."""
    vt = 4 * S
    leases = Leases(S, vt)
    assert leases.next_action(T0) == Idle()
    leases.hold(1, T0 + vt)  # claimed at T0
    assert leases.next_action(T0) == Wait(T0 + S)
    assert leases.next_action(T0 + S) == Renew((1,))
    leases.renewed(1, T0 + S + vt)
    assert leases.next_action(T0 + S + 1) == Wait(T0 + 2 * S)
    # Round trips failing: retried sooner, and the lease lapses at expiry.
    leases.renew_failed((1,), T0 + 2 * S)  # 3 s of claim left: retry in 0.75 s, not 1 s
    assert leases.next_action(T0 + 2 * S) == Wait(T0 + 2 * S + 3 * S // 4)
    assert leases.next_action(T0 + S + vt) == Lapsed((1,))
    assert len(leases) == 0 and leases.next_action(T0 + S + vt) == Idle()


def test_leases_renew_every_due_claim_in_one_round() -> None:
    """Invariant: the leases due at the same time come back in one Renew,
    and the next wait is the earliest renewal or expiry among the rest."""
    vt = 10 * S
    leases = Leases(2 * S, vt)
    leases.hold(1, T0 + vt)
    leases.hold(2, T0 + S // 2 + vt)
    leases.hold(3, T0 + 5 * S + vt)
    assert leases.next_action(T0 + 2 * S + S // 2) == Renew((1, 2))
    leases.renewed(1, T0 + 3 * S + vt)
    leases.renewed(2, T0 + 3 * S + vt)
    assert leases.next_action(T0 + 3 * S) == Wait(T0 + 5 * S)
    leases.drop(1)
    leases.drop(2)
    assert leases.next_action(T0 + 3 * S) == Wait(T0 + 7 * S)


# -- the SQLite watcher's cadence ----------------------------------------------------------
def looks_after(c: WatchCadence, now: float, until: float) -> list[tuple[float, str]]:
    """Drive the cadence as the watcher does, with no commit and no event."""
    waits: list[tuple[float, str]] = []
    while now < until:
        wait, kind = c.next_wait(now)
        waits.append((wait, kind))
        now += wait
        if kind != "rest":
            c.unchanged(now)
    return waits


def test_inotify_cadence_looks_on_events_then_backs_off_then_sleeps() -> None:
    c = WatchCadence.from_options(WatcherOptions(), inotify=True)
    assert c.next_wait(0.0) == (1.0, "fd")  # idle: the backstop, on the descriptor
    c.event(10.0)  # a file event: the loop looks at once ...
    c.unchanged(10.0)  # ... too early: the commit is not visible yet
    assert c.next_wait(10.0001) == (0.0, "sleep")  # yield, look again
    c.changed(10.0002)
    waits = looks_after(c, 10.0002, 11.5)
    looks = [w for w in waits if w[1] != "rest"]
    # Found: rest a moment whatever the file events say, then look at a
    # growing cadence on the descriptor (a new event cuts the wait short)
    # until the window closes ...
    assert waits[0][0] == pytest.approx(0.001) and waits[0][1] == "rest"
    gaps = [w for w, kind in looks[:-1]]
    assert gaps == sorted(gaps) and all(kind == "fd" for _, kind in looks)
    assert len(looks) <= 7  # about 10 ms of data_version reads in all
    # ... then the backstop.
    assert looks[-1] == (1.0, "fd")


def test_spinning_ends_when_the_commit_is_in_or_soon_after_the_event() -> None:
    c = WatchCadence.from_options(WatcherOptions(spin=0.0005), inotify=True)
    c.event(0.0)
    now, spins = 0.0, 0
    while c.next_wait(now) == (0.0, "sleep"):
        c.unchanged(now)
        spins += 1
        now += 0.00002
    assert 0.0005 - 1e-9 <= now < 0.0006 and spins >= 20
    assert c.next_wait(now)[1] == "fd"


def test_looks_are_rate_limited_under_a_stream_of_commits() -> None:
    c = WatchCadence.from_options(WatcherOptions(), inotify=True)
    now, looks = 0.0, 0
    while now < 0.1:  # a file event before every look, and a commit found each time
        c.event(now)
        c.changed(now)
        looks += 1
        wait, kind = c.next_wait(now)
        assert kind == "rest" and wait == pytest.approx(0.001)
        now += wait
    assert looks <= 101


def test_polling_cadence_lingers_then_backs_off_to_the_slowest() -> None:
    c = WatchCadence.from_options(WatcherOptions(use_inotify=False), inotify=False)
    c.changed(0.0)
    now = 0.001
    for _ in range(50):  # the first 100 ms after a change: 1 ms looks
        c.unchanged(now)
        assert c.next_wait(now) == (0.001, "sleep")
        now += 0.001
    now = 0.2
    for _ in range(20):
        c.unchanged(now)
        now += c.next_wait(now)[0]
    assert c.next_wait(now) == (0.05, "sleep")


def _claimed_until(expires_us: int) -> JobRecord:
    return JobRecord(1, "q", None, 0, 1, 3, T0, T0, None, "w", expires_us, 1)


def test_settling_waits_while_the_longest_claim_lasts_plus_a_grace() -> None:
    """The shield over settling ends with the claims (plus 2 s), never before now."""
    assert settle_bound(T0, [_claimed_until(T0 + 10 * S), _claimed_until(T0 + 4 * S)]) == 12.0
    assert settle_bound(T0, [_claimed_until(T0 - 5 * S)]) == 2.0  # lapsed: grace only
    assert settle_bound(T0, []) == 2.0


def test_a_job_its_handler_settled_counts_as_retried_only_when_it_retried() -> None:
    """A retry is looked for again once due; ack, fail and release only free the slot."""
    assert SelfSettled.RETRY.outcome is Outcome.RETRIED
    for settled in (SelfSettled.ACK, SelfSettled.FAIL, SelfSettled.RELEASE):
        assert settled.outcome is Outcome.ACKED
