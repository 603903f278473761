"""The blocking producer API, for synchronous code (Django, Flask, scripts).

    import alkstore.sync

    with alkstore.sync.open_sqlite("app.db") as store:
        store.queue("emails").enqueue({"to": "ada@example.com"})

Enqueue, publish, notify and inspect, alone or in a transaction with your
own SQL (``store.transaction()``), or inside the transaction your
application already holds on its own connection (``store.join(conn)``).
The same names, arguments, errors and plans as the async API; workers,
subscribers and listeners run on ``alkstore.io_trio`` / ``alkstore.io_asyncio``
and wake for what this commits, in any process. See docs/sync.md.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager

from .api.sync import Outbox, Queue, Store, Stream, Transaction
from .open.sync import open_postgres_blocking, open_sqlite_blocking
from .runner.options import PostgresOptions as PostgresOptions
from .runner.options import SqliteOptions as SqliteOptions
from .runner.runtime import Clock


def open_sqlite(
    path: str | os.PathLike[str],
    *,
    options: SqliteOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> AbstractContextManager[Store]:
    """``with open_sqlite(path) as store``: open (creating or migrating) a
    SQLite store at ``path``, blocking, on one connection (WAL, with
    ``options``' busy timeout and pragmas; its other options are for the
    async stores' background work and are not used here). ``clock``
    replaces the wall clock (tests); ``read_only`` opens an existing file
    for reading only (``SchemaMismatch`` for another schema version,
    ``UsageError`` for every write). The store closes when the block ends.
    """
    return open_sqlite_blocking(
        path, options=options, clock=clock, seed=seed, read_only=read_only
    )


def open_postgres(
    dsn: str | None = None,
    *,
    options: PostgresOptions | None = None,
    clock: Clock | None = None,
    seed: int | None = None,
    read_only: bool = False,
) -> AbstractContextManager[Store]:
    """``with open_postgres(dsn) as store``: open (creating or migrating) a
    Postgres store, blocking, on one psycopg connection. ``dsn`` defaults
    to ``$ALKSTORE_DSN``, then ``postgresql://postgres@127.0.0.1:5432/test``.
    Of ``options``, ``schema``, ``connect_timeout`` and ``dead_peer_timeout``
    (TCP keepalives) apply; the rest are for the async stores' pool,
    listener and background work. ``read_only``: every session read-only
    on the server, the schema checked and never migrated, every write a
    ``UsageError``. The store closes when the block ends.
    """
    return open_postgres_blocking(
        dsn, options=options, clock=clock, seed=seed, read_only=read_only
    )


__all__ = [
    "Outbox",
    "PostgresOptions",
    "Queue",
    "SqliteOptions",
    "Store",
    "Stream",
    "Transaction",
    "open_postgres",
    "open_sqlite",
]
