"""Workflows: ``workflows`` lists the runs, newest first; ``workflow ID``
shows one run's steps, their states, results and errors, as a graph in text.

Their ``--json`` documents are built here, not in ``alkstore/shapes.py``:
only the command line prints them (docs/cli.md has them).
"""

from __future__ import annotations

import click

from .. import shapes
from ..api.store import Store
from ..protocol.plans.workflows import StepStatus, WorkflowStatus, WorkflowSummary
from ..readouts import levels, ordered, outcome, read_status, state_counts
from . import render
from .target import Target, not_found, run, target_options


def counts_text(status: WorkflowStatus) -> str:
    """``2 acked, 1 waiting``."""
    return ", ".join(f"{n} {state}" for state, n in state_counts(status))


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
        "states": dict(state_counts(status)),
        "steps": [step_doc(s) for s in ordered(status)],
    }


def summary_doc(w: WorkflowSummary, status: WorkflowStatus | None) -> shapes.Doc:
    return {
        "id": w.id,
        "name": w.name,
        "created_at": w.created_at,
        "steps": w.steps,
        "status": None if status is None else outcome(status),
        "states": None if status is None else dict(state_counts(status)),
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
