"""Dead letters: ``dead QUEUE`` lists them, ``dead requeue`` puts them back,
``dead purge`` drops them (by ids, by age, or all)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from .. import shapes
from ..api.store import Store
from ..protocol.values.errors import InvalidArgument
from ..protocol.values.schedules import parse_duration
from ..protocol.values.types import JobInfo
from . import render
from .queues import find_queue
from .target import UNUSABLE, Target, fail, run, target_options

# Dead letters read per round trip while selecting by age or all.
PAGE = 500


class Age(click.ParamType):  # type: ignore[type-arg]
    """A duration such as ``90s``, ``15m``, ``1h30m``, ``7d``."""

    name = "AGE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, timedelta):
            return value
        try:
            return timedelta(microseconds=parse_duration(value))
        except InvalidArgument as exc:
            self.fail(str(exc), param, ctx)


class DeadGroup(click.Group):
    """``alkstore dead QUEUE`` is ``alkstore dead list QUEUE``: a first word
    that is not a subcommand is the queue to list."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["list", *args]
        return super().resolve_command(ctx, args)


@click.group("dead", cls=DeadGroup, invoke_without_command=False)
def dead_group() -> None:
    """Dead letters: `dead QUEUE` lists them; `dead requeue` and `dead purge`
    act on them."""


@dead_group.command("list")
@target_options
@click.argument("queue")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--after", type=click.IntRange(0), default=None, help="Start after this job id.")
def list_command(target: Target, queue: str, limit: int, after: int | None) -> None:
    """List QUEUE's dead letters in id order: attempts, reason, when, last error."""

    async def work(store: Store) -> list[JobInfo]:
        await find_queue(store, queue)
        return await store.queue(queue).list_jobs(state="dead", limit=limit, after=after)

    letters = run(target, work)
    next_after = letters[-1].id if len(letters) == limit else None
    if target.json:
        doc = {
            "queue": queue,
            "dead": [shapes.job_doc(j) for j in letters],
            "next_after": next_after,
        }
        click.echo(shapes.dumps(doc))
        return
    out = render.console()
    rows = [
        (
            j.id,
            f"{j.attempts}/{j.max_attempts}",
            j.dead_reason,
            render.when(j.died_at),
            render.brief_json(j.payload, 40),
            j.last_error,
        )
        for j in letters
    ]
    columns = ("id", "attempts", "reason", "died at", "payload", "last error")
    out.print(render.table(f"dead letters of {queue!r}", columns, rows, out=out, right=("id",)))
    if next_after is not None and out.is_terminal:
        out.print(f"more: --after {next_after}")


def _selection(func: Any) -> Any:
    for decorator in reversed(
        (
            click.argument("queue"),
            click.option(
                "--id",
                "ids",
                type=click.IntRange(1),
                multiple=True,
                help="A dead letter's id (repeatable).",
            ),
            click.option(
                "--before",
                type=Age(),
                default=None,
                help="Those that died more than AGE ago (e.g. 7d, 1h30m).",
            ),
            click.option("--all", "everything", is_flag=True, help="Every dead letter of QUEUE."),
        )
    ):
        func = decorator(func)
    return func


def _check_selection(ids: Sequence[int], before: timedelta | None, everything: bool) -> None:
    given = sum((bool(ids), before is not None, everything))
    if given != 1:
        raise click.UsageError("say which dead letters: --id N (repeatable), --before AGE or --all")


async def _select(store: Store, queue: str, before: timedelta | None) -> list[int]:
    """Ids of QUEUE's dead letters that died before now - ``before`` (all
    when None), read a page at a time."""
    cutoff = None if before is None else datetime.now(UTC) - before
    handle = store.queue(queue)
    chosen: list[int] = []
    after: int | None = None
    while True:
        page = await handle.list_jobs(state="dead", limit=PAGE, after=after)
        chosen += [
            j.id for j in page if cutoff is None or (j.died_at is not None and j.died_at < cutoff)
        ]
        if len(page) < PAGE:
            return chosen
        after = page[-1].id


@dead_group.command("requeue")
@target_options
@_selection
def requeue_command(
    target: Target, queue: str, ids: tuple[int, ...], before: timedelta | None, everything: bool
) -> None:
    """Put dead letters of QUEUE back: pending, due now, attempts reset."""
    _check_selection(ids, before, everything)

    async def work(store: Store) -> tuple[list[int], list[int]]:
        await find_queue(store, queue)
        chosen = list(ids) or await _select(store, queue, before)
        handle = store.queue(queue)
        moved: list[int] = []
        missing: list[int] = []
        for job_id in chosen:
            (moved if await handle.requeue_dead(job_id) else missing).append(job_id)
        return moved, missing

    moved, missing = run(target, work, read_only=False)
    if target.json:
        click.echo(shapes.dumps({"queue": queue, "requeued": moved, "missing": missing}))
    else:
        click.echo(f"requeued {len(moved)} dead letter(s) of {queue!r}")
        if missing:
            click.echo(f"not dead letters of {queue!r}: {', '.join(map(str, missing))}", err=True)
    if ids and missing:
        raise SystemExit(1)


@dead_group.command("purge")
@target_options
@_selection
@click.option("--yes", is_flag=True, help="Really delete (purging cannot be undone).")
def purge_command(
    target: Target,
    queue: str,
    ids: tuple[int, ...],
    before: timedelta | None,
    everything: bool,
    yes: bool,
) -> None:
    """Delete dead letters of QUEUE for good (asks for --yes)."""
    _check_selection(ids, before, everything)
    if not yes:
        fail(UNUSABLE, "purging deletes dead letters for good: add --yes to do it")

    async def work(store: Store) -> tuple[int, list[int]]:
        await find_queue(store, queue)
        handle = store.queue(queue)
        if ids:
            purged = await handle.purge_dead(ids=list(ids))
            return purged, []
        cutoff = None if before is None else datetime.now(UTC) - before
        return await handle.purge_dead(before=cutoff), []

    purged, _ = run(target, work, read_only=False)
    if target.json:
        click.echo(shapes.dumps({"queue": queue, "purged": purged}))
    else:
        click.echo(f"purged {purged} dead letter(s) of {queue!r}")
    if ids and purged < len(set(ids)):
        raise SystemExit(1)
