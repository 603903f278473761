"""Locks on SQLite: acquisition with fencing tokens, renewal, release, the
read model, and the pruning of rows nobody held for a while."""

from __future__ import annotations

from ...protocol.plan import Fetch, Statement
from ..sql import Sql
from .spelling import RULES
from .tables import LOCKS, META


class Locks:
    # The single writer keeps an acquisition from reading the token floor
    # while a prune raises it: nothing to take first.
    _LOCK_GUARD: tuple[Statement, ...] = ()

    def lock_guard(self, exclusive: bool) -> tuple[Statement, ...]:
        return self._LOCK_GUARD

    # One statement: take a free or lapsed lock (new token), refresh one we
    # hold (same token), or change nothing and return no row. A name with no
    # row (never taken, or pruned) starts above the token floor.
    _acquire_lock = Sql(
        f"INSERT INTO {LOCKS} (name, owner, token, expires_at) "
        f"VALUES (:name, :owner, {RULES.new_lock_token(META)}, :until) "
        "ON CONFLICT (name) DO UPDATE SET "
        f"token = {RULES.fencing_token('excluded.owner', ':now')}, "
        "owner = excluded.owner, expires_at = excluded.expires_at "
        f"WHERE {RULES.lock_free(':now')} OR owner = excluded.owner "
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

    _stale_lock = Sql(
        f"SELECT name FROM {LOCKS} INDEXED BY __alkstore_locks_expiry "
        f"WHERE {RULES.lock_free_since(':cutoff')} LIMIT 1",
        Fetch.ONE,
    )

    def stale_lock(self, cutoff_us: int) -> Statement:
        return self._stale_lock.bind(cutoff=cutoff_us)

    # The caller raises the token floor to the highest token returned, in the
    # same transaction.
    _prune_locks = Sql(
        f"DELETE FROM {LOCKS} WHERE name IN (SELECT name FROM {LOCKS} "
        f"INDEXED BY __alkstore_locks_expiry WHERE {RULES.lock_free_since(':cutoff')} "
        "ORDER BY expires_at, name LIMIT :limit) RETURNING token",
        Fetch.ALL,
    )

    def prune_locks(self, cutoff_us: int, limit: int) -> Statement:
        return self._prune_locks.bind(cutoff=cutoff_us, limit=limit)

    _token_floor = Sql(f"SELECT value FROM {META} WHERE key = :key", Fetch.ONE)

    def token_floor(self) -> Statement:
        return self._token_floor.bind(key=RULES.TOKEN_FLOOR_KEY)

    _set_token_floor = Sql(
        f"INSERT INTO {META} (key, value) VALUES (:key, :value) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
    )

    def set_token_floor(self, token: int) -> Statement:
        return self._set_token_floor.bind(key=RULES.TOKEN_FLOOR_KEY, value=str(token))
