"""``streams``: each stream's head, events and consumers' lag."""

from __future__ import annotations

import click

from .. import shapes
from ..api.store import Store
from ..protocol.values.types import StreamInfo
from . import render
from .target import Target, not_found, run, target_options


@click.command("streams")
@target_options
@click.argument("names", metavar="[STREAM]...", nargs=-1)
def streams_command(target: Target, names: tuple[str, ...]) -> None:
    """Every stream (or those named): head offset, event count, oldest event,
    retention, and each consumer's offset and lag."""

    async def work(store: Store) -> list[StreamInfo]:
        for name in names:
            store.stream(name)  # the name rules first
        found = await store.list_streams()
        if names:
            known = {s.name for s in found}
            missing = [n for n in names if n not in known]
            if missing:
                not_found(f"no stream named {', '.join(map(repr, missing))}")
            found = [s for s in found if s.name in names]
        return found

    streams = run(target, work)
    if target.json:
        click.echo(shapes.dumps({"streams": [shapes.stream_doc(s) for s in streams]}))
        return
    out = render.console()
    rows = []
    for s in streams:
        retention = []
        if s.max_age is not None:
            retention.append(f"age {render.duration(s.max_age.total_seconds())}")
        if s.max_events is not None:
            retention.append(f"{s.max_events} events")
        rows.append(
            (
                s.name,
                s.head_offset,
                s.events,
                s.oldest_offset,
                render.when(s.oldest_event_at),
                ", ".join(retention) or None,
                len(s.consumers),
                max((c.lag for c in s.consumers), default=None),
            )
        )
    columns = (
        "stream",
        "head",
        "events",
        "oldest",
        "oldest at",
        "retention",
        "consumers",
        "max lag",
    )
    right = ("head", "events", "oldest", "consumers", "max lag")
    out.print(render.table("streams", columns, rows, out=out, right=right))
    consumers = [
        (s.name, c.name, c.offset, c.lag, "kept" if c.protected else "")
        for s in streams
        for c in s.consumers
    ]
    if consumers:
        out.print(
            render.table(
                "consumers",
                ("stream", "consumer", "offset", "lag", ""),
                consumers,
                out=out,
                right=("offset", "lag"),
            )
        )
