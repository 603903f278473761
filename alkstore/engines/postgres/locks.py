"""Locks on PostgreSQL: the advisory guard that keeps acquisitions and
prunes apart, acquisition with fencing tokens, renewal, release, the read
model, and the pruning of rows nobody held for a while."""

from __future__ import annotations

from ...protocol.plan import Fetch, Statement
from ..sql import Sql, Variants
from .spelling import RULES
from .tables import LOCKS, META


class Locks:
    # The schema's advisory-lock key (schema.lock_guard_key).
    _lock_key: int

    # An acquisition reads the token floor in its statement's snapshot: if a
    # prune that deletes the name's row and raises the floor committed after
    # that snapshot, the insert would find no row and start below the floor.
    # So acquisitions hold a shared advisory lock and prunes an exclusive
    # one, taken in a statement of its own before the rest (the next
    # statement's snapshot is then taken after the other side committed).
    # Fetch.NONE: it rides with the next round trip. Keyed by exclusive.
    _lock_guard = Variants({
        False: Sql("SELECT pg_advisory_xact_lock_shared(:key::bigint)"),
        True: Sql("SELECT pg_advisory_xact_lock(:key::bigint)"),
    })  # fmt: skip

    def lock_guard(self, exclusive: bool) -> tuple[Statement, ...]:
        return (self._lock_guard[exclusive].bind(key=self._lock_key),)

    # One statement: take a free or lapsed lock (new token), refresh one we
    # hold (same token), or change nothing and return no row. A conflict
    # whose WHERE is false returns no row (the row is locked until commit,
    # which is harmless in a one-statement transaction). A name with no row
    # (never taken, or pruned) starts above the token floor.
    _acquire_lock = Sql(
        f"INSERT INTO {LOCKS} AS l (name, owner, token, expires_at) "
        f"VALUES (:name, :owner, {RULES.new_lock_token(META)}, :until) "
        "ON CONFLICT (name) DO UPDATE SET "
        f"token = {RULES.fencing_token('EXCLUDED.owner', ':now', row='l')}, "
        "owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
        f"WHERE {RULES.lock_free(':now', row='l')} OR l.owner = EXCLUDED.owner "
        "RETURNING token",
        Fetch.ONE,
    )

    def acquire_lock(self, name: str, owner: str, now_us: int, until_us: int) -> Statement:
        return self._acquire_lock.bind(name=name, owner=owner, now=now_us, until=until_us)

    _renew_lock = Sql(
        f"UPDATE {LOCKS} SET expires_at = :until "
        f"WHERE name = :name AND {RULES.lock_held(':owner', ':token', ':now')}",
        Fetch.ROWCOUNT,
    )

    def renew_lock(
        self, name: str, owner: str, token: int, now_us: int, until_us: int
    ) -> Statement:
        return self._renew_lock.bind(
            name=name, owner=owner, token=token, now=now_us, until=until_us
        )

    # The row stays (owner cleared, the release time in expires_at) so the
    # next token continues the sequence; housekeeping prunes it a grace
    # period later.
    _release_lock = Sql(
        f"UPDATE {LOCKS} SET owner = NULL, expires_at = :now "
        f"WHERE name = :name AND {RULES.lock_held(':owner', ':token', ':now')}",
        Fetch.ROWCOUNT,
    )

    def release_lock(self, name: str, owner: str, token: int, now_us: int) -> Statement:
        return self._release_lock.bind(name=name, owner=owner, token=token, now=now_us)

    # Held: anything but free, by the rule acquisitions go by.
    _list_locks = Sql(
        f"SELECT name, owner, token, expires_at, NOT {RULES.lock_free(':now')} "
        f"FROM {LOCKS} ORDER BY name",
        Fetch.ALL,
    )

    def list_locks(self, now_us: int) -> Statement:
        return self._list_locks.bind(now=now_us)

    # Looked at before the guard, so a store with nothing to prune never
    # makes acquisitions wait.
    _stale_lock = Sql(
        f"SELECT name FROM {LOCKS} WHERE {RULES.lock_free_since(':cutoff')} LIMIT 1", Fetch.ONE
    )

    def stale_lock(self, cutoff_us: int) -> Statement:
        return self._stale_lock.bind(cutoff=cutoff_us)

    # The caller holds the exclusive guard and raises the token floor to the
    # highest token returned, in the same transaction.
    _prune_locks = Sql(
        f"DELETE FROM {LOCKS} WHERE name IN (SELECT name FROM {LOCKS} "
        f"WHERE {RULES.lock_free_since(':cutoff')} ORDER BY expires_at, name LIMIT :limit "
        "FOR UPDATE SKIP LOCKED) RETURNING token",
        Fetch.ALL,
    )

    def prune_locks(self, cutoff_us: int, limit: int) -> Statement:
        return self._prune_locks.bind(cutoff=cutoff_us, limit=limit)

    _token_floor = Sql(f"SELECT value FROM {META} WHERE key = :key", Fetch.ONE)

    def token_floor(self) -> Statement:
        return self._token_floor.bind(key=RULES.TOKEN_FLOOR_KEY)

    _set_token_floor = Sql(
        f"INSERT INTO {META} (key, value) VALUES (:key, :value) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
    )

    def set_token_floor(self, token: int) -> Statement:
        return self._set_token_floor.bind(key=RULES.TOKEN_FLOOR_KEY, value=str(token))
