"""Orders on trio: Starlette served by hypercorn, and the worker, in one nursery.

    python app.py --bind 127.0.0.1:8000

SIGINT or SIGTERM stops it gracefully: the server stops taking requests and the
worker drains (running handlers finish, jobs claimed ahead are handed back). A
second signal stops the worker at once. README.md has the Postgres commands.

The database comes from the environment, as the ``alkstore`` command reads it:
``ALKSTORE_DSN`` (PostgreSQL), else the SQLite file ``ALKSTORE_DB`` (default
``app.db``); on Postgres ``ALKSTORE_SCHEMA`` names the schema of alkstore's tables
(default ``alkstore``), and the app's ``orders`` table goes where the connection's
``search_path`` puts it.
"""

import argparse
import functools
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.typing import ASGIFramework
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from alkstore import DatabaseError, Drain, Job, Store
from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite

DSN = os.environ.get("ALKSTORE_DSN") or None
DB = os.environ.get("ALKSTORE_DB") or "app.db"
SCHEMA = os.environ.get("ALKSTORE_SCHEMA") or "alkstore"
DRAIN_TIMEOUT = 30.0  # seconds running handlers get to finish after the first signal

log = logging.getLogger("orders")

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


def sql(statement: str) -> str:
    """``statement`` with the store's placeholders: ``?`` on SQLite, ``$1, $2, ...`` on
    Postgres (``tx.execute`` passes SQL through untranslated)."""
    if DSN is None:
        return statement
    first, *rest = statement.split("?")
    return first + "".join(f"${n}{part}" for n, part in enumerate(rest, start=1))


async def find_order(store: Store, order_id: str) -> dict[str, Any] | None:
    async with store.transaction() as tx:
        rows = await tx.execute(
            sql("SELECT id, item, quantity, status, job_id FROM orders WHERE id = ?"), (order_id,)
        )
    if not rows:
        return None
    (id_, item, quantity, status, job_id), *_ = rows
    return {"id": id_, "item": item, "quantity": quantity, "status": status, "job_id": job_id}


# -- the web app -------------------------------------------------------------------


def web_app(store: Store) -> Starlette:
    async def create_order(request: Request) -> JSONResponse:
        body = await request.json()
        order_id, item, quantity = body.get("id"), body.get("item"), body.get("quantity", 1)
        if not (isinstance(order_id, str) and order_id and isinstance(item, str) and item):
            return JSONResponse({"detail": "give an id and an item"}, status_code=422)
        if not (isinstance(quantity, int) and quantity >= 1):
            return JSONResponse({"detail": "quantity is a positive integer"}, status_code=422)
        try:
            async with store.transaction() as tx:
                job_id = await tx.enqueue("orders", {"order_id": order_id})
                await tx.execute(
                    sql(
                        "INSERT INTO orders (id, item, quantity, status, job_id)"
                        " VALUES (?, ?, ?, 'new', ?)"
                    ),
                    (order_id, item, quantity, job_id),
                )
        except DatabaseError:
            # The INSERT failed, so the block rolled back: the job is gone with it.
            if await find_order(store, order_id) is not None:
                return JSONResponse({"detail": f"order {order_id} already exists"}, 409)
            raise
        return JSONResponse({"id": order_id, "job_id": job_id}, status_code=201)

    async def read_order(request: Request) -> JSONResponse:
        order_id = request.path_params["order_id"]
        order = await find_order(store, order_id)
        if order is None:
            return JSONResponse({"detail": f"no order {order_id}"}, status_code=404)
        return JSONResponse(order)

    async def queue_stats(request: Request) -> JSONResponse:
        stats = await store.queue("orders").stats()
        return JSONResponse(
            {
                "ready": stats.ready,
                "scheduled": stats.scheduled,
                "processing": stats.processing,
                "dead": stats.dead,
                "paused": stats.paused,
            }
        )

    return Starlette(
        routes=[
            Route("/orders", create_order, methods=["POST"]),
            Route("/orders/{order_id}", read_order),
            Route("/queue", queue_stats),
        ]
    )


# -- the worker --------------------------------------------------------------------


async def process_order(store: Store, job: Job) -> None:
    order_id = job.payload["order_id"]
    # ... charge, ship, send the e-mail: the real work goes here ...
    async with store.transaction() as tx:  # idempotent: a job runs at least once
        await tx.execute(sql("UPDATE orders SET status = 'processed' WHERE id = ?"), (order_id,))
    # Returning acks the job; raising retries it with backoff.


# -- the process -------------------------------------------------------------------


async def main(bind: str) -> None:
    async with open_store() as store:
        async with store.transaction() as tx:
            await tx.execute(CREATE_ORDERS)
        drain = Drain()
        stopping = trio.Event()  # hypercorn's shutdown trigger

        async def on_signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    if not drain.started:
                        log.info("%s: stopping", signal.Signals(signum).name)
                        stopping.set()
                        drain.start(timeout=DRAIN_TIMEOUT)
                    else:
                        drain.now()

        async def work() -> None:
            report = await store.queue("orders").work(
                functools.partial(process_order, store), concurrency=4, drain=drain
            )
            log.info("worker drained: %d acked, %d retried", report.acked, report.retried)

        config = Config()
        config.bind = [bind]
        config.errorlog = logging.getLogger("hypercorn.error")  # through logging, as ours
        # Starlette is an ASGI app; its type hints and hypercorn's spell ASGI differently.
        app = cast(ASGIFramework, web_app(store))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(on_signals)
            async with trio.open_nursery() as running:  # ends once both have stopped
                running.start_soon(work)
                running.start_soon(
                    functools.partial(serve, app, config, shutdown_trigger=stopping.wait)
                )
            nursery.cancel_scope.cancel()  # stop listening for signals


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:8000", help="HOST:PORT to listen on")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    trio.run(main, parser.parse_args().bind)
