"""The ``open_sqlite``/``open_postgres`` pair every driver exposes, written once.

A driver module binds them to its runtime: ``Openers(TrioRuntime)``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import sniffio

from ..api.store import Store
from ..protocol.values.errors import UsageError
from ..runner.postgres.opening import PostgresOptions
from ..runner.runtime import Clock, Runtime
from ..runner.sqlite.opening import SqliteOptions
from .postgres import open_postgres_store
from .sqlite import open_sqlite_store


class Openers:
    def __init__(self, runtime: Callable[[], Runtime], library: str) -> None:
        self._make_runtime = runtime
        self._library = library

    def _runtime(self) -> Runtime:
        """The driver's runtime, refusing to run under the other library."""
        try:
            running = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            running = None
        if running != self._library:
            hint = f"; use alkstore.io_{running}" if running in ("trio", "asyncio") else ""
            raise UsageError(
                f"alkstore.io_{self._library} runs under {self._library}, but this is "
                f"{running or 'not inside an event loop'}{hint}"
            )
        return self._make_runtime()

    def open_sqlite(
        self,
        path: str | os.PathLike[str],
        *,
        options: SqliteOptions | None = None,
        clock: Clock | None = None,
        seed: int | None = None,
        read_only: bool = False,
    ) -> AbstractAsyncContextManager[Store]:
        """Open (creating or migrating) a SQLite store at ``path``.

        Background tasks (the cross-process watcher, maintenance) run in a
        task group owned by the ``async with`` block, cancelled and joined
        when it ends. ``clock`` replaces the wall clock (tests); ``seed``
        fixes backoff jitter.

        ``read_only``: open an existing file for reading only (SQLite's
        ``mode=ro``): never created, migrated or written; a schema of another
        version raises ``SchemaMismatch``, and every operation that writes
        raises ``UsageError``.
        """
        return _scoped(
            lambda: open_sqlite_store(
                self._runtime(),
                path,
                options=options,
                clock=clock,
                seed=seed,
                read_only=read_only,
            )
        )

    def open_postgres(
        self,
        dsn: str | None = None,
        *,
        options: PostgresOptions | None = None,
        clock: Clock | None = None,
        seed: int | None = None,
        read_only: bool = False,
    ) -> AbstractAsyncContextManager[Store]:
        """Open (creating or migrating) a Postgres store.

        ``dsn`` defaults to ``$ALKSTORE_DSN``, then the local test server.
        The listener task runs in a task group owned by the ``async with``
        block.

        ``read_only``: every session is read-only on the server
        (``default_transaction_read_only``); the schema is checked, never
        created or migrated (another version raises ``SchemaMismatch``), and
        every operation that writes raises ``UsageError``.
        """
        return _scoped(
            lambda: open_postgres_store(
                self._runtime(),
                dsn,
                options=options,
                clock=clock,
                seed=seed,
                read_only=read_only,
            )
        )


@asynccontextmanager
async def _scoped(
    make: Callable[[], AbstractAsyncContextManager[Store]],
) -> AsyncIterator[Store]:
    # The runtime is created inside the block: it binds to the running loop.
    async with make() as store:
        yield store
