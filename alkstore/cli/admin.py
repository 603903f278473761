"""Schema and housekeeping: ``migrate`` (and ``--check``), ``prune``."""

from __future__ import annotations

import os

import click

from .. import shapes
from ..api.store import Store
from ..protocol.values.errors import SchemaMismatch
from . import render
from .target import NOT_FOUND, UNUSABLE, Target, fail, guarded, opened, run, target_options


def _expected(target: Target) -> int:
    from ..engines import postgres, sqlite

    return sqlite.SCHEMA_VERSION if target.db is not None else postgres.SCHEMA_VERSION


async def _version(target: Target) -> tuple[int, int]:
    """(the schema version found, the version this alkstore writes), read
    without writing anything."""
    import trio

    expected = _expected(target)
    try:
        async with opened(target, read_only=True):
            await trio.lowlevel.checkpoint()
    except SchemaMismatch as exc:
        return exc.found, exc.expected
    return expected, expected


@click.command("migrate")
@target_options
@click.option(
    "--check",
    is_flag=True,
    help="Only say whether the schema is current: exit 0 if so, 1 if a migration is due.",
)
def migrate_command(target: Target, check: bool) -> None:
    """Create or upgrade alkstore's schema (with --check: only look)."""
    import trio

    if target.db is not None and not os.path.exists(target.db):
        found, expected = 0, _expected(target)  # --check never creates the file
    else:
        found, expected = guarded(target, lambda: trio.run(_version, target))
    if found > expected:
        fail(
            UNUSABLE,
            f"{target.where}: schema version {found} is newer than this alkstore "
            f"({expected}): upgrade alkstore",
        )
    if check:
        doc = {
            "engine": target.engine,
            "version": found,
            "expected": expected,
            "current": found == expected,
        }
        if target.json:
            click.echo(shapes.dumps(doc))
        elif found == expected:
            click.echo(f"schema version {found}: current")
        else:
            click.echo(
                f"schema version {found}: migration to {expected} due (run alkstore migrate)"
            )
        if found != expected:
            raise SystemExit(NOT_FOUND)
        return

    async def nothing(store: Store) -> None:
        return None

    if found != expected:
        run(target, nothing, read_only=False, create=True)  # opening read-write migrates
    doc = {
        "engine": target.engine,
        "from_version": found,
        "to_version": expected,
        "migrated": found != expected,
    }
    if target.json:
        click.echo(shapes.dumps(doc))
    elif found == expected:
        click.echo(f"schema version {expected}: already current")
    else:
        click.echo(f"migrated schema version {found} -> {expected}")


@click.command("prune")
@target_options
def prune_command(target: Target) -> None:
    """Run housekeeping once now: finished history and dead letters past
    their retention, stream events past theirs, spent notification and lock
    rows; on Postgres, vacuum the churning tables that are due. (Every open
    store also does this by itself.)"""
    report = run(target, lambda store: store.prune(), read_only=False)
    doc = shapes.prune_doc(report)
    if target.json:
        click.echo(shapes.dumps(doc))
        return
    out = render.console()
    out.print(render.table("pruned", ("what", "rows"), list(doc.items()), out=out, right=("rows",)))
