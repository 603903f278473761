"""Workflows: ``workflows`` lists the runs, newest first; ``workflow ID``
shows one run's steps, their states, results and errors, as a graph in text.

Their ``--json`` documents are built here, not in ``alkstore/shapes.py``:
only the command line prints them (docs/cli.md has them).
"""

from __future__ import annotations

from collections.abc import Mapping

import click

from .. import shapes
from ..api.store import Store
from ..protocol.plans.workflows import StepStatus, WorkflowStatus, WorkflowSummary
from ..protocol.values.errors import InvalidArgument
from . import render
from .target import Target, not_found, run, target_options

# The order states are counted in, from not started to failed.
STATES = ("waiting", "pending", "processing", "acked", "gone", "cancelled", "dead")


async def read_status(store: Store, workflow_id: int) -> WorkflowStatus | None:
    """Run ``workflow_id`` as it stands now; None when there is none (never
    was, or it was pruned, also while it was being read)."""
    try:
        found = await store.workflow_run(workflow_id)
        return await found.status()
    except InvalidArgument:
        return None


def outcome(status: WorkflowStatus) -> str:
    """``running`` while a step may still change, then ``succeeded`` (every
    step acked) or ``failed`` (some step dead or cancelled)."""
    if not status.finished:
        return "running"
    return "succeeded" if status.succeeded else "failed"


def state_counts(status: WorkflowStatus) -> dict[str, int]:
    """How many steps are in each state, in ``STATES`` order (none: left out)."""
    groups = status.by_state()
    known = {s: len(groups[s]) for s in STATES if s in groups}
    return known | {s: len(names) for s, names in groups.items() if s not in known}


def counts_text(status: WorkflowStatus) -> str:
    """``2 acked, 1 waiting``."""
    return ", ".join(f"{n} {state}" for state, n in state_counts(status).items())


def levels(steps: Mapping[str, StepStatus]) -> dict[str, int]:
    """Each step's level: 0 for a step that waits for nothing, else one
    more than the highest level among the steps it waits for."""
    waits = {name: [d for d in s.after if d in steps] for name, s in steps.items()}
    released: dict[str, list[str]] = {name: [] for name in steps}
    for name, deps in waits.items():
        for dep in deps:
            released[dep].append(name)
    left = {name: len(deps) for name, deps in waits.items()}
    level = {name: 0 for name, n in left.items() if n == 0}
    ready = list(level)
    while ready:
        name = ready.pop()
        for later in released[name]:
            level[later] = max(level.get(later, 0), level[name] + 1)
            left[later] -= 1
            if left[later] == 0:
                ready.append(later)
    return {name: level.get(name, 0) for name in steps}


def ordered(status: WorkflowStatus) -> list[StepStatus]:
    """The steps level by level (so each comes after every step it waits
    for), by job id within a level. Job ids alone are no such order: a
    workflow's waiting steps get theirs in groups, after its first steps."""
    level = levels(status.steps)
    return sorted(status.steps.values(), key=lambda s: (level[s.name], s.job_id))


def step_doc(s: StepStatus) -> shapes.Doc:
    return {
        "name": s.name,
        "job_id": s.job_id,
        "queue": s.queue,
        "state": s.state,
        "after": list(s.after),
        "result": s.result,
        "error": s.error,
        "reason": s.reason,
    }


def workflow_doc(status: WorkflowStatus) -> shapes.Doc:
    return {
        "id": status.id,
        "name": status.name,
        "created_at": status.created_at,
        "status": outcome(status),
        "finished": status.finished,
        "succeeded": status.succeeded,
        "states": state_counts(status),
        "steps": [step_doc(s) for s in ordered(status)],
    }


def summary_doc(w: WorkflowSummary, status: WorkflowStatus | None) -> shapes.Doc:
    return {
        "id": w.id,
        "name": w.name,
        "created_at": w.created_at,
        "steps": w.steps,
        "status": None if status is None else outcome(status),
        "states": None if status is None else state_counts(status),
    }


@click.command("workflows")
@target_options
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Runs per page."
)
@click.option(
    "--before",
    type=click.IntRange(1),
    default=None,
    help="Start below this workflow id (paging: the last id shown).",
)
def workflows_command(target: Target, limit: int, before: int | None) -> None:
    """List workflow runs, newest first, a page at a time (--before the last
    id shown for the next page): name, when, steps, and how far they got."""

    async def work(store: Store) -> list[tuple[WorkflowSummary, WorkflowStatus | None]]:
        runs = await store.list_workflows(before=before, limit=limit)
        return [(w, await read_status(store, w.id)) for w in runs]

    found = run(target, work)
    next_before = found[-1][0].id if len(found) == limit else None
    if target.json:
        doc = {"workflows": [summary_doc(w, s) for w, s in found], "next_before": next_before}
        click.echo(shapes.dumps(doc))
        return
    out = render.console()
    rows = [
        (
            w.id,
            w.name,
            render.when(w.created_at),
            w.steps,
            "gone" if s is None else outcome(s),
            None if s is None else counts_text(s),
        )
        for w, s in found
    ]
    columns = ("id", "workflow", "created", "steps", "status", "steps by state")
    out.print(render.table("workflows", columns, rows, out=out, right=("id", "steps")))
    if not found and out.is_terminal:
        out.print("no workflows" + (f" below id {before}" if before is not None else " yet"))
    if next_before is not None and out.is_terminal:
        out.print(f"more: --before {next_before}")


@click.command("workflow")
@target_options
@click.argument("workflow_id", metavar="ID", type=click.IntRange(1))
def workflow_command(target: Target, workflow_id: int) -> None:
    """One workflow run: each step's state, job, queue, the steps it waits
    for (<- a, b), and its result or error, level by level."""

    async def work(store: Store) -> WorkflowStatus:
        status = await read_status(store, workflow_id)
        if status is None:
            not_found(f"no workflow {workflow_id} (never enqueued, or pruned)")
        return status

    status = run(target, work)
    if target.json:
        click.echo(shapes.dumps({"workflow": workflow_doc(status)}))
        return
    out = render.console()
    level = levels(status.steps)
    rows = [
        (
            s.name,
            s.state,
            s.job_id,
            s.queue,
            level[s.name],
            "<- " + ", ".join(s.after) if s.after else "",
            outcome_text(s),
        )
        for s in ordered(status)
    ]
    out.print(
        f"workflow {status.id} {status.name!r}, created {render.when(status.created_at)}: "
        f"{outcome(status)} ({counts_text(status)})"
    )
    columns = ("step", "state", "job", "queue", "level", "after", "result / error")
    out.print(render.table(None, columns, rows, out=out, right=("job", "level")))


def outcome_text(s: StepStatus) -> str | None:
    """An acked step's result, or why a step failed, on one line."""
    if s.state == "acked":
        return None if s.result is None else render.brief_json(s.result, 80)
    if s.error is None:
        return s.reason
    line = s.error.splitlines()[0] if s.error else s.error
    text = f"{s.reason}: {line}" if s.reason else line
    return text if len(text) <= 80 else text[:79] + "…"
