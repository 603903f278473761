"""What each page shows: its query parameters, checked, and the read models
it reads, as a template context. The pages (``pages.py``) render a view
whole; the live endpoint (``live.py``) renders its fragments again.

Every listing is a keyset page (``after`` / ``before`` an id or offset),
never an OFFSET; no parameter reaches the database except as a name or a
number through the store's read models.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from .. import readouts
from ..api.queue import Queue
from ..api.store import Store
from ..protocol.plans.inspection import JOB_STATES
from ..protocol.plans.workflows import WorkflowStatus, WorkflowSummary
from ..protocol.values.errors import InvalidArgument, InvalidName, ReservedName
from ..protocol.values.names import (
    MAX_NAME_LENGTH,
    cancel_channel,
    check_identifier,
    done_channel,
    outbox_of,
    queue_channel,
    stream_channel,
)
from ..protocol.values.timeconv import to_datetime
from ..protocol.values.types import JobInfo, QueueSummary, StreamEvent
from ..readouts import related as _related
from . import format as fmt
from . import graph

PAGE_SIZES: Final = (25, 50, 100, 200, 500)
DEFAULT_PAGE: Final = 50
# The throughput charts: the last 30 minutes, by minute.
WINDOW_S: Final = 1800.0
BUCKET_S: Final = 60.0
# The windows a queue's chart offers: name -> (window, bucket) in seconds.
# Each is 30 to 48 bars, so each costs the same read.
CHART_WINDOWS: Final = {
    "30m": (WINDOW_S, BUCKET_S), "6h": (21_600.0, 600.0), "24h": (86_400.0, 1_800.0),
    "7d": (604_800.0, 21_600.0),
}  # fmt: skip
# Wake channels one live request listens on, at most (the rest refresh on
# the fallback interval).
MAX_CHANNELS: Final = 64
# Schedules shown on the overview (the next to fire first).
SOON_SCHEDULES: Final = 10


class BadRequest(Exception):
    """A query or form parameter that is not valid: 400, with ``message``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def not_found(message: str) -> BadRequest:
    return BadRequest(message, 404)


Params = Mapping[str, str]


def name_param(params: Params, key: str = "name") -> str:
    value = params.get(key)
    if value is None or value == "":
        raise BadRequest(f"missing parameter {key!r}")
    if len(value) > MAX_NAME_LENGTH:
        raise BadRequest(f"{key} is longer than {MAX_NAME_LENGTH} characters")
    try:
        return check_identifier(value, key)
    except InvalidName as exc:
        raise BadRequest(str(exc)) from None


def int_param(params: Params, key: str, *, lo: int = 0) -> int | None:
    value = params.get(key)
    if value is None or value == "":
        return None
    if not value.isdigit() or len(value) > 19:
        raise BadRequest(f"{key} must be a whole number")
    number = int(value)
    if number < lo or number > 2**63 - 1:
        raise BadRequest(f"{key} is out of range")
    return number


def limit_param(params: Params) -> int:
    limit = int_param(params, "limit")
    if limit is None:
        return DEFAULT_PAGE
    if limit not in PAGE_SIZES:
        raise BadRequest(f"limit must be one of {', '.join(map(str, PAGE_SIZES))}")
    return limit


def state_param(params: Params) -> str | None:
    state = params.get("state") or None
    if state is not None and state not in JOB_STATES:
        raise BadRequest(f"state must be one of {', '.join(JOB_STATES)}")
    return state


def window_param(params: Params) -> str:
    window = params.get("window") or "30m"
    if window not in CHART_WINDOWS:
        raise BadRequest(f"window must be one of {', '.join(CHART_WINDOWS)}")
    return window


def queue_handle(store: Store, name: str) -> Queue:
    """The handle of queue ``name``: an outbox's own queue by its internal
    name too (``__alkstore_outbox:NAME``)."""
    outbox = outbox_of(name)
    try:
        if outbox is not None:
            return store.outbox(outbox).queue
        return store.queue(name)
    except (InvalidName, ReservedName) as exc:
        raise BadRequest(str(exc)) from None


@dataclass(frozen=True, slots=True)
class QueueRow:
    summary: QueueSummary
    chart: fmt.Chart
    keeps_history: bool


@dataclass
class Built:
    """A view's template context and the wake channels that mean its
    numbers may have changed."""

    context: dict[str, Any]
    channels: list[str] = field(default_factory=list)


def now(store: Store) -> datetime:
    """Now, on the store's clock (the one its operations use)."""
    return to_datetime(store._core.now_us())


async def _queue_row(
    store: Store, summary: QueueSummary, window: str = "30m", *, width: int = 240
) -> QueueRow:
    handle = queue_handle(store, summary.name)
    span, bucket = CHART_WINDOWS[window]
    t = await handle.throughput(window=span, bucket=bucket)
    keeps = summary.history_retention is not None or summary.history > 0
    return QueueRow(summary, fmt.chart(t, width=width), keeps)


async def overview(store: Store, params: Params) -> Built:
    at = now(store)
    queues = [await _queue_row(store, q) for q in await store.list_queues()]
    streams = await store.list_streams()
    schedules = sorted(await store.list_schedules(), key=lambda s: (s.paused, s.next_fire_at))
    locks = [lock for lock in await store.list_locks() if lock.held]
    channels = [ch for q in queues for ch in (queue_channel(q.summary.name),
                                             cancel_channel(q.summary.name))]  # fmt: skip
    channels += [stream_channel(s.name) for s in streams]
    return Built(
        {
            "now": at,
            "queues": queues,
            "streams": streams,
            "schedules": schedules[:SOON_SCHEDULES],
            "schedule_count": len(schedules),
            "locks": locks,
        },
        channels[:MAX_CHANNELS],
    )


async def _jobs_page(
    handle: Queue, state: str | None, after: int | None, limit: int
) -> tuple[list[JobInfo], int | None]:
    """A page of jobs and the ``after`` of the next page (None: the last)."""
    try:
        jobs = await handle.list_jobs(state=state, limit=limit + 1, after=after)
    except InvalidArgument as exc:
        raise BadRequest(str(exc)) from None
    if len(jobs) > limit:
        return jobs[:limit], jobs[limit - 1].id
    return jobs, None


async def known_queue(store: Store, name: str) -> QueueSummary:
    """Queue ``name``'s summary; 404 for a name no queue has (the command
    line's rule: ``readouts.find_queue``), so a typo shows no empty queue
    to pause into being."""
    try:
        return await readouts.find_queue(store, name, queue_handle(store, name))
    except readouts.NoSuchQueue as exc:
        raise BadRequest(str(exc), 404) from None


async def queue(store: Store, params: Params) -> Built:
    name = name_param(params)
    handle = queue_handle(store, name)
    state, after, limit = state_param(params), int_param(params, "after"), limit_param(params)
    window = window_param(params)
    match = (params.get("match") or "").strip()[:200] or None
    summary = await known_queue(store, name)
    row = await _queue_row(store, summary, window, width=480)
    scanned = None
    if match is None:
        jobs, next_after = await _jobs_page(handle, state, after, limit)
    else:
        found = await readouts.find_jobs(handle, match, state=state, after=after, limit=limit)
        jobs, next_after, scanned = found.jobs, found.next_after, found.scanned
    return Built(
        {
            "now": now(store),
            "name": name,
            "row": row,
            "summary": summary,
            "window": window,
            "windows": list(CHART_WINDOWS),
            "match": match,
            "scanned": scanned,
            "state": state,
            "after": after,
            "limit": limit,
            "jobs": jobs,
            "next_after": next_after,
            "states": JOB_STATES,
            "page_sizes": PAGE_SIZES,
        },
        [queue_channel(name), cancel_channel(name)],
    )


async def dead(store: Store, params: Params) -> Built:
    name = name_param(params)
    handle = queue_handle(store, name)
    after, limit = int_param(params, "after"), limit_param(params)
    summary = await known_queue(store, name)
    letters, next_after = await _jobs_page(handle, "dead", after, limit)
    return Built(
        {
            "now": now(store),
            "name": name,
            "summary": summary,
            "after": after,
            "limit": limit,
            "jobs": letters,
            "next_after": next_after,
            "page_sizes": PAGE_SIZES,
        },
        [queue_channel(name)],
    )


def id_param(params: Params) -> int:
    found = int_param(params, "id", lo=1)
    if found is None:
        raise BadRequest("missing parameter 'id'")
    return found


def _channels(queues: Iterable[str]) -> list[str]:
    """What wakes a page about these queues' jobs: enqueues and releases,
    cancels, and the finish of a kept job (every workflow step is kept)."""
    found = [ch for q in dict.fromkeys(queues)
             for ch in (queue_channel(q), cancel_channel(q), done_channel(q))]  # fmt: skip
    return found[:MAX_CHANNELS]


async def job(store: Store, params: Params) -> Built:
    job_id = id_param(params)
    info = await store.get_job(job_id)
    if info is None:
        raise not_found(
            f"no job {job_id}: never existed, or acked or cancelled in a queue that keeps no "
            "history"
        )
    dependencies = await _related(store, info.dependencies)
    dependents = await _related(store, info.dependents)
    queues = [info.queue] + [r.queue for r in dependencies + dependents if r.queue]
    return Built(
        {
            "now": now(store),
            "job": info,
            "timeline": timeline(info),
            "dependencies": dependencies,
            "dependents": dependents,
        },
        _channels(queues),
    )


def timeline(info: JobInfo) -> list[tuple[datetime, str]]:
    """What is known of a job's life, in order: the instants its record keeps."""
    events: list[tuple[datetime, str]] = [(info.created_at, "enqueued")]
    if info.run_at != info.created_at:
        events.append((info.run_at, "due" if info.state != "dead" else "last due"))
    if info.state == "processing" and info.claim_expires_at is not None:
        events.append((info.claim_expires_at, f"claim by {info.claimed_by} lapses"))
    if info.expires_at is not None:
        events.append((info.expires_at, "deadline for its first claim"))
    for a in info.attempt_history:
        if a.started_at is not None:
            events.append((a.started_at, f"attempt {a.attempt} started on {a.worker}"))
        if a.outcome == "retried":
            events.append((a.finished_at, f"attempt {a.attempt} failed, retried"))
        elif a.finished_at != info.died_at:  # a death since requeued
            events.append((a.finished_at, f"dead ({a.outcome}), requeued later"))
    if info.died_at is not None:
        events.append((info.died_at, f"dead ({info.dead_reason})"))
    if info.finished_at is not None:
        worker = f" by {info.claimed_by}" if info.claimed_by else ""
        events.append((info.finished_at, f"{info.state}{worker}"))
    return sorted(events, key=lambda e: e[0])


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    summary: WorkflowSummary
    status: WorkflowStatus | None  # None: pruned since it was listed

    @property
    def outcome(self) -> str:
        return "gone" if self.status is None else readouts.outcome(self.status)

    @property
    def counts(self) -> list[tuple[str, int]]:
        return [] if self.status is None else readouts.state_counts(self.status)


async def workflows(store: Store, params: Params) -> Built:
    before, limit = int_param(params, "before", lo=1), limit_param(params)
    runs = await store.list_workflows(before=before, limit=limit + 1)
    next_before = runs[limit - 1].id if len(runs) > limit else None
    rows = [WorkflowRow(w, await readouts.read_status(store, w.id)) for w in runs[:limit]]
    queues = [q for r in rows if r.status is not None for q in r.status.queues]
    return Built(
        {
            "now": now(store),
            "rows": rows,
            "before": before,
            "limit": limit,
            "next_before": next_before,
            "page_sizes": PAGE_SIZES,
        },
        _channels(queues),
    )


async def workflow(store: Store, params: Params) -> Built:
    workflow_id = id_param(params)
    status = await readouts.read_status(store, workflow_id)
    if status is None:
        raise not_found(f"no workflow {workflow_id}: never enqueued, or pruned")
    level = readouts.levels(status.steps)
    return Built(
        {
            "now": now(store),
            "run": status,
            "outcome": readouts.outcome(status),
            "counts": readouts.state_counts(status),
            "steps": readouts.ordered(status),
            "levels": level,
            "graph": graph.layout(status),
            "max_drawn": graph.MAX_DRAWN,
        },
        _channels(status.queues),
    )


async def streams(store: Store, params: Params) -> Built:
    found = await store.list_streams()
    return Built(
        {"now": now(store), "streams": found},
        [stream_channel(s.name) for s in found][:MAX_CHANNELS],
    )


async def stream(store: Store, params: Params) -> Built:
    name = name_param(params)
    try:
        handle = store.stream(name)
    except (InvalidName, ReservedName) as exc:
        raise BadRequest(str(exc)) from None
    before, limit = int_param(params, "before"), limit_param(params)
    info = await handle.info()
    events: list[StreamEvent] = await handle.list_events(before=before, limit=limit + 1)
    next_before = events[limit - 1].offset if len(events) > limit else None
    return Built(
        {
            "now": now(store),
            "name": name,
            "info": info,
            "events": events[:limit],
            "before": before,
            "limit": limit,
            "next_before": next_before,
            "page_sizes": PAGE_SIZES,
        },
        [stream_channel(name)],
    )


async def schedules(store: Store, params: Params) -> Built:
    found = await store.list_schedules()
    return Built({"now": now(store), "schedules": found})


async def locks(store: Store, params: Params) -> Built:
    found = await store.list_locks()
    return Built({"now": now(store), "locks": found})


@dataclass(frozen=True, slots=True)
class View:
    """A page: its template, the fragments the live endpoint re-renders
    (``fragments/NAME.html``, each inside an element ``data-live="NAME"``),
    and how its context is built."""

    template: str
    fragments: tuple[str, ...]
    build: Callable[[Store, Params], Awaitable[Built]]
    # The query parameters that say what the page shows (kept in its live URL).
    keys: tuple[str, ...] = ()


VIEWS: Final[dict[str, View]] = {
    "overview": View("overview.html", ("clock", "queues", "streams", "schedules", "locks"),
                     overview),
    "queue": View("queue.html", ("clock", "queue_summary", "jobs"), queue,
                  ("name", "state", "after", "limit", "window", "match")),
    "dead": View("dead.html", ("clock", "queue_summary"), dead, ("name", "after", "limit")),
    "job": View("job.html", ("clock", "job"), job, ("id",)),
    "workflows": View("workflows.html", ("clock", "workflows"), workflows, ("before", "limit")),
    "workflow": View("workflow.html", ("clock", "workflow"), workflow, ("id",)),
    "streams": View("streams.html", ("clock", "streams"), streams),
    "stream": View("stream.html", ("clock", "stream_summary", "events"), stream,
                   ("name", "before", "limit")),
    "schedules": View("schedules.html", ("clock", "schedules"), schedules),
    "locks": View("locks.html", ("clock", "locks"), locks),
}  # fmt: skip


PATHS: Final = {
    "overview": "/", "queue": "/queue", "dead": "/queue/dead", "streams": "/streams",
    "stream": "/stream", "schedules": "/schedules", "locks": "/locks", "workflows": "/workflows",
}  # fmt: skip


def page_path(name: str, params: Params) -> str:
    """The path (and query) of view ``name`` showing ``params``, inside the dashboard."""
    if name in ("job", "workflow"):
        return f"/{name}/{params.get('id', '')}"
    view = VIEWS[name]
    return fmt.href("", PATHS[name], **{k: params.get(k) for k in view.keys})
