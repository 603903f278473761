"""The ``alkstore`` command line (also ``python -m alkstore``).

The group and ``demo`` live here; each family of commands has its own
module: ``queues.py`` (queues, jobs, job, cancel, pause, resume),
``dead.py``, ``workflows.py`` (workflows, workflow), ``streams.py``,
``schedules.py``, ``locks.py``, ``watch.py``, ``admin.py`` (migrate,
prune), ``worker.py`` (with ``handlers.py`` and ``metrics.py``),
``dashboard.py`` (serves alkstore.dashboard). ``target.py`` holds the
options every command shares and the exit codes; ``render.py`` the tables.
The documented ``--json`` shapes are in ``alkstore/shapes.py``, shared
with the dashboard; ``queues.py`` adds a queue's ``waiting`` count and
what ``job`` alone reads (result, dependencies, dependents, workflow
step), and ``workflows.py`` holds the workflows' documents, which only
the command line prints. docs/cli.md is the reference.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console

from .. import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="alkstore")
@click.option("--db", type=click.Path(dir_okay=False), default=None,
              help="SQLite database file, for the command that follows.")
@click.option("--dsn", default=None, help="PostgreSQL connection string, for the command that "
              "follows. Default: $ALKSTORE_DSN.")
@click.option("--schema", default=None, help="Postgres schema, for the command that follows.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document on stdout, for the command that follows.")
def main(db: str | None, dsn: str | None, schema: str | None, as_json: bool) -> None:
    """alkstore: durable messaging in the database you already have.

    --db, --dsn, --schema and --json may come before the command or after
    it (alkstore --json queues --db app.db); given in both places, the
    command's own wins.
    """


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

    db = db if db is not None else click.get_current_context().find_root().params.get("db")
    if not run_demo(db, jobs, seed, timeout, console=Console()):
        sys.exit(1)


def _register() -> None:
    from .admin import migrate_command, prune_command
    from .dashboard import dashboard_command
    from .dead import dead_group
    from .locks import locks_command
    from .queues import (
        cancel_command,
        job_command,
        jobs_command,
        pause_command,
        queues_command,
        resume_command,
    )
    from .schedules import schedules_command
    from .streams import streams_command
    from .watch import watch_command
    from .worker import worker
    from .workflows import workflow_command, workflows_command

    for command in (
        queues_command, jobs_command, job_command, dead_group, pause_command, resume_command,
        cancel_command, workflows_command, workflow_command, streams_command,
        schedules_command, locks_command, watch_command, migrate_command, prune_command, worker,
        dashboard_command,
    ):  # fmt: skip
        main.add_command(command)


_register()
