"""Opening a blocking store (``alkstore.sync``): one connection, its schema
created or migrated as the async openers do (the same checks of the same
arguments, the same migration plans), no background task."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..api.sync import Store
from ..engines.postgres import SCHEMA_VERSION, PostgresDialect, migrate, schema_version
from ..protocol.rows import require_schema
from ..runner.postgres import opening as pg_opening
from ..runner.postgres.opening import PostgresOptions
from ..runner.postgres.sync_executor import PgBlocking
from ..runner.runtime import Clock, SystemClock
from ..runner.sqlite import opening as sqlite_opening
from ..runner.sqlite.file import DatabaseFile, file_path
from ..runner.sqlite.opening import SqliteOptions
from ..runner.sqlite.sync_executor import SqliteBlocking


@contextmanager
def open_sqlite_blocking(
    path: str | os.PathLike[str],
    *,
    options: SqliteOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> Iterator[Store]:
    opts, target, read_only, _ = sqlite_opening.resolve(path, options, read_only)
    conn = sqlite_opening.open_main_connection(target, opts, read_only)
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
    opts, target, read_only = pg_opening.resolve(dsn, options, read_only)
    executor = PgBlocking(
        target, PostgresDialect(opts.schema), opts.connect_timeout, opts.prepare_threshold
    )
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
