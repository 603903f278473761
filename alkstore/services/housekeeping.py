"""Housekeeping: ``Store.prune`` (one pass now) and the background task that
every open store runs (``housekeeping_interval`` in the engine options).

Each part deletes in bounded batches, one short transaction each, until a
batch comes back short (``protocol/plans/housekeeping.py``); any number of
processes may do so at once. On Postgres a pass ends by vacuuming the
churning tables that are due (``VACUUM (SKIP_LOCKED)``, so two processes
never wait on each other's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from ..api.core.handle import StoreCore
from ..protocol.dialect import NotificationLog, Vacuuming
from ..protocol.machines.housekeeping import HousekeepingLoop
from ..protocol.plan import Plan
from ..protocol.plans import housekeeping as hk
from ..protocol.plans import locks, streams
from ..protocol.values.errors import AlkstoreError

log = logging.getLogger("alkstore.housekeeping")

# Streams under a retention policy read per page.
_STREAM_PAGE = 100


async def _drain(core: StoreCore, plan: Callable[[], Plan[int]]) -> int:
    """Run ``plan`` again until a batch comes back short; rows removed."""
    total = 0
    while True:
        count = await core.run(plan(), bulk=True)
        total += count
        if not hk.full(count):
            return total


def _stream_batch(d: Any, stream: streams.Retained, now_us: int) -> Callable[[], Plan[int]]:
    return lambda: streams.prune_stream(d, stream, now_us, hk.PRUNE_BATCH)


async def _prune_streams(core: StoreCore, now_us: int) -> int:
    d = core.dialect
    total = 0
    after = ""
    while True:
        page = await core.run(streams.retained_streams(d, after, _STREAM_PAGE), bulk=True)
        for stream in page:
            total += await _drain(core, _stream_batch(d, stream, now_us))
        if len(page) < _STREAM_PAGE:
            return total
        after = page[-1].name


async def prune(core: StoreCore) -> hk.PruneReport:
    """One housekeeping pass, as of the store's clock now."""
    d = core.dialect
    now = core.now_us()
    history = await _drain(core, lambda: hk.prune_history(d, now))
    dead = await _drain(core, lambda: hk.prune_dead(d, now))
    events = await _prune_streams(core, now)
    notifications = 0
    retention_us = core.notification_retention_us
    if retention_us is not None:
        before = now - retention_us
        # Only an engine whose wakes are rows (SQLite) keeps a retention for them.
        rows = cast(NotificationLog, d)
        notifications = await _drain(core, lambda: hk.prune_notifications(rows, before))
    cutoff = now - locks.PRUNE_GRACE_US
    pruned_locks = await _drain(core, lambda: locks.prune(d, cutoff, hk.PRUNE_BATCH))
    workflows = await _drain(core, lambda: hk.prune_workflows(d, now))
    vacuumed = await _vacuum(core) if core.vacuum else 0
    return hk.PruneReport(
        history, dead, events, notifications, pruned_locks, vacuumed, workflows
    )


async def _vacuum(core: StoreCore) -> int:
    """Vacuum the churning tables that are due (after the pruning, whose
    deletes count); how many. Only an engine whose dead rows wait for a
    vacuum (Postgres) sets ``core.vacuum``."""
    v = cast(Vacuuming, core.dialect)
    due = await core.run(hk.vacuum_due(v))
    for table in due:
        await core.maintain(v.vacuum(table))
    return len(due)


async def run_housekeeping(core: StoreCore, interval: float) -> None:
    """Prune every ``interval`` seconds (jittered) until cancelled; a failed
    pass is logged and tried again sooner. Owned by the store's task group."""
    loop = HousekeepingLoop(interval)
    runtime = core.runtime
    wait = loop.next_wait(core.draw())
    while True:
        await runtime.sleep(wait)
        try:
            report = await prune(core)
        except AlkstoreError as exc:
            wait = loop.failed()
            first = loop.first_failure
            log.warning("housekeeping pass failed (%s); trying again in %.1f s",
                        exc if not first else type(exc).__name__, wait,
                        exc_info=first)  # fmt: skip
            continue
        if any((report.history, report.dead, report.events, report.locks)):
            log.debug("housekeeping removed %s", report)
        wait = loop.next_wait(core.draw())
