"""Queue commands: ``queues``, ``jobs``, ``job``, ``cancel``, ``pause``, ``resume``."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import click
from rich.console import Console

from .. import readouts, shapes
from ..api.store import Store
from ..protocol.values.attempts import Attempt
from ..protocol.values.types import JobInfo, QueueSummary
from ..readouts import Related, related
from . import render
from .target import Target, not_found, run, target_options

JOB_STATES = (
    "ready", "scheduled", "pending", "processing", "waiting", "dead", "acked", "cancelled",
)  # fmt: skip
# The states ``cancel`` takes a job in.
CANCELLABLE = ("pending", "processing", "waiting")
# Of a job's dependencies and dependents, how many its table names.
RELATED_SHOWN = 10


def now() -> datetime:
    return datetime.now(UTC)


async def find_queue(store: Store, name: str) -> QueueSummary:
    """The summary of queue ``name``; exits 1 when no such queue exists
    (``readouts.find_queue``: the dashboard's rule too)."""
    store.queue(name)  # the name rules first: a bad name is a usage error
    try:
        return await readouts.find_queue(store, name)
    except readouts.NoSuchQueue as exc:
        not_found(str(exc))


def limits_text(q: QueueSummary) -> str:
    """A queue's limits for the table (empty: none)."""
    return q.limits.describe()


def unique_text(q: QueueSummary) -> str:
    """A queue's unique policy for the table: whether a processing job
    keeps its unique key (``blocks``, the default) or yields it."""
    return "blocks" if shapes.unique_policy_doc(q)["processing_blocks"] else "yields"


@click.command("queues")
@target_options
def queues_command(target: Target) -> None:
    """Every queue: ready, scheduled, waiting, processing and dead jobs, the
    oldest ready job's age, its limits, its unique policy, and whether it is
    paused."""
    summaries = run(target, lambda store: store.list_queues())
    at = now()
    if target.json:
        click.echo(shapes.dumps({"queues": [shapes.queue_doc(q, at) for q in summaries]}))
        return
    out = render.console()
    rows = []
    for q in summaries:
        kind, shown = shapes.queue_kind(q)
        rows.append(
            (
                shown if kind == "queue" else f"{shown} (outbox)",
                q.ready,
                q.scheduled,
                q.waiting,
                q.processing,
                q.dead,
                q.history,
                render.duration(shapes.age(q.oldest_ready_at, at)),
                limits_text(q),
                unique_text(q),
                "paused" if q.paused else "",
            )
        )
    columns = ("queue", "ready", "scheduled", "waiting", "processing", "dead", "history",
               "oldest", "limits", "unique", "")  # fmt: skip
    numbers = columns[1:8]
    out.print(render.table("queues", columns, rows, out=out, right=numbers))
    if not summaries and out.is_terminal:
        out.print("no queues yet")


@click.command("jobs")
@target_options
@click.argument("queue")
@click.option(
    "--state",
    type=click.Choice(JOB_STATES),
    default=None,
    help="Only jobs in this state (default: live and dead jobs).",
)
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Jobs per page."
)
@click.option(
    "--after", type=click.IntRange(0), default=None, help="Start after this job id (paging)."
)
@click.option(
    "--match",
    default=None,
    metavar="TEXT",
    help="Only jobs whose payload (as JSON), unique key or concurrency key holds TEXT, any "
    f"case (reads at most {readouts.MATCH_SCAN:,} jobs per page).",
)
def jobs_command(
    target: Target,
    queue: str,
    state: str | None,
    limit: int,
    after: int | None,
    match: str | None,
) -> None:
    """List QUEUE's jobs in id order, a page at a time (--after the last id
    shown for the next page)."""

    async def work(store: Store) -> tuple[list[JobInfo], int | None, int | None]:
        await find_queue(store, queue)
        handle = store.queue(queue)
        if match:
            found = await readouts.find_jobs(handle, match, state=state, after=after, limit=limit)
            return found.jobs, found.next_after, found.scanned
        page = await handle.list_jobs(state=state, limit=limit, after=after)
        return page, page[-1].id if len(page) == limit else None, None

    jobs, next_after, scanned = run(target, work)
    if target.json:
        doc: dict[str, object] = {
            "queue": queue,
            "state": state,
            "jobs": [shapes.job_doc(j) for j in jobs],
            "next_after": next_after,
        }
        if match:
            doc["match"], doc["scanned"] = match, scanned
        click.echo(shapes.dumps(doc))
        return
    out = render.console()
    columns = ("id", "state", "attempts", "priority", "run at", "claimed by", "unique key",
               "concurrency key", "payload", "error")  # fmt: skip
    at = now()
    rows = [
        (
            j.id,
            readouts.shown_state(j, at),
            f"{j.attempts}/{j.max_attempts}",
            j.priority,
            render.when(j.run_at),
            j.claimed_by,
            _short(j.unique_key, 30),
            _short(j.concurrency_key, 30),
            render.brief_json(j.payload),
            _short(j.last_error),
        )
        for j in jobs
    ]
    out.print(render.table(f"jobs of {queue!r}", columns, rows, out=out, right=("id", "priority")))
    if next_after is not None:
        # On stderr in a pipe, so the rows stay rows for grep and cut.
        hint = f"more: alkstore jobs {queue} --after {next_after}"
        if match:
            hint += f" --match {shlex.quote(match)} (searched {scanned} jobs)"
        if out.is_terminal:
            out.print(hint)
        else:
            click.echo(hint, err=True)


def related_text(jobs: list[Related]) -> str:
    """``8 (acked), 9 (pending)``, the first ``RELATED_SHOWN`` of them (a
    table's line stays readable; ``--json`` lists them all)."""
    shown = ", ".join(
        str(r.id) if r.state is None else f"{r.id} ({r.state})" for r in jobs[:RELATED_SHOWN]
    )
    more = len(jobs) - RELATED_SHOWN
    return shown if more <= 0 else f"{shown} and {more} more"


@dataclass(frozen=True, slots=True)
class JobDetail:
    info: JobInfo
    dependencies: list[Related]
    dependents: list[Related]

    def doc(self) -> shapes.Doc:
        """``shapes.job_doc`` and what only a lookup of one job fills: its
        result, dependencies, dependents and workflow step."""
        info = self.info
        return shapes.job_doc(info) | {
            "result": info.result,
            "dependencies": [r.doc() for r in self.dependencies],
            "dependents": [r.doc() for r in self.dependents],
            "workflow_id": info.workflow_id,
            "step": info.step,
            "attempt_history": [shapes.attempt_doc(a) for a in info.attempt_history],
        }


@click.command("job")
@target_options
@click.argument("job_id", metavar="ID", type=click.IntRange(1))
@click.option("--traces", is_flag=True,
              help="Every failed attempt's stack trace (default: the newest one's).")
def job_command(target: Target, job_id: int, traces: bool) -> None:
    """Everything about one job: payload, attempts, last error, claim holder
    and deadline, what became of it (while its queue keeps history) and its
    result; the jobs it waits for and those waiting for it, with their
    states; the workflow step it is; each attempt that failed (its worker,
    start, duration and error) and the newest one's stack trace."""

    async def work(store: Store) -> JobDetail:
        info = await store.get_job(job_id)
        if info is None:
            not_found(
                f"no job {job_id} (never existed, or acked/cancelled in a queue that keeps no "
                "history)"
            )
        deps = await related(store, info.dependencies)
        return JobDetail(info, deps, await related(store, info.dependents))

    detail = run(target, work)
    info = detail.info
    if target.json:
        click.echo(shapes.dumps({"job": detail.doc()}))
        return
    out = render.console()
    at = now()
    fields: list[tuple[str, object]] = [
        ("id", info.id),
        ("queue", info.queue),
        ("state", info.state),
        ("priority", info.priority),
        ("attempts", f"{info.attempts} of {info.max_attempts}"),
        ("created", render.when(info.created_at)),
        ("run at", render.when(info.run_at)),
        ("expires", render.when(info.expires_at)),
    ]
    if info.state == "processing":
        fields.append(("claimed by", info.claimed_by))
        left = None if info.claim_expires_at is None else (info.claim_expires_at - at)
        lapse = render.when(info.claim_expires_at)
        if left is not None:
            lapse += f" (in {render.duration(max(0.0, left.total_seconds()))})"
        fields.append(("claim lapses", lapse))
    if info.state == "dead":
        fields.append(("died", f"{render.when(info.died_at)} ({info.dead_reason})"))
    if info.finished_at is not None:
        fields.append(("finished", f"{render.when(info.finished_at)} ({info.state})"))
        fields.append(("worker", info.claimed_by))
    # A dead letter keeps its concurrency key, not its unique key (None).
    fields.append(("unique key", info.unique_key))
    fields.append(("concurrency key", info.concurrency_key))
    fields.append(("last error", info.last_error))
    if info.result is not None:
        fields.append(("result", render.brief_json(info.result, 200)))
    if info.dependencies:
        fields.append(("waits for", related_text(detail.dependencies)))
    if info.dependents:
        fields.append(("waited on by", related_text(detail.dependents)))
    if info.workflow_id is not None:
        fields.append(("workflow", f"{info.workflow_id}, step {info.step!r}"))
    out.print(render.table(None, ("field", "value"), fields, out=out))
    out.print(shapes.dumps(info.payload) if not out.is_terminal else _pretty(info.payload))
    if info.attempt_history:
        print_attempts(out, info.attempt_history, every_trace=traces)


def print_attempts(out: Console, history: Sequence[Attempt], *, every_trace: bool) -> None:
    """The attempts that failed (and the deaths), oldest first, then the
    stack traces: the newest one's, or ``every_trace``."""
    rows = [
        (a.attempt, a.outcome, a.worker, render.when(a.started_at),
         "-" if a.duration is None else render.duration(a.duration.total_seconds()),
         render.when(a.finished_at), render.one_line(a.error, 100))
        for a in history
    ]  # fmt: skip
    columns = ("#", "outcome", "worker", "started", "took", "ended", "error")
    out.print(render.table("attempts", columns, rows, out=out, right=("#", "took")))
    traced = [a for a in history if a.trace is not None]
    for a in traced if every_trace else traced[-1:]:
        out.print(f"trace of attempt {a.attempt} ({render.when(a.finished_at)}):",
                  markup=False, highlight=False)  # fmt: skip
        out.print((a.trace or "").rstrip(), markup=False, highlight=False, soft_wrap=True)


@click.command("cancel")
@target_options
@click.argument("job_id", metavar="ID", type=click.IntRange(1))
def cancel_command(target: Target, job_id: int) -> None:
    """Cancel a pending, processing or waiting job (a processing job's
    worker, in any process, is woken and cancels its handler); the jobs
    waiting for it are cancelled with it."""

    async def work(store: Store) -> JobInfo:
        info = await store.get_job(job_id)
        if info is None:
            not_found(f"no job {job_id}")
        if info.state not in CANCELLABLE:
            not_found(
                f"job {job_id} is {info.state}, not pending, processing or waiting: "
                "nothing to cancel"
            )
        if not await store.queue(info.queue).cancel(job_id):
            not_found(f"job {job_id} finished before it could be cancelled")
        return info

    info = run(target, work, read_only=False)
    if target.json:
        click.echo(shapes.dumps({"job": job_id, "queue": info.queue, "cancelled": True}))
    else:
        click.echo(f"cancelled job {job_id} of {info.queue!r}")


def _pause_command(pause: bool) -> click.Command:
    verb = "pause" if pause else "resume"

    @click.command(verb)
    @target_options
    @click.argument("queue")
    @click.option(
        "--force",
        is_flag=True,
        help="Act on a queue alkstore has not seen yet (no jobs, never configured).",
    )
    def command(target: Target, queue: str, force: bool) -> None:
        async def work(store: Store) -> None:
            if not force:
                await find_queue(store, queue)
            handle = store.queue(queue)
            await (handle.pause() if pause else handle.resume())

        run(target, work, read_only=False)
        if target.json:
            click.echo(shapes.dumps({"queue": queue, "paused": pause}))
        else:
            click.echo(f"{'paused' if pause else 'resumed'} {queue!r}")

    command.help = (
        "Stop QUEUE's claims in every process (enqueues still land)."
        if pause
        else "Let QUEUE's jobs be claimed again; its workers wake at once."
    )
    return command


pause_command = _pause_command(True)
resume_command = _pause_command(False)


def _short(text: str | None, limit: int = 50) -> str | None:
    if text is None:
        return None
    line = text.splitlines()[0] if text else text
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _pretty(payload: object) -> str:
    import orjson

    return orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()
