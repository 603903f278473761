"""``Leases`` as ``hold_lock`` uses it: one lease, renewed every ttl/3; and as
the worker uses it: a lease per claim, renewed together when due."""

from __future__ import annotations

import itertools

import pytest

from alkstore.protocol.machines.leases import Idle, Lapsed, Leases, Renew, Wait
from alkstore.protocol.values.errors import InvalidArgument

S = 1_000_000
T0 = 1_700_000_000 * S
TTL = 30 * S
KEY = 7  # a lock's fencing token


def held_lock() -> Leases:
    leases = Leases(TTL // 3, TTL)
    leases.hold(KEY, T0 + TTL)  # acquired at T0
    return leases


def test_a_lock_is_renewed_every_third_of_its_ttl_from_the_last_renewal() -> None:
    leases = held_lock()
    assert leases.next_action(T0) == Wait(T0 + 10 * S)
    assert leases.next_action(T0 + 10 * S) == Renew((KEY,))
    # The renewal started at 10 s (its expiry is then + ttl), answered later.
    leases.renewed(KEY, T0 + 10 * S + TTL)
    assert leases.next_action(T0 + 12 * S) == Wait(T0 + 20 * S)
    assert leases.expires_us(KEY) == T0 + 40 * S


def test_a_failed_round_trip_is_retried_sooner_until_the_ttl_lapses() -> None:
    """Invariant: after a failed round trip the lease is not lost; the next
    try comes at a quarter of what is left (at least 1 ms later), and only
    the expiry passing without a renewal makes it ``Lapsed``."""
    leases = held_lock()
    now = T0 + 10 * S
    tries = []
    while True:
        action = leases.next_action(now)
        if isinstance(action, Lapsed):
            break
        if isinstance(action, Wait):
            now = action.until_us
            continue
        assert action == Renew((KEY,))
        tries.append(now)
        leases.renew_failed(action.keys, now)
    assert now == T0 + TTL and action == Lapsed((KEY,))
    assert tries[:3] == [T0 + 10 * S, T0 + 15 * S, T0 + 18_750_000]
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert gaps == sorted(gaps, reverse=True) and min(gaps) >= 1_000
    assert len(leases) == 0 and leases.next_action(now) == Idle()


def test_a_success_after_failures_returns_to_the_regular_cadence() -> None:
    leases = held_lock()
    leases.renew_failed((KEY,), T0 + 10 * S)
    assert leases.next_action(T0 + 10 * S) == Wait(T0 + 15 * S)
    leases.renewed(KEY, T0 + 15 * S + TTL)
    assert leases.next_action(T0 + 15 * S) == Wait(T0 + 25 * S)


def test_a_renewal_by_the_holder_itself_moves_the_next_one() -> None:
    """The body renewing its lock (longer, or shorter) is a renewal too."""
    leases = held_lock()
    leases.renewed(KEY, T0 + 2 * S + 60 * S)  # lock.renew(60) at 2 s
    assert leases.next_action(T0 + 3 * S) == Wait(T0 + 2 * S + 60 * S - TTL + TTL // 3)
    leases.renewed(KEY, T0 + 4 * S + 5 * S)  # lock.renew(5) at 4 s: due at once
    assert leases.next_action(T0 + 4 * S) == Renew((KEY,))
    assert leases.next_action(T0 + 9 * S) == Lapsed((KEY,))


def test_a_dropped_lease_is_no_longer_kept() -> None:
    leases = held_lock()
    assert KEY in leases
    leases.drop(KEY)  # a refused renewal: the caller knows it is gone
    assert KEY not in leases and leases.expires_us(KEY) is None
    assert leases.next_action(T0 + TTL) == Idle()
    leases.renewed(KEY, T0 + 2 * TTL)  # a late answer changes nothing
    assert len(leases) == 0


@pytest.mark.parametrize(("interval", "term"), [(0, S), (S, 0), (-1, S)])
def test_interval_and_term_must_be_positive(interval: int, term: int) -> None:
    with pytest.raises(InvalidArgument):
        Leases(interval, term)


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
