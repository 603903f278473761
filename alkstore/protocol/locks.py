"""Lock plans: TTL locks with fencing tokens."""

from __future__ import annotations

from .dialect import Dialect
from .plan import Plan
from .types import LockRecord


def try_lock(
    d: Dialect, name: str, owner: str, now_us: int, ttl_us: int
) -> Plan[LockRecord | None]:
    """Acquire a free or lapsed lock (new token) or refresh our own (same token)."""
    until = now_us + ttl_us
    row = yield d.acquire_lock(name, owner, now_us, until)
    return None if row is None else LockRecord(name, owner, int(row[0]), until)


def renew(d: Dialect, lock: LockRecord, now_us: int, ttl_us: int) -> Plan[LockRecord | None]:
    until = now_us + ttl_us
    count = yield d.renew_lock(lock.name, lock.owner, lock.token, now_us, until)
    return LockRecord(lock.name, lock.owner, lock.token, until) if count else None


def release(d: Dialect, lock: LockRecord, now_us: int) -> Plan[bool]:
    count = yield d.release_lock(lock.name, lock.owner, lock.token, now_us)
    return bool(count)
