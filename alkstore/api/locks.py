"""``Lock``: TTL locks with fencing tokens, and a helper that keeps one held."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime

from ..protocol.machines.leases import Idle, Lapsed, Leases, Wait
from ..protocol.plans import locks
from ..protocol.values.errors import AlkstoreError, Closed, LockLost, LockTimeout
from ..protocol.values.names import check_identifier, check_name
from ..protocol.values.timeconv import US_PER_S, Duration, check_seconds, duration_us, to_datetime
from ..protocol.values.types import LockRecord
from ..runner.runtime import CancelScope
from ..runner.timeouts import check_timeout
from .core.handle import StoreCore

log = logging.getLogger("alkstore.locks")


class Lock:
    """A lock held until release or TTL expiry.

    ``token`` (the fencing token) increases on every acquisition of the name:
    pass it to the systems you write to so they can refuse a stale holder.
    """

    def __init__(self, core: StoreCore, record: LockRecord) -> None:
        self._core = core
        self._record = record

    def __repr__(self) -> str:
        r = self._record
        return f"Lock(name={r.name!r}, owner={r.owner!r}, token={r.token})"

    @property
    def name(self) -> str:
        """The lock's name."""
        return self._record.name

    @property
    def owner(self) -> str:
        """The owner that holds it."""
        return self._record.owner

    @property
    def token(self) -> int:
        """The fencing token of this acquisition; it grows with every acquisition of the name."""
        return self._record.token

    @property
    def expires_at(self) -> datetime:
        """When the lock lapses unless renewed, in UTC."""
        return to_datetime(self._record.expires_at_us)

    async def renew(self, ttl: Duration) -> bool:
        """Extend to now + ``ttl``; ``False`` once the TTL has lapsed or it was released."""
        core = self._core
        ttl_us = duration_us(ttl, "ttl", allow_zero=False)
        record = await core.run(locks.renew(core.dialect, self._record, core.now_us(), ttl_us))
        if record is None:
            return False
        self._record = record
        return True

    async def release(self) -> bool:
        """Give the lock up; ``False`` if it had already lapsed or been released."""
        core = self._core
        return await core.run(locks.release(core.dialect, self._record, core.now_us()))


async def try_lock(core: StoreCore, name: str, owner: str, ttl_us: int) -> Lock | None:
    """Take lock ``name`` (checked names) for ``ttl_us``; no span of its own."""
    record = await core.run(locks.try_lock(core.dialect, name, owner, core.now_us(), ttl_us))
    return None if record is None else Lock(core, record)


@asynccontextmanager
async def hold_lock(
    core: StoreCore,
    name: str,
    owner: str,
    ttl: Duration,
    *,
    timeout: float | None,
    poll: float,
) -> AsyncIterator[Lock]:
    runtime = core.runtime
    name = check_name(name, "lock")
    owner = check_identifier(owner, "lock owner")
    ttl_us = duration_us(ttl, "ttl", allow_zero=False)
    poll = check_seconds(poll, "poll")
    limit = None if timeout is None else check_timeout(timeout)
    deadline = None if limit is None else runtime.monotonic() + limit

    async def acquire() -> Lock:
        lock = await try_lock(core, name, owner, ttl_us)
        while lock is None:
            if limit is not None and deadline is not None and runtime.monotonic() >= deadline:
                raise LockTimeout(name, limit)
            await runtime.sleep(poll)
            lock = await try_lock(core, name, owner, ttl_us)
        return lock

    # One span for the whole wait (not one per try), when instrumented.
    lock = await core.telemetry.lock(name, owner, acquire())
    lost = False

    async def keep(body: CancelScope) -> None:
        nonlocal lost
        await _keep(core, lock, ttl, ttl_us)
        lost = True
        body.cancel()

    try:
        async with runtime.task_group() as group:
            with runtime.cancel_scope() as body:
                group.start_soon(keep, body)
                try:
                    yield lock
                finally:
                    group.cancel()
        if lost:
            raise LockLost(lock.name, lock.token)
    finally:
        if not lost:
            # Shielded so a cancelled holder still frees the lock at once,
            # but bounded: past the lock's expiry it is free anyway.
            bound = locks.release_bound(core.now_us(), lock._record)
            with runtime.shield(bound) as scope, contextlib.suppress(AlkstoreError):
                await lock.release()
            if scope.cancelled_caught:
                log.warning("lock %r: release got no answer within %.1f s; it is free once "
                            "its TTL lapses", lock.name, bound)  # fmt: skip


async def _keep(core: StoreCore, lock: Lock, ttl: Duration, ttl_us: int) -> None:
    """Keep ``lock`` held, renewing it every ``ttl / 3`` as ``Leases`` says;
    return once it is lost.

    A refused renewal (``False``) or a closed store loses the lock at once;
    a failed round trip may not have: the lock may still be ours, so the
    renewal is retried until the TTL lapses."""
    leases = Leases(max(1, ttl_us // 3), ttl_us)
    key = lock.token
    leases.hold(key, lock._record.expires_at_us)
    while True:
        # The body may renew the lock itself (``lock.renew``): a lease
        # renewed is a lease renewed, whoever did it.
        expires = lock._record.expires_at_us
        if leases.expires_us(key) != expires:
            leases.renewed(key, expires)
        now = core.now_us()
        action = leases.next_action(now)
        if isinstance(action, Lapsed | Idle):
            return
        if isinstance(action, Wait):
            await core.runtime.sleep(max(0, action.until_us - now) / US_PER_S)
            continue
        try:
            ok = await lock.renew(ttl)
        except Closed:
            ok = False
        except AlkstoreError:
            log.warning("lock %r: renewal failed; retrying while the lock lasts", lock.name,
                        exc_info=True)  # fmt: skip
            leases.renew_failed(action.keys, core.now_us())
            continue
        if not ok:
            return
        leases.renewed(key, lock._record.expires_at_us)
