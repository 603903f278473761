"""The JSON shapes of the read models: one function per value type.

These field names are a documented, stable interface (docs/cli.md): scripts
parse ``alkstore ... --json`` and the dashboard serves the same shapes
(``GET /api/overview``). Instants are RFC 3339 strings in UTC (``...Z``),
durations and ages are seconds (float), absent values are ``null``.

A module of neither the command line (``alkstore/cli``) nor the dashboard
(``alkstore/dashboard``): both import it, so the dashboard needs nothing of
the CLI to serve them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import orjson

from .protocol.values.attempts import Attempt
from .protocol.values.types import (
    ConsumerInfo,
    JobInfo,
    LockInfo,
    QueueSummary,
    Rate,
    ScheduleInfo,
    StreamInfo,
)

if TYPE_CHECKING:
    from .protocol.plans.housekeeping import PruneReport

Doc = dict[str, Any]


def dumps(doc: Any) -> str:
    """One JSON document, as ``--json`` prints it."""
    return orjson.dumps(doc, option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS).decode()


def seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def age(at: datetime | None, now: datetime) -> float | None:
    """How long ago ``at`` was, in seconds (never negative)."""
    return None if at is None else max(0.0, (now - at).total_seconds())


def queue_kind(q: QueueSummary) -> tuple[str, str]:
    """("queue", name) or ("outbox", the outbox's own name): an outbox is a
    queue under a reserved name, which operators know by the outbox's."""
    if q.outbox is not None:
        return "outbox", q.outbox
    return "queue", q.name


def limits_doc(q: QueueSummary) -> Doc:
    """A queue's limits (``Queue.set_limits``), by the setter's keywords.
    The one place the CLI reads them: ``queue_doc`` and the ``queues``
    table both go through here."""
    limits = q.limits
    return {
        "concurrency_per_key": limits.concurrency_per_key,
        "rate": rate_doc(limits.rate),
        "rate_per_key": rate_doc(limits.rate_per_key),
    }


def rate_doc(rate: Rate | None) -> Doc | None:
    """A rate as ``{"limit": N, "per_seconds": P}`` (None: no rate)."""
    return None if rate is None else {"limit": rate.limit, "per_seconds": seconds(rate.per)}


def unique_policy_doc(q: QueueSummary) -> Doc:
    """A queue's unique policy (``Queue.set_unique_policy``), by the setter's keywords."""
    return {"processing_blocks": q.unique_processing_blocks}


def queue_doc(q: QueueSummary, now: datetime) -> Doc:
    kind, shown = queue_kind(q)
    return {
        "name": q.name,
        "kind": kind,
        "display_name": shown,
        "ready": q.ready,
        "scheduled": q.scheduled,
        "waiting": q.waiting,
        "processing": q.processing,
        "dead": q.dead,
        "history": q.history,
        "oldest_ready_at": q.oldest_ready_at,
        "oldest_ready_age_s": age(q.oldest_ready_at, now),
        "paused": q.paused,
        "history_retention_s": seconds(q.history_retention),
        "dead_retention_s": seconds(q.dead_retention),
        "limits": limits_doc(q),
        "unique_policy": unique_policy_doc(q),
    }


def job_doc(j: JobInfo) -> Doc:
    return {
        "id": j.id,
        "queue": j.queue,
        "state": j.state,
        "payload": j.payload,
        "priority": j.priority,
        "attempts": j.attempts,
        "max_attempts": j.max_attempts,
        "run_at": j.run_at,
        "created_at": j.created_at,
        "expires_at": j.expires_at,
        "claimed_by": j.claimed_by,
        "claim_expires_at": j.claim_expires_at,
        "last_error": j.last_error,
        "dead_reason": j.dead_reason,
        "died_at": j.died_at,
        "finished_at": j.finished_at,
        "unique_key": j.unique_key,
        "concurrency_key": j.concurrency_key,
    }


def attempt_doc(a: Attempt) -> Doc:
    return {
        "attempt": a.attempt,
        "outcome": a.outcome,
        "worker": a.worker,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "duration_s": seconds(a.duration),
        "error": a.error,
        "trace": a.trace,
    }


def consumer_doc(c: ConsumerInfo) -> Doc:
    return {"name": c.name, "offset": c.offset, "lag": c.lag, "protected": c.protected}


def stream_doc(s: StreamInfo) -> Doc:
    return {
        "name": s.name,
        "head_offset": s.head_offset,
        "events": s.events,
        "oldest_offset": s.oldest_offset,
        "oldest_event_at": s.oldest_event_at,
        "max_age_s": seconds(s.max_age),
        "max_events": s.max_events,
        "consumers": [consumer_doc(c) for c in s.consumers],
    }


def lock_doc(lock: LockInfo, now: datetime) -> Doc:
    left = None
    if lock.held and lock.expires_at is not None:
        left = max(0.0, (lock.expires_at - now).total_seconds())
    return {
        "name": lock.name,
        "owner": lock.owner,
        "token": lock.token,
        "held": lock.held,
        "expires_at": lock.expires_at,
        "ttl_left_s": left,
    }


def schedule_doc(s: ScheduleInfo) -> Doc:
    return {
        "name": s.name,
        "queue": s.queue,
        "expression": s.expression,
        "payload": s.payload,
        "priority": s.priority,
        "max_attempts": s.max_attempts,
        "expires_after_s": seconds(s.expires_after),
        "next_fire_at": s.next_fire_at,
        "last_fire_at": s.last_fire_at,
        "paused": s.paused,
        "created_at": s.created_at,
        "tz": s.tz,
        "catch_up": s.catch_up,
        "catch_up_max": s.catch_up_max,
        "catch_up_grace_s": seconds(s.catch_up_grace),
    }


def overview_doc(
    at: datetime,
    queues: list[QueueSummary],
    streams: list[StreamInfo],
    schedules: list[ScheduleInfo],
    locks: list[LockInfo],
) -> Doc:
    """Everything at once, as ``alkstore watch --json`` prints it each
    refresh and the dashboard's ``/api/overview`` answers it; ages and
    time left are as of ``at``."""
    return {
        "at": at,
        "queues": [queue_doc(q, at) for q in queues],
        "streams": [stream_doc(s) for s in streams],
        "schedules": [schedule_doc(s) for s in schedules],
        "locks": [lock_doc(lock, at) for lock in locks],
    }


def prune_doc(report: PruneReport) -> Doc:
    return {
        "history": report.history,
        "dead": report.dead,
        "events": report.events,
        "notifications": report.notifications,
        "locks": report.locks,
        "vacuumed": report.vacuumed,
    }
