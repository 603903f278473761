"""Locks on a real store agree with the reference model, step by step.

A Hypothesis state machine has several owners try, renew and release two lock
names while the clock jumps, including to exactly the instant a TTL lapses,
and housekeeping prunes the rows free for a while (raising the token floor).
Every answer (token or None, True/False, the expiry of a lock, rows pruned)
must equal ``LockModel``'s, and tokens must only ever grow per name, across
prunes too.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, invariant, multiple, rule

from alkstore.api.locks import Lock
from alkstore.protocol.plans import locks
from alkstore.protocol.values.timeconv import instant_us, to_datetime
from tests.backends import BACKENDS, Backend, selected_backends
from tests.model import LockModel

from ._harness import US, StoreMachine, machine_settings, run_machine

NAMES = ("alpha", "beta")
OWNERS = ("o1", "o2", "o3")

names = st.sampled_from(NAMES)
owners = st.sampled_from(OWNERS)
ttls = st.one_of(st.integers(1, 1_000), st.integers(1, 20 * US))


def td(us: int) -> timedelta:
    return timedelta(microseconds=us)


class LockMachine(StoreMachine):
    handles = Bundle("handles")  # every Lock ever acquired, stale ones included

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.model = LockModel()
        # (name, token) pairs of every successful acquisition, in order.
        self.acquired: list[tuple[str, str, int]] = []

    def boundaries(self) -> list[int]:
        return [lock.expires_at_us for lock in self.model.locks.values()]

    @rule(target=handles, name=names, owner=owners, ttl=ttls)
    def try_lock(self, name: str, owner: str, ttl: int) -> object:
        """try_lock gives the model's token (new, kept, or None) and expiry."""
        lock = self.call(lambda: self.store.try_lock(name, owner, td(ttl)))
        want = self.model.try_lock(name, owner, self.now, ttl)
        assert (None if lock is None else lock.token) == want
        if lock is None:
            return multiple()  # nothing to add to the bundle
        assert lock.expires_at == to_datetime(self.now + ttl)
        previous = [t for n, _, t in self.acquired if n == name]
        if previous and lock.token == previous[-1]:
            # A kept token is only ever the same owner refreshing its hold.
            assert [o for n, o, _ in self.acquired if n == name][-1] == owner
        else:
            assert all(lock.token > t for t in previous), "fencing tokens must grow"
        self.acquired.append((name, owner, lock.token))
        return lock

    @rule(lock=handles, ttl=ttls)
    def renew(self, lock: Lock, ttl: int) -> None:
        """renew succeeds exactly while this (owner, token) holds the lock."""
        got = self.call(lambda: lock.renew(td(ttl)))
        assert got == self.model.renew(lock.name, lock.owner, lock.token, self.now, ttl)
        if got:
            assert lock.expires_at == to_datetime(self.now + ttl)

    @rule(lock=handles)
    def release(self, lock: Lock) -> None:
        """release succeeds exactly while this (owner, token) holds the lock."""
        got = self.call(lock.release)
        assert got == self.model.release(lock.name, lock.owner, lock.token, self.now)

    @rule(lock=handles, offset=st.sampled_from([-1, 0]), renew=st.booleans())
    def at_expiry(self, lock: Lock, offset: int, renew: bool) -> None:
        """renew/release 1 us before the handle's TTL lapses, or exactly at it
        (a lock is held strictly before its expiry), agrees too."""
        target = instant_us(lock.expires_at) + offset
        if target > self.now:
            self.clock.set(target)
        if renew:
            self.renew(lock, 1)
        else:
            self.release(lock)

    @rule(back=st.one_of(st.just(0), st.integers(1, 30 * US)), limit=st.sampled_from([1, 100]))
    def prune(self, back: int, limit: int) -> None:
        """A batch of the rows free since ``now - back`` (housekeeping's own
        grace is 10 minutes; the plan takes any cutoff) is the model's, and
        the floor rises with it."""
        plan = locks.prune(self.store._core.dialect, self.now - back, limit)
        got = self.call(lambda: self.store._core.run(plan))
        assert got == self.model.prune(self.now - back, limit)

    @invariant()
    def exclusion(self) -> None:
        """A held lock excludes every other owner: their try_lock is None."""
        for name in NAMES:
            holder = self.model.holder(name, self.now)
            if holder is None:
                continue
            other = next(o for o in OWNERS if o != holder[0])
            # A 1 us TTL: harmless to the model, checked without changing it.
            assert self.call(lambda n=name, o=other: self.store.try_lock(n, o, td(1))) is None
            assert self.model.try_lock(name, other, self.now, 1) is None


@pytest.mark.parametrize("backend_id", selected_backends())
def test_locks_match_model(backend_id: str) -> None:
    backend = BACKENDS[backend_id]
    run_machine(
        lambda: LockMachine(backend),
        machine_settings(backend, max_examples=120, steps=40),
    )
