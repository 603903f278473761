"""Locks: TTL-bounded exclusion, renew/release, fencing tokens, hold_lock."""

from __future__ import annotations

import pytest

from alkstore import (
    DatabaseError,
    InvalidArgument,
    InvalidName,
    Lock,
    LockLost,
    LockTimeout,
    ManualClock,
    Store,
)
from tests.backends import Backend

from . import aio
from .helpers import SOON, at, wait_until


async def acquire(store: Store, name: str, owner: str, ttl: float) -> Lock:
    lock = await store.try_lock(name, owner, ttl)
    assert lock is not None
    return lock


async def test_try_lock_returns_a_lock_with_name_owner_token_and_expiry(
    store: Store, clock: ManualClock
) -> None:
    lock = await acquire(store, "res", "alice", 10)
    assert lock.name == "res"
    assert lock.owner == "alice"
    assert isinstance(lock.token, int)
    assert lock.expires_at == at(clock, 10)


async def test_a_held_lock_excludes_other_owners(store: Store, clock: ManualClock) -> None:
    await acquire(store, "res", "alice", 10)
    assert await store.try_lock("res", "bob", 10) is None
    clock.advance(9.9)
    assert await store.try_lock("res", "bob", 10) is None


async def test_locks_with_different_names_are_independent(store: Store) -> None:
    await acquire(store, "a", "alice", 10)
    b = await acquire(store, "b", "bob", 10)
    assert b.owner == "bob"


async def test_exclusion_holds_across_stores(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with (
        backend.open(location, clock=clock) as one,
        backend.open(location, clock=clock) as two,
    ):
        held = await acquire(one, "res", "alice", 10)
        assert await two.try_lock("res", "bob", 10) is None
        assert await held.release() is True
        taken = await acquire(two, "res", "bob", 10)
        assert taken.token > held.token


async def test_release_frees_the_lock(store: Store) -> None:
    lock = await acquire(store, "res", "alice", 10)
    assert await lock.release() is True
    assert await lock.release() is False
    assert await lock.renew(10) is False
    bob = await acquire(store, "res", "bob", 10)
    assert bob.token > lock.token


async def test_ttl_lapse_lets_another_owner_in(store: Store, clock: ManualClock) -> None:
    alice = await acquire(store, "res", "alice", 10)
    clock.advance(10.001)
    bob = await acquire(store, "res", "bob", 10)
    assert bob.token > alice.token
    assert bob.expires_at == at(clock, 10)


async def test_renew_and_release_after_expiry_return_false_when_nobody_took_it(
    store: Store, clock: ManualClock
) -> None:
    lock = await acquire(store, "res", "alice", 10)
    clock.advance(11)
    assert await lock.renew(10) is False
    assert await lock.release() is False
    # The lapsed lock is free for anyone, with a new token...
    again = await acquire(store, "res", "alice", 10)
    assert again.token > lock.token
    # ...and the stale handle stays stale even though its owner holds it again.
    assert await lock.renew(10) is False
    assert await lock.release() is False
    assert await store.try_lock("res", "bob", 10) is None
    assert await again.release() is True


async def test_renew_and_release_after_expiry_return_false_when_another_took_it(
    store: Store, clock: ManualClock
) -> None:
    alice = await acquire(store, "res", "alice", 10)
    clock.advance(11)
    bob = await acquire(store, "res", "bob", 10)
    assert await alice.renew(10) is False
    assert await alice.release() is False
    # Alice's stale calls changed nothing: Bob still holds it.
    assert await store.try_lock("res", "carol", 10) is None
    assert await bob.renew(5) is True
    assert await bob.release() is True


async def test_renew_extends_the_ttl(store: Store, clock: ManualClock) -> None:
    lock = await acquire(store, "res", "alice", 10)
    clock.advance(8)
    assert await lock.renew(10) is True
    assert lock.expires_at == at(clock, 10)
    clock.advance(8)  # 16 s after acquisition: only the renewal keeps it
    assert await store.try_lock("res", "bob", 10) is None
    clock.advance(2.5)
    bob = await acquire(store, "res", "bob", 10)
    assert bob.token > lock.token
    assert await lock.renew(10) is False


async def test_fencing_tokens_strictly_increase_across_acquisitions(
    store: Store, clock: ManualClock
) -> None:
    tokens = []
    lock = await acquire(store, "res", "a", 5)
    tokens.append(lock.token)
    assert await lock.release() is True
    lock = await acquire(store, "res", "a", 5)  # same owner after release: new token
    tokens.append(lock.token)
    clock.advance(6)
    lock = await acquire(store, "res", "b", 5)  # after lapse
    tokens.append(lock.token)
    clock.advance(6)
    lock = await acquire(store, "res", "b", 5)  # same owner after its own lapse
    tokens.append(lock.token)
    assert await lock.release() is True
    lock = await acquire(store, "res", "c", 5)
    tokens.append(lock.token)
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == len(tokens)


async def test_same_owner_try_lock_keeps_the_token_and_refreshes_the_ttl(
    store: Store, clock: ManualClock
) -> None:
    first = await acquire(store, "res", "alice", 10)
    clock.advance(8)
    second = await acquire(store, "res", "alice", 10)
    assert second.token == first.token
    assert second.expires_at == at(clock, 10)
    clock.advance(8)  # past the first TTL, within the refreshed one
    assert await store.try_lock("res", "bob", 10) is None
    clock.advance(2.5)
    assert (await acquire(store, "res", "bob", 10)).token > first.token


async def test_lock_arguments_are_validated(store: Store) -> None:
    with pytest.raises(InvalidName):
        await store.try_lock("res", "", 10)
    for ttl in (0, -1):
        with pytest.raises(InvalidArgument):
            await store.try_lock("res", "alice", ttl)
    lock = await acquire(store, "res", "alice", 10)
    with pytest.raises(InvalidArgument):
        await lock.renew(0)
    assert await store.try_lock("res", "bob", 10) is None


# -- hold_lock --------------------------------------------------------------------


async def test_hold_lock_holds_for_the_body_and_releases_after(
    store: Store, clock: ManualClock
) -> None:
    async with store.hold_lock("res", "alice", 10) as lock:
        assert lock.owner == "alice"
        assert await store.try_lock("res", "bob", 10) is None
    # Released on exit: no need to wait out the TTL.
    bob = await acquire(store, "res", "bob", 10)
    assert bob.token > lock.token


async def test_hold_lock_releases_when_the_body_raises(store: Store) -> None:
    with pytest.raises(KeyError):
        async with store.hold_lock("res", "alice", 10):
            raise KeyError("body failed")
    assert await store.try_lock("res", "bob", 10) is not None


async def test_hold_lock_waits_for_the_holder_up_to_its_timeout(
    store: Store, clock: ManualClock
) -> None:
    holder = await acquire(store, "res", "bob", 60)
    with pytest.raises(TimeoutError) as timed_out:
        async with store.hold_lock("res", "alice", 10, timeout=0.1, poll=0.01):
            pytest.fail("acquired a lock held by another owner")
    assert isinstance(timed_out.value, LockTimeout)  # the taxonomy's, still a TimeoutError

    entered: list[int] = []

    async def wait_for_it() -> None:
        async with store.hold_lock("res", "alice", 10, timeout=SOON, poll=0.01) as lock:
            entered.append(lock.token)

    async with aio.fail_after(SOON), aio.open_task_group() as nursery:
        nursery.start_soon(wait_for_it)
        await aio.sleep(0.05)
        assert entered == []
        assert await holder.release() is True
    assert len(entered) == 1 and entered[0] > holder.token


async def test_hold_lock_renews_in_the_background(store: Store, clock: ManualClock) -> None:
    async with aio.fail_after(SOON), store.hold_lock("res", "alice", 0.3) as lock:
        first_expiry = lock.expires_at
        clock.advance(0.2)
        # The helper renews every ttl/3 of real time; wait for one renewal.
        await wait_until(lambda: lock.expires_at > first_expiry)
        assert lock.expires_at == at(clock, 0.3)
        clock.advance(0.2)  # past the original TTL
        assert await store.try_lock("res", "bob", 10) is None


async def test_hold_lock_cancels_the_body_with_lock_lost_when_the_lock_is_lost(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with (
        backend.open(location, clock=clock) as mine,
        backend.open(location, clock=clock) as thief_store,
    ):
        reached_end = False
        thief: Lock | None = None
        async with aio.fail_after(SOON):
            with pytest.raises(LockLost) as caught:
                async with mine.hold_lock("res", "alice", 0.3) as lock:
                    clock.advance(1)  # our TTL lapses before the next renewal
                    thief = await acquire(thief_store, "res", "thief", 60)
                    await aio.sleep(SOON * 2)  # cancelled when the renewal fails
                    reached_end = True
        assert reached_end is False
        if thief is None:  # the renewal noticed the lapse before the thief struck
            thief = await acquire(thief_store, "res", "thief", 60)
        assert caught.value.name == "res"
        assert caught.value.token == lock.token
        assert thief.token > lock.token
        # The thief still holds it: the helper did not release someone else's lock.
        assert await mine.try_lock("res", "alice", 10) is None
        assert await thief.release() is True


def fail_renewals(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make the next ``times`` renewals' round trips fail (``DatabaseError``);
    the list counts the failures so far."""
    failed: list[int] = []
    real = Lock.renew

    async def flaky(self: Lock, ttl: float) -> bool:
        if len(failed) < times:
            failed.append(1)
            raise DatabaseError("injected: renewal round trip failed")
        return await real(self, ttl)

    monkeypatch.setattr(Lock, "renew", flaky)
    return failed


async def test_hold_lock_retries_a_failed_renewal_while_the_lock_lasts(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule: a renewal whose round trip fails does not lose the lock: it is
    retried (sooner) while the TTL lasts, and the body runs on."""
    failed = fail_renewals(monkeypatch, 2)
    async with aio.fail_after(SOON), store.hold_lock("res", "alice", 0.3) as lock:
        first_expiry = lock.expires_at
        clock.advance(0.2)  # the renewal is due (ttl/3): its round trip fails
        await wait_until(lambda: len(failed) == 1)
        clock.advance(0.05)  # retried at a quarter of what was left: fails again
        await wait_until(lambda: len(failed) == 2)
        clock.advance(0.02)  # still within the TTL: the third try succeeds
        await wait_until(lambda: lock.expires_at > first_expiry)
        assert lock.expires_at == at(clock, 0.3)
        assert await store.try_lock("res", "bob", 10) is None
    assert await store.try_lock("res", "bob", 10) is not None  # released on the way out


async def test_hold_lock_is_lost_when_renewals_fail_until_the_ttl_lapses(
    store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule: failing round trips are retried only while the lock lasts: once
    its TTL lapses unrenewed, the body is cancelled with ``LockLost``."""
    failed = fail_renewals(monkeypatch, 10**6)
    reached_end = False
    async with aio.fail_after(SOON):
        with pytest.raises(LockLost):
            async with store.hold_lock("res", "alice", 0.3):
                clock.advance(0.2)
                await wait_until(lambda: len(failed) >= 1)
                clock.advance(0.2)  # past the TTL, not renewed
                await aio.sleep(SOON * 2)  # cancelled once the keeper sees the lapse
                reached_end = True
    assert reached_end is False
    assert await store.try_lock("res", "bob", 10) is not None


async def test_ttl_accepts_timedelta_and_sub_second_values(
    store: Store, clock: ManualClock
) -> None:
    from datetime import timedelta

    lock = await acquire(store, "res", "alice", timedelta(milliseconds=1500))
    assert lock.expires_at == at(clock, 1.5)
    clock.advance(1.4)
    assert await store.try_lock("res", "bob", 0.25) is None
    clock.advance(0.1)
    bob = await acquire(store, "res", "bob", 0.25)
    assert bob.expires_at == at(clock, 0.25)
