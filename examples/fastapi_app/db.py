"""Where the database is, and the app's own SQL: shared by the web app and the worker.

The database comes from the environment, as the ``alkstore`` command reads it:

- ``ALKSTORE_DSN``: a PostgreSQL connection string; else
- ``ALKSTORE_DB``: a SQLite file (default ``app.db``; the worker is given it as ``--db``).
- ``ALKSTORE_SCHEMA``: on Postgres, the schema of alkstore's tables (default ``alkstore``;
  the worker is given it as ``--schema``). The app's own ``orders`` table goes where the
  connection's ``search_path`` puts it (``public`` unless the DSN says otherwise).
"""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from alkstore import Store, StoreHandle
from alkstore.io_asyncio import PostgresOptions, open_postgres, open_sqlite

DSN = os.environ.get("ALKSTORE_DSN") or None
DB = os.environ.get("ALKSTORE_DB") or "app.db"
SCHEMA = os.environ.get("ALKSTORE_SCHEMA") or "alkstore"

CREATE_ORDERS = """
CREATE TABLE IF NOT EXISTS orders (
    id TEXT PRIMARY KEY,
    item TEXT NOT NULL,
    quantity INTEGER NOT NULL,
    status TEXT NOT NULL,
    job_id BIGINT NOT NULL
)
"""


@asynccontextmanager
async def open_store() -> AsyncIterator[Store]:
    """The store on the configured database (created or migrated as it opens)."""
    if DSN is not None:
        async with open_postgres(DSN, options=PostgresOptions(schema=SCHEMA)) as store:
            yield store
    else:
        async with open_sqlite(DB) as store:
            yield store


def sql(store: StoreHandle, statement: str) -> str:
    """``statement`` with the store's placeholders: ``?`` on SQLite, ``$1, $2, ...`` on
    Postgres (``tx.execute`` passes SQL through untranslated)."""
    if store.engine == "sqlite":
        return statement
    first, *rest = statement.split("?")
    return first + "".join(f"${n}{part}" for n, part in enumerate(rest, start=1))


async def create_tables(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute(CREATE_ORDERS)


async def find_order(store: Store, order_id: str) -> dict[str, Any] | None:
    async with store.transaction() as tx:
        rows = await tx.execute(
            sql(store, "SELECT id, item, quantity, status, job_id FROM orders WHERE id = ?"),
            (order_id,),
        )
    if not rows:
        return None
    (id_, item, quantity, status, job_id), *_ = rows
    return {"id": id_, "item": item, "quantity": quantity, "status": status, "job_id": job_id}


# -- the worker's side ------------------------------------------------------------------


async def mark_processed(store: StoreHandle, order_id: str) -> None:
    """Set the order's status to ``processed``, on the store the worker opened (the
    handler's ``job.store``); running it twice does no harm (a job runs at least once)."""
    async with store.transaction() as tx:
        await tx.execute(sql(store, "UPDATE orders SET status = 'processed' WHERE id = ?"),
                         (order_id,))  # fmt: skip
