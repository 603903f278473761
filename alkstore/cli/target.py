"""Which database a command works on: ``--db PATH`` (SQLite) or ``--dsn DSN``
(Postgres, default ``$ALKSTORE_DSN``), ``--schema`` (Postgres), and
``--json``.

Every command takes these through :func:`target_options`, so scripts can
rely on the same flags everywhere.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Target:
    """The database a command was pointed at, and how it should answer."""

    db: str | None
    dsn: str | None
    schema: str | None
    json: bool

    @property
    def engine(self) -> str:
        return "sqlite" if self.db is not None else "postgres"


def target_options(func: F) -> F:
    """Add ``--db``, ``--dsn``, ``--schema`` and ``--json``; the command
    receives one ``target: Target`` argument instead."""

    @click.option(
        "--db",
        type=click.Path(dir_okay=False),
        default=None,
        help="SQLite database file.",
    )
    @click.option(
        "--dsn",
        default=None,
        help="PostgreSQL connection string. Default: $ALKSTORE_DSN.",
    )
    @click.option(
        "--schema",
        default=None,
        help="Postgres schema holding alkstore's tables. Default: alkstore.",
    )
    @click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )
    @functools.wraps(func)
    def wrapper(
        *args: Any, db: str | None, dsn: str | None, schema: str | None, as_json: bool,
        **kwargs: Any,
    ) -> Any:
        if db is not None and dsn is not None:
            raise click.UsageError("give --db or --dsn, not both")
        if db is None and dsn is None:
            dsn = os.environ.get("ALKSTORE_DSN") or None
        if db is None and dsn is None:
            raise click.UsageError("give --db PATH (SQLite) or --dsn DSN (or set ALKSTORE_DSN)")
        if schema is not None and db is not None:
            raise click.UsageError("--schema is for Postgres (--dsn) only")
        return func(*args, target=Target(db, dsn, schema, as_json), **kwargs)

    return wrapper  # type: ignore[return-value]
