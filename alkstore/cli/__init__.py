"""The ``alkstore`` command line (also ``python -m alkstore``).

The group and ``demo`` live here; each family of commands has its own
module (``target.py`` holds the options every command shares).
"""

from __future__ import annotations

import os
import sys

import click
import trio
from rich.console import Console
from rich.table import Table

from .. import __version__
from ..protocol.errors import AlkstoreError
from ..protocol.types import JobInfo, QueueStats


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="alkstore")
def main() -> None:
    """alkstore: durable messaging in the database you already have."""


@main.command()
@click.option(
    "--db",
    type=click.Path(dir_okay=False),
    default=None,
    help="SQLite file to use (kept afterwards). Default: a temporary file, deleted afterwards.",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 100_000),
    default=200,
    show_default=True,
    help="How many orders (and jobs, events, receipts) to create.",
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed for the demo's choices.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Give up (and fail) after this many seconds.",
)
def demo(db: str | None, jobs: int, seed: int, timeout: float) -> None:
    """Run every mechanism together on SQLite and check the results.

    Exits 0 when every check passed, 1 otherwise.
    """
    from ..demo import main as run_demo

    if not run_demo(db, jobs, seed, timeout, console=Console()):
        sys.exit(1)


@main.command()
@click.option(
    "--db",
    "db",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="SQLite database file.",
)
@click.option("--outbox", is_flag=True, help="QUEUE names an outbox, not a queue.")
@click.option(
    "--dead",
    type=click.IntRange(0, 10_000),
    default=0,
    show_default=True,
    help="Also list up to this many dead letters.",
)
@click.argument("queue")
def stats(db: str, outbox: bool, dead: int, queue: str) -> None:
    """Print the job counts of QUEUE (ready, scheduled, processing, dead)."""
    console = Console()
    try:
        counts, letters = trio.run(_read_stats, db, queue, outbox, dead)
    except AlkstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    kind = "outbox" if outbox else "queue"
    table = Table(title=f"{kind} {queue!r} in {os.path.basename(db)}", title_justify="left")
    for column in ("ready", "scheduled", "processing", "dead"):
        table.add_column(column, justify="right")
    table.add_row(
        *(str(v) for v in (counts.ready, counts.scheduled, counts.processing, counts.dead))
    )
    console.print(table)
    if letters:
        listing = Table(title="dead letters", title_justify="left")
        for column in ("id", "attempts", "reason", "died at", "last error"):
            listing.add_column(column)
        for info in letters:
            listing.add_row(
                str(info.id),
                f"{info.attempts}/{info.max_attempts}",
                info.dead_reason or "",
                "" if info.died_at is None else f"{info.died_at:%Y-%m-%d %H:%M:%S}",
                info.last_error or "",
            )
        console.print(listing)


async def _read_stats(
    db: str, name: str, outbox: bool, dead: int
) -> tuple[QueueStats, list[JobInfo]]:
    from ..io_trio import open_sqlite

    async with open_sqlite(db) as store:
        queue = store.outbox(name).queue if outbox else store.queue(name)
        counts = await queue.stats()
        letters = await queue.dead_letters(dead) if dead else []
    return counts, letters



from .worker import worker  # noqa: E402  (registered on the group above)

main.add_command(worker)
