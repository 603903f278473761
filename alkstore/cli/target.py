"""Which database a command works on, and how a command runs against it.

Every command takes ``--db PATH`` (SQLite) or ``--dsn DSN`` (Postgres),
``--schema`` (Postgres) and ``--json`` (defaults: ``$ALKSTORE_DSN``, else
``$ALKSTORE_DB``; ``$ALKSTORE_SCHEMA``: ``runner/environment.py``) through
:func:`target_options`, so scripts can rely on the same flags everywhere.
:func:`run` opens the store (read-only unless the command changes
something), runs the command's coroutine under trio, and turns the
taxonomy's errors into the documented exit codes (docs/cli.md).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click
import trio

from ..api.store import Store
from ..protocol.values.errors import (
    AlkstoreError,
    DatabaseError,
    InvalidArgument,
    InvalidName,
    ReservedName,
    SchemaMismatch,
)
from ..runner import environment

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

# Exit codes, the same for every command (docs/cli.md).
OK = 0
NOT_FOUND = 1  # the name or id asked about does not exist; nothing was changed
UNUSABLE = 2  # bad usage, or the database cannot be used: missing, unreachable, wrong schema
FAILED = 3  # the database failed while the command ran


class Exit(Exception):
    """Stop the command with ``code``, saying ``message`` on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def not_found(message: str) -> NoReturn:
    raise Exit(NOT_FOUND, message)


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

    @property
    def where(self) -> str:
        """The database, as messages name it (no password)."""
        if self.db is not None:
            return self.db
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(self.dsn or "")
        except Exception:
            return "the PostgreSQL server"
        host = info.get("host", "localhost")
        name = info.get("dbname", info.get("user", ""))
        schema = self.schema or "alkstore"
        return f"postgresql://{host}/{name} (schema {schema})"


def target_options(func: F) -> F:
    """Add ``--db``, ``--dsn``, ``--schema`` and ``--json``; the command
    receives one ``target: Target`` argument instead."""
    with_json = click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
    )(func)
    return _target_options(with_json)


def database_options(func: F) -> F:
    """``--db``, ``--dsn`` and ``--schema`` (no ``--json``: a command that
    prints no document, such as ``dashboard``); ``target.json`` is False."""
    return _target_options(func)


def _target_options(func: F) -> F:
    @click.option(
        "--db",
        type=click.Path(dir_okay=False),
        default=None,
        help="SQLite database file.",
    )
    @click.option(
        "--dsn",
        default=None,
        help="PostgreSQL connection string. Default: $ALKSTORE_DSN (else --db $ALKSTORE_DB).",
    )
    @click.option(
        "--schema",
        default=None,
        help="Postgres schema holding alkstore's tables. Default: $ALKSTORE_SCHEMA, else "
        "alkstore.",
    )
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        db: str | None,
        dsn: str | None,
        schema: str | None,
        as_json: bool = False,
        **kwargs: Any,
    ) -> Any:
        given = _before_the_command()
        if db is None and dsn is None:
            db, dsn = given.get("db"), given.get("dsn")
        schema = schema if schema is not None else given.get("schema")
        as_json = as_json or bool(given.get("as_json"))
        if db is not None and dsn is not None:
            raise click.UsageError("give --db or --dsn, not both")
        if schema is not None and db is not None:
            raise click.UsageError("--schema is for Postgres (--dsn) only")
        if db is None and dsn is None:  # the environment's, as the library and recipes read it
            dsn = environment.dsn()
            db = environment.db() if dsn is None else None
        if db is None and dsn is None:
            raise click.UsageError(
                "give --db PATH (SQLite) or --dsn DSN (or set ALKSTORE_DSN or ALKSTORE_DB)"
            )
        if dsn is not None and schema is None:
            schema = environment.schema()
        return func(*args, target=Target(db, dsn, schema, as_json), **kwargs)

    return wrapper  # type: ignore[return-value]


def _before_the_command() -> dict[str, Any]:
    """The options given to ``alkstore`` itself, before the command
    (``alkstore --json queues``): the command's own defaults."""
    context = click.get_current_context(silent=True)
    return {} if context is None else dict(context.find_root().params)


@asynccontextmanager
async def open_store(target: Target, *, read_only: bool) -> AsyncIterator[Store]:
    """The store ``target`` names, on the trio driver. Read-only opens
    never write (SQLite ``mode=ro``; Postgres read-only sessions) and never
    migrate; a read-write open migrates, as every opener does."""
    from ..io_trio import PostgresOptions, open_postgres, open_sqlite

    if target.db is not None:
        async with open_sqlite(target.db, read_only=read_only) as store:
            yield store
    else:
        options = PostgresOptions(pool_size=2)
        if target.schema is not None:
            options = PostgresOptions(schema=target.schema, pool_size=2)
        async with open_postgres(target.dsn, options=options, read_only=read_only) as store:
            yield store


def run(
    target: Target,
    work: Callable[[Store], Awaitable[T]],
    *,
    read_only: bool = True,
    create: bool = False,
) -> T:
    """Open ``target``'s store, run ``work`` on it under trio, and return
    its result; any failure exits with its documented code and a message
    on stderr. A missing SQLite file is refused unless ``create``."""

    async def main() -> T:
        async with opened(target, read_only=read_only) as store:
            return await work(store)

    refuse_missing(target, create=create)
    return guarded(target, lambda: trio.run(main))


def refuse_missing(target: Target, *, create: bool = False) -> None:
    """Exit 2 when ``target`` is a SQLite file that does not exist (unless
    ``create``): a typo in ``--db`` must not make a new, empty database that
    a worker then idles on. ``alkstore migrate`` creates one on purpose."""
    if create or target.db is None or os.path.exists(target.db):
        return
    fail(
        UNUSABLE,
        f"no such database file: {target.db} (alkstore migrate --db {target.db} creates it)",
    )


@asynccontextmanager
async def opened(target: Target, *, read_only: bool) -> AsyncIterator[Store]:
    """:func:`open_store`, a failure to open (a missing file, an unreachable
    server, a refused login) raised as exit code 2; errors in the body pass
    through."""
    async with AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(open_store(target, read_only=read_only))
        except (Exit, SchemaMismatch, InvalidArgument):
            raise
        except DatabaseError as exc:
            raise Exit(UNUSABLE, f"cannot open {target.where}: {exc}") from exc
        yield store


def guarded(target: Target, call: Callable[[], T]) -> T:
    """``call()``, its failures turned into exit codes and messages."""
    try:
        return call()
    except Exit as exc:
        fail(exc.code, exc.message)
    except SchemaMismatch as exc:
        fail(UNUSABLE, f"{target.where}: {exc}")
    except (InvalidArgument, InvalidName, ReservedName) as exc:
        fail(UNUSABLE, str(exc))
    except DatabaseError as exc:
        # Opening failed (missing file, unreachable server, refused login)
        # or the database failed mid-command; the message says which.
        fail(FAILED, f"{target.where}: {exc}")
    except AlkstoreError as exc:
        fail(FAILED, str(exc))


def fail(code: int, message: str) -> NoReturn:
    click.echo(f"alkstore: {message}", err=True)
    sys.exit(code)
