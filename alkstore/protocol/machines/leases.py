"""Keeping leases: when to renew what is held, and when it is lost.

A lease is anything held until an expiry unless renewed in time: a job's
claim (the worker's heartbeats) or a lock (``hold_lock``). ``Leases`` is the
one machine both keep theirs with. Events in (a lease taken, renewed, its
renewal's round trip failed, the current time), one action out (renew these
now, these have lapsed, wait until an instant, or nothing is held).

The caller decides what a refused renewal means (the lease is gone: it
drops it); a failed round trip is not a refusal: the lease may still be
ours, so it is tried again, sooner, until its expiry passes.

Nothing here reads a clock or does IO.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..values.errors import InvalidArgument

# The soonest a failed renewal is tried again, however little is left.
_RETRY_MIN_US = 1_000


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep until ``until_us`` unless kicked first (the worker's claim loop
    waits on this too: a wake, a finished job)."""

    until_us: int


@dataclass(frozen=True, slots=True)
class Renew:
    """Renew these leases now (one round trip for all of them)."""

    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Lapsed:
    """These leases ran out without a renewal: someone else may hold them now."""

    keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Idle:
    """Nothing held: wait until something is."""


LeaseAction = Renew | Lapsed | Wait | Idle


@dataclass(slots=True)
class _Lease:
    expires_us: int
    renew_us: int


class Leases:
    """When each held lease needs renewing, and when one is lost. One machine
    for all of a holder's leases, so a worker keeps all its claims with one
    task and one round trip per renewal round, not one per job.

    Renewals are spaced ``interval_us`` from the start of a lease (or its last
    renewal); a renewal extends it by ``term_us``. A failed round trip is
    retried sooner, at a quarter of what is left (never later than the next
    regular renewal); once a lease's expiry passes without a renewal it has
    lapsed, since someone else may hold it by then.
    """

    def __init__(self, interval_us: int, term_us: int) -> None:
        if interval_us <= 0 or term_us <= 0:
            raise InvalidArgument("lease interval and term must be > 0")
        self.interval_us = interval_us
        self.term_us = term_us
        self._held: dict[int, _Lease] = {}

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: int) -> bool:
        return key in self._held

    def expires_us(self, key: int) -> int | None:
        """When ``key``'s lease ends as far as this machine knows (None: not held)."""
        lease = self._held.get(key)
        return None if lease is None else lease.expires_us

    def hold(self, key: int, expires_us: int) -> None:
        """A new lease running until ``expires_us`` (taken ``term_us`` before)."""
        started = expires_us - self.term_us
        self._held[key] = _Lease(expires_us, started + self.interval_us)

    def drop(self, key: int) -> None:
        self._held.pop(key, None)

    def renewed(self, key: int, expires_us: int) -> None:
        """Renewed (by the keeper, or by the lease's user) until ``expires_us``."""
        lease = self._held.get(key)
        if lease is not None:
            lease.expires_us = expires_us
            lease.renew_us = expires_us - self.term_us + self.interval_us

    def renew_failed(self, keys: tuple[int, ...], now_us: int) -> None:
        """The renewal's round trip failed (not refused): try again soon."""
        for key in keys:
            lease = self._held.get(key)
            if lease is not None:
                remaining = lease.expires_us - now_us
                retry = max(_RETRY_MIN_US, min(self.interval_us, remaining // 4))
                lease.renew_us = now_us + retry

    def next_action(self, now_us: int) -> LeaseAction:
        if not self._held:
            return Idle()
        lapsed = tuple(k for k, lease in self._held.items() if lease.expires_us <= now_us)
        if lapsed:
            for key in lapsed:
                del self._held[key]
            return Lapsed(lapsed)
        due = tuple(k for k, lease in self._held.items() if lease.renew_us <= now_us)
        if due:
            return Renew(due)
        return Wait(min(min(lease.renew_us, lease.expires_us) for lease in self._held.values()))
