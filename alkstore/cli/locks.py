"""``locks``: every lock, its holder, token and time left."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from .. import shapes
from . import render
from .target import Target, run, target_options


@click.command("locks")
@target_options
@click.option("--held", "only_held", is_flag=True, help="Only locks held now.")
def locks_command(target: Target, only_held: bool) -> None:
    """Every lock: owner, fencing token, and the time left on its TTL."""
    locks = run(target, lambda store: store.list_locks())
    if only_held:
        locks = [lock for lock in locks if lock.held]
    now = datetime.now(UTC)
    if target.json:
        click.echo(shapes.dumps({"locks": [shapes.lock_doc(lock, now) for lock in locks]}))
        return
    out = render.console()
    rows = []
    for lock in locks:
        doc = shapes.lock_doc(lock, now)
        rows.append(
            (
                lock.name,
                lock.owner if lock.held else None,
                lock.token,
                "held" if lock.held else "free",
                render.duration(doc["ttl_left_s"]),
            )
        )
    columns = ("lock", "owner", "token", "state", "time left")
    out.print(render.table("locks", columns, rows, out=out, right=("token", "time left")))
