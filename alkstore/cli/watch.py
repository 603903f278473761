"""``watch``: a live overview of queues, streams, schedules and locks."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime

import click
import trio
from rich.console import Group
from rich.live import Live

from .. import shapes
from ..api.store import Store
from ..protocol.values.types import LockInfo, QueueSummary, ScheduleInfo, StreamInfo
from . import render
from .target import OK, Target, run, target_options


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: datetime
    queues: list[QueueSummary]
    streams: list[StreamInfo]
    schedules: list[ScheduleInfo]
    locks: list[LockInfo]

    def doc(self) -> shapes.Doc:
        return shapes.overview_doc(self.at, self.queues, self.streams, self.schedules, self.locks)


async def snapshot(store: Store) -> Snapshot:
    return Snapshot(
        datetime.now(UTC),
        await store.list_queues(),
        await store.list_streams(),
        await store.list_schedules(),
        await store.list_locks(),
    )


def view(snap: Snapshot, where: str) -> Group:
    out = render.console()
    queues = [
        (
            shapes.queue_kind(q)[1],
            q.ready,
            q.scheduled,
            q.waiting,
            q.processing,
            q.dead,
            render.duration(shapes.age(q.oldest_ready_at, snap.at)),
            "paused" if q.paused else "",
        )
        for q in snap.queues
    ]
    streams = [
        (s.name, s.head_offset, s.events, max((c.lag for c in s.consumers), default=None))
        for s in snap.streams
    ]
    schedules = [
        (s.name, s.queue, render.when(s.next_fire_at), "paused" if s.paused else "")
        for s in snap.schedules
    ]
    locks = [
        (
            lock.name,
            lock.owner,
            lock.token,
            render.duration(shapes.lock_doc(lock, snap.at)["ttl_left_s"]),
        )
        for lock in snap.locks
        if lock.held
    ]
    title = f"alkstore: {where} at {render.when(snap.at)} (Ctrl-C to leave)"
    return Group(
        title,
        render.table(
            "queues",
            ("queue", "ready", "scheduled", "waiting", "processing", "dead", "oldest", ""),
            queues,
            out=out,
            right=("ready", "scheduled", "waiting", "processing", "dead", "oldest"),
        ),
        render.table(
            "streams",
            ("stream", "head", "events", "max lag"),
            streams,
            out=out,
            right=("head", "events", "max lag"),
        ),
        render.table("schedules", ("schedule", "queue", "next fire", ""), schedules, out=out),
        render.table(
            "held locks",
            ("lock", "owner", "token", "time left"),
            locks,
            out=out,
            right=("token", "time left"),
        ),
    )


@click.command("watch")
@target_options
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many refreshes (default: until Ctrl-C).",
)
def watch_command(target: Target, interval: float, count: int | None) -> None:
    """A live overview that refreshes until Ctrl-C. With --json, one JSON
    document per refresh, one per line."""

    async def loop(store: Store) -> None:
        shown = 0
        out = render.console()
        live = None if target.json or not out.is_terminal else Live(console=out, auto_refresh=False)
        with live or contextlib.nullcontext():
            while count is None or shown < count:
                snap = await snapshot(store)
                if target.json:
                    click.echo(shapes.dumps(snap.doc()))
                elif live is not None:
                    live.update(view(snap, target.where), refresh=True)
                else:
                    out.print(view(snap, target.where))
                shown += 1
                if count is None or shown < count:
                    await trio.sleep(interval)

    try:
        run(target, loop)
    except KeyboardInterrupt:
        raise SystemExit(OK) from None
