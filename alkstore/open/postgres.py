"""Opening a Postgres store: pool, schema migration, listener, background tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..api.core.handle import StoreCore
from ..api.store import Store
from ..engines.postgres import SCHEMA_VERSION, PostgresDialect, control, migrate, schema_version
from ..protocol.rows import require_schema
from ..runner.hub import WakeHub
from ..runner.postgres.executor import PgExecutor, run_in_transaction
from ..runner.postgres.listener import PgListener
from ..runner.postgres.opening import PostgresOptions, resolve
from ..runner.postgres.pool import PgPool
from ..runner.runtime import Clock, Runtime, SystemClock
from ..services.housekeeping import run_housekeeping


@asynccontextmanager
async def open_postgres_store(
    runtime: Runtime,
    dsn: str | None = None,
    *,
    options: PostgresOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> AsyncIterator[Store]:
    opts, target, read_only = resolve(dsn, options, read_only)
    dialect = PostgresDialect(opts.schema)
    pool = PgPool(
        runtime,
        target,
        size=opts.pool_size,
        connect_timeout=opts.connect_timeout,
        response_timeout=opts.response_timeout,
        prepare_threshold=opts.prepare_threshold,
    )
    try:
        async with pool.connection() as conn:
            if read_only:
                # Checked, never migrated (no advisory lock, no DDL).
                version = await run_in_transaction(
                    runtime, conn, schema_version(opts.schema), [], opts.commit_timeout,
                    begin=control.BEGIN_READ,
                )  # fmt: skip
                require_schema(version, SCHEMA_VERSION, f"Postgres schema {opts.schema!r}")
            else:
                await run_in_transaction(
                    runtime, conn, migrate(opts.schema), [], opts.commit_timeout
                )
    except BaseException:
        pool.close()
        raise
    hub = WakeHub(runtime)
    listener = PgListener(
        runtime,
        target,
        dialect.channel_identifier,
        dialect.listen,
        dialect.unlisten,
        control.PROBE,
        hub,
        opts.listener,
        own_pids=pool.backend_pids,
        on_silence=pool.drop_idle,
    )
    executor = PgExecutor(runtime, pool, dialect, listener, end_timeout=opts.commit_timeout)
    core = StoreCore(
        executor=executor, runtime=runtime, clock=clock or SystemClock(), hub=hub, seed=seed,
        read_only=read_only, vacuum=opts.vacuum,
    )  # fmt: skip
    try:
        async with runtime.task_group() as group:
            core.background = group
            group.start_soon(listener.run)
            await listener.wait_connected(opts.connect_timeout)
            if not read_only and opts.housekeeping_interval is not None:
                group.start_soon(run_housekeeping, core, opts.housekeeping_interval)
            try:
                yield Store(core)
            finally:
                group.cancel()
    finally:
        with runtime.shield():
            await core.close()
