"""Lock plans: TTL locks with fencing tokens."""

from __future__ import annotations

from ..dialect import Dialect
from ..plan import Plan, Row, fetch_all, fetch_count, fetch_one, reads
from ..rows import _int, _shape, _str
from ..values.errors import CodecError, brief
from ..values.timeconv import US_PER_S, until_us
from ..values.types import LockRecord

# Room for the release's round trip beyond the lock's own expiry.
RELEASE_GRACE_S = 2.0


def try_lock(
    d: Dialect, name: str, owner: str, now_us: int, ttl_us: int
) -> Plan[LockRecord | None]:
    """Acquire a free or lapsed lock (new token) or refresh our own (same token)."""
    until = until_us(now_us, ttl_us, "ttl")
    for statement in d.lock_guard(False):
        yield statement
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


# Lock rows nobody has held for this long are pruned (released or lapsed):
# longer than any clock skew between processes should be, since a process
# whose clock runs ahead by more could prune a lock another still holds (its
# holder then fails to renew: LockLost; the fencing token still protects).
PRUNE_GRACE_US = 600_000_000


def token_floor(row: Row | None) -> int:
    """The stored token floor (0 before the first prune of a lock row)."""
    if row is None:
        return 0
    _shape(row, 1, "token floor")
    text = _str(row[0], "token floor")
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise CodecError(f"the stored lock token floor is not a token: {brief(text)}")
    return int(text)


@reads
def token_floor_plan(d: Dialect) -> Plan[int]:
    """The token floor as stored now (0 before any lock row was pruned)."""
    return token_floor((yield from fetch_one(d.token_floor())))


def raised_floor(floor: int, pruned: list[int]) -> int | None:
    """The new token floor after pruning rows with tokens ``pruned`` (None:
    the floor stays): the highest token ever pruned, so a name's new row
    starts above every token it had."""
    top = max(pruned, default=0)
    return top if top > floor else None


def prune(d: Dialect, cutoff_us: int, limit: int) -> Plan[int]:
    """Delete up to ``limit`` lock rows free since ``cutoff_us`` and raise
    the token floor past their tokens, in one transaction; how many went.

    Looks first without the exclusive guard, so a store with nothing to prune
    never holds up acquisitions."""
    probe = yield from fetch_one(d.stale_lock(cutoff_us))
    if probe is None:
        return 0
    for statement in d.lock_guard(True):
        yield statement
    rows = yield from fetch_all(d.prune_locks(cutoff_us, limit))
    pruned = [_int(r[0], "token") for r in rows]
    if not pruned:
        return 0
    floor = token_floor((yield from fetch_one(d.token_floor())))
    new = raised_floor(floor, pruned)
    if new is not None:
        yield d.set_token_floor(new)
    return len(pruned)
