"""``schedules``: every schedule, its expression, last and next fire."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from .. import shapes
from ..protocol.values.types import ScheduleInfo
from . import render
from .target import Target, run, target_options


def catch_up(s: ScheduleInfo) -> str:
    """``latest``, ``all (max 10)`` or ``skip (grace 1m)``."""
    if s.catch_up == "all":
        return f"all (max {s.catch_up_max})"
    if s.catch_up == "skip" and s.catch_up_grace is not None:
        return f"skip (grace {render.duration(s.catch_up_grace.total_seconds())})"
    return s.catch_up


@click.command("schedules")
@target_options
def schedules_command(target: Target) -> None:
    """Every schedule: its queue, expression and time zone, its catch-up
    policy, when it last fired and fires next, and whether it is paused."""

    schedules = run(target, lambda store: store.list_schedules())
    if target.json:
        click.echo(shapes.dumps({"schedules": [shapes.schedule_doc(s) for s in schedules]}))
        return
    out = render.console()
    now = datetime.now(UTC)
    rows = []
    for s in schedules:
        due = (s.next_fire_at - now).total_seconds()
        upcoming = render.when(s.next_fire_at)
        if not s.paused:
            upcoming += f" (in {render.duration(max(0.0, due))})"
        rows.append((s.name, s.queue, s.expression, s.tz, catch_up(s),
                     render.when(s.last_fire_at), upcoming,
                     "paused" if s.paused else ""))  # fmt: skip
    columns = ("schedule", "queue", "expression", "tz", "catch-up", "last fire", "next fire", "")
    out.print(render.table("schedules", columns, rows, out=out))
