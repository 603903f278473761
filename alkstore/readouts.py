"""What the command line and the dashboard derive alike from the read
models: which queues exist, a job's related jobs where they are now, and a
workflow run's status, outcome, state counts and levels.

A module of neither ``alkstore/cli`` nor ``alkstore/dashboard`` (as
``shapes.py`` is): both import it, so each rule of how a run is shown has
one home.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from .api.queue import Queue
from .api.store import Store
from .protocol.plans.workflows import StepStatus, WorkflowStatus
from .protocol.values import codec
from .protocol.values.errors import InvalidArgument
from .protocol.values.types import JobInfo, QueueLimits, QueueSummary

# A job's dependencies and dependents whose states are looked up, at most
# (one read each): a fan-in of thousands shows the first ones' states.
RELATED_LOOKUPS: Final = 50
# The order states are counted in, from not started to failed.
STATES: Final = ("waiting", "pending", "processing", "acked", "gone", "cancelled", "dead")


def shown_state(job: JobInfo, now: datetime) -> str:
    """A job's state as a list shows it: ``scheduled`` for a pending job not
    due yet (what ``--state scheduled`` and the Scheduled tab select), the
    contract's state otherwise."""
    if job.state == "pending" and job.run_at > now:
        return "scheduled"
    return job.state


# Jobs one search reads at most before it answers with what it found: a
# search reads the queue's pages in id order (no index holds a payload's
# text), so its cost is bounded, and the answer says where to go on from.
MATCH_SCAN: Final = 10_000
_MATCH_PAGE: Final = 500


@dataclass(frozen=True, slots=True)
class Matches:
    """Jobs whose payload (as JSON text) or unique or concurrency key holds
    the text searched for, case-insensitively; ``next_after``: where the
    next page (or the rest of the search) starts, None when the queue's
    pages were all read."""

    jobs: list[JobInfo]
    next_after: int | None
    scanned: int


def matches(job: JobInfo, text: str) -> bool:
    """Whether ``job``'s payload (its JSON text), unique key or concurrency
    key holds ``text``, case-insensitively."""
    needle = text.casefold()
    return any(
        needle in field.casefold()
        for field in (codec.encode(job.payload), job.unique_key or "", job.concurrency_key or "")
    )


async def find_jobs(
    queue: Queue, text: str, *, state: str | None, after: int | None, limit: int,
    scan: int = MATCH_SCAN,
) -> Matches:
    """Up to ``limit`` of ``queue``'s jobs in ``state`` after id ``after``
    that match ``text`` (``matches``), in id order, reading at most ``scan``
    jobs (a page of ``list_jobs`` at a time)."""
    found: list[JobInfo] = []
    scanned, cursor = 0, after
    while scanned < scan:
        size = min(_MATCH_PAGE, scan - scanned)
        page = await queue.list_jobs(state=state, limit=size, after=cursor)
        for job in page:
            scanned += 1
            cursor = job.id
            if matches(job, text):
                found.append(job)
                if len(found) == limit:
                    return Matches(found, job.id, scanned)
        if len(page) < size:
            return Matches(found, None, scanned)  # read to the end
    return Matches(found, cursor, scanned)


class NoSuchQueue(Exception):
    """A queue name that no queue has, with the nearest known name when one
    is close (a typo must not read as an empty queue, nor be paused into
    being)."""

    def __init__(self, name: str, near: str | None) -> None:
        hint = f" (did you mean {near!r}?)" if near is not None else ""
        super().__init__(f"no queue named {name!r}{hint}")
        self.name = name
        self.near = near


def _listed(summary: QueueSummary) -> bool:
    """Whether a summary shows what makes ``list_queues`` list its queue:
    jobs of any kind or a setting off its default (a queue whose settings
    row holds only defaults is listed too: the full lookup finds it)."""
    counts = (summary.ready, summary.scheduled, summary.processing, summary.dead,
              summary.history, summary.waiting)  # fmt: skip
    settings = (
        summary.paused or summary.history_retention is not None
        or summary.dead_retention is not None or summary.limits != QueueLimits()
        or not summary.unique_processing_blocks
    )  # fmt: skip
    return any(counts) or settings


async def find_queue(store: Store, name: str, handle: Queue | None = None) -> QueueSummary:
    """The summary of queue ``name``. A queue exists once ``list_queues``
    lists it (live jobs, dead letters, history or settings) or a schedule
    feeds it (zeros, until it fires); otherwise ``NoSuchQueue``. The
    command line and the dashboard both ask this, so a name one refuses the
    other does not show. Given the queue's ``handle``, a summary that shows
    jobs or settings answers in one read (a page refreshing live does not
    summarize every queue)."""
    if handle is not None:
        summary = await handle.summary()
        if _listed(summary):
            return summary
    listed = await store.list_queues()
    for summary in listed:
        if summary.name == name:
            return summary
    fed = {s.queue for s in await store.list_schedules()}
    if name in fed:
        return await store.queue(name).summary()
    known = sorted({s.name for s in listed} | fed)
    near = difflib.get_close_matches(name, known, n=1)
    raise NoSuchQueue(name, near[0] if near else None)


@dataclass(frozen=True, slots=True)
class Related:
    """A dependency or dependent of a job, with where it is now: its queue
    and state (``gone`` once its record was pruned; both None when it was
    not looked up, past ``RELATED_LOOKUPS``)."""

    id: int
    queue: str | None
    state: str | None

    def doc(self) -> dict[str, object]:
        return {"id": self.id, "queue": self.queue, "state": self.state}


async def related(store: Store, ids: tuple[int, ...]) -> list[Related]:
    """Jobs ``ids`` where they are now, the first ``RELATED_LOOKUPS`` looked up."""
    found = []
    for n, job_id in enumerate(ids):
        if n >= RELATED_LOOKUPS:
            found.append(Related(job_id, None, None))
            continue
        info = await store.get_job(job_id)
        found.append(Related(job_id, None, "gone") if info is None
                     else Related(job_id, info.queue, info.state))  # fmt: skip
    return found


async def read_status(store: Store, workflow_id: int) -> WorkflowStatus | None:
    """Run ``workflow_id`` as it stands now; None when there is none (never
    was, or it was pruned, also while it was being read)."""
    try:
        run = await store.workflow_run(workflow_id)
        return await run.status()
    except InvalidArgument:
        return None


def outcome(status: WorkflowStatus) -> str:
    """``running`` while a step may still change, then ``succeeded`` (every
    step acked) or ``failed`` (some step dead or cancelled)."""
    if not status.finished:
        return "running"
    return "succeeded" if status.succeeded else "failed"


def state_counts(status: WorkflowStatus) -> list[tuple[str, int]]:
    """How many steps are in each state, in ``STATES`` order (none: left out)."""
    groups = status.by_state()
    known = [(s, len(groups[s])) for s in STATES if s in groups]
    return known + [(s, len(names)) for s, names in groups.items() if s not in STATES]


def levels(steps: Mapping[str, StepStatus]) -> dict[str, int]:
    """Each step's level: 0 for a step that waits for nothing, else one
    more than the highest level among the steps it waits for."""
    level: dict[str, int] = {}
    # Steps come in the order they were defined, each after the steps it
    # waits for (the graph check's rule), so one pass settles every level.
    for name, s in steps.items():
        level[name] = 1 + max((level[d] for d in s.after if d in level), default=-1)
    return level


def ordered(status: WorkflowStatus) -> list[StepStatus]:
    """The steps level by level, each after every step it waits for; in
    the order they were defined within a level."""
    level = levels(status.steps)
    position = {name: i for i, name in enumerate(status.steps)}
    return sorted(status.steps.values(), key=lambda s: (level[s.name], position[s.name]))
