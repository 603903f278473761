"""Opening a blocking store (``alkstore.sync``): one connection, its schema
created or migrated as the async openers do (the same checks of the same
arguments, the same migration plans), no background task."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..api.blocking import Store
from ..engines.postgres import SCHEMA_VERSION, PostgresDialect, migrate, schema_version
from ..protocol.rows import require_schema
from . import open_postgres, open_sqlite
from .open_postgres import PostgresOptions
from .open_sqlite import SqliteOptions
from .pg_blocking import PgBlocking
from .runtime import Clock, SystemClock
from .sqlite_blocking import SqliteBlocking
from .sqlite_file import DatabaseFile, file_path


@contextmanager
def open_sqlite_blocking(
    path: str | os.PathLike[str],
    *,
    options: SqliteOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> Iterator[Store]:
    opts, target, read_only, _ = open_sqlite.resolve(path, options, read_only)
    conn = open_sqlite.open_main_connection(target, opts, read_only)
    at = file_path(target)
    executor = SqliteBlocking(conn, None if at is None else DatabaseFile(at))
    store = Store(executor=executor, clock=clock or SystemClock(), seed=seed, read_only=read_only)
    try:
        yield store
    finally:
        store.close()


@contextmanager
def open_postgres_blocking(
    dsn: str | None = None,
    *,
    options: PostgresOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> Iterator[Store]:
    opts, target, read_only = open_postgres.resolve(dsn, options, read_only)
    executor = PgBlocking(target, PostgresDialect(opts.schema), opts.connect_timeout)
    try:
        if read_only:
            # Checked, never migrated (no advisory lock, no DDL).
            version = executor.run(schema_version(opts.schema))
            require_schema(version, SCHEMA_VERSION, f"Postgres schema {opts.schema!r}")
        else:
            executor.run(migrate(opts.schema))
    except BaseException:
        executor.close()
        raise
    store = Store(executor=executor, clock=clock or SystemClock(), seed=seed, read_only=read_only)
    try:
        yield store
    finally:
        store.close()
