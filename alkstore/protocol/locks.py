"""Lock plans: TTL locks with fencing tokens."""

from __future__ import annotations

from .dialect import Dialect
from .plan import Plan, fetch_count, fetch_one
from .timeconv import US_PER_S, until_us
from .types import LockRecord

# Room for the release's round trip beyond the lock's own expiry.
RELEASE_GRACE_S = 2.0


def try_lock(
    d: Dialect, name: str, owner: str, now_us: int, ttl_us: int
) -> Plan[LockRecord | None]:
    """Acquire a free or lapsed lock (new token) or refresh our own (same token)."""
    until = until_us(now_us, ttl_us, "ttl")
    row = yield from fetch_one(d.acquire_lock(name, owner, now_us, until))
    return None if row is None else LockRecord(name, owner, int(row[0]), until)


def renew(d: Dialect, lock: LockRecord, now_us: int, ttl_us: int) -> Plan[LockRecord | None]:
    until = until_us(now_us, ttl_us, "ttl")
    count = yield from fetch_count(d.renew_lock(lock.name, lock.owner, lock.token, now_us, until))
    return LockRecord(lock.name, lock.owner, lock.token, until) if count else None


def release(d: Dialect, lock: LockRecord, now_us: int) -> Plan[bool]:
    count = yield from fetch_count(d.release_lock(lock.name, lock.owner, lock.token, now_us))
    return bool(count)


def release_bound(now_us: int, lock: LockRecord) -> float:
    """Seconds a shielded release (leaving ``hold_lock``) may wait: while the
    lock lasts, plus a grace. Past its expiry the lock is free anyway, so a
    database that does not answer must not hold the caller longer."""
    return max(0.0, (lock.expires_at_us - now_us) / US_PER_S) + RELEASE_GRACE_S
