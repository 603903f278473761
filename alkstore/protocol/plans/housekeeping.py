"""Housekeeping: what one pass removes, and when the background loop runs it.

A pass (``Store.prune``) removes what no one needs any more: history rows
and dead letters whose prune time has come, stream events past their
stream's retention, SQLite notification rows older than the watchers'
window, and lock rows nobody has held for a grace period. Each statement
deletes a bounded batch (a short write lock); the caller runs a plan again
until a batch comes back short. Every statement decides what it deletes
itself (Postgres: ``SKIP LOCKED``, and the lock guard), so any number of
processes may prune at once.

On an engine whose dead rows wait for a vacuum (Postgres), a pass then
vacuums the churning tables whose dead rows have passed the engine's
threshold (``vacuum_due``; the command runs outside a transaction, so the
service sends it, not a plan).

``HousekeepingLoop`` is the background task's decisions: a jittered
interval (processes started together do not prune together), and after a
failed pass a sooner, growing retry, never later than the interval.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dialect import Dialect, NotificationLog, Vacuuming
from ..plan import Plan, fetch_all, fetch_count, reads
from ..values.results import RESULTS_RETENTION_US
from .queues import forget_edges

# Rows one statement deletes at most.
PRUNE_BATCH = 1000
# How long SQLite keeps notification rows for other processes' watchers,
# unless the engine options say otherwise (see docs/wakes.md).
NOTIFICATION_RETENTION_S = 60.0


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What one housekeeping pass (``Store.prune``) removed, in rows:
    finished jobs from ``history``, ``dead`` letters, stream ``events``,
    SQLite ``notifications`` (always 0 on Postgres), ``locks`` and
    finished ``workflows``; and how many tables it ``vacuumed`` (Postgres;
    always 0 on SQLite)."""

    history: int = 0
    dead: int = 0
    events: int = 0
    notifications: int = 0
    locks: int = 0
    vacuumed: int = 0
    workflows: int = 0


def prune_history(d: Dialect, now_us: int, limit: int = PRUNE_BATCH) -> Plan[int]:
    """One batch of finished jobs whose prune time has come (with the
    dependency edges of those that waited for others)."""
    rows = yield from fetch_all(d.prune_history(now_us, limit))
    yield from forget_edges(d, rows)
    return len(rows)


def prune_dead(d: Dialect, now_us: int, limit: int = PRUNE_BATCH) -> Plan[int]:
    """One batch of dead letters whose prune time (their queue's dead
    retention after they died) has come; letters without one stay."""
    rows = yield from fetch_all(d.prune_dead(now_us, limit))
    yield from forget_edges(d, rows)
    return len(rows)


def prune_workflows(d: Dialect, now_us: int, limit: int = PRUNE_BATCH) -> Plan[int]:
    """One batch of workflows older than a day none of whose steps is still
    anywhere (live, waiting, dead, or in history: each step's record goes
    with its own queue's retention, and the workflow once the last has)."""
    rows = yield from fetch_all(d.stale_workflows(now_us - RESULTS_RETENTION_US, limit))
    if not rows:
        return 0
    *rest, last = d.forget_workflows([int(r[0]) for r in rows])
    for statement in rest:
        yield statement
    count = yield from fetch_count(last)
    return int(count)


def prune_notifications(
    log: NotificationLog, before_us: int, limit: int = PRUNE_BATCH
) -> Plan[int]:
    """One batch of notification rows created before ``before_us``."""
    count = yield from fetch_count(log.prune_notifications(before_us, limit))
    return int(count)


def due_for_vacuum(live: int, dead: int, threshold: int, scale: float) -> bool:
    """Whether a table of ``live`` rows with ``dead`` ones is due a vacuum:
    the rule of Postgres's autovacuum, with the engine's figures."""
    return dead > threshold + scale * live


@reads
def vacuum_due(v: Vacuuming) -> Plan[list[str]]:
    """The churning tables due a vacuum now, by name."""
    rows = yield from fetch_all(v.churn_stats())
    return [
        str(table)
        for table, live, dead in rows
        if due_for_vacuum(int(live), int(dead), v.vacuum_threshold, v.vacuum_scale)
    ]


def full(count: int, limit: int = PRUNE_BATCH) -> bool:
    """Whether a batch came back full, so there may be more to delete."""
    return count >= limit


__all__ = [
    "NOTIFICATION_RETENTION_S",
    "PRUNE_BATCH",
    "PruneReport",
    "due_for_vacuum",
    "full",
    "prune_dead",
    "prune_history",
    "prune_notifications",
    "prune_workflows",
    "vacuum_due",
]
