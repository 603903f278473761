"""Orders on FastAPI (asyncio): each order and its job commit in one transaction.

    hypercorn main:app --bind 127.0.0.1:8000                    # or: uvicorn main:app
    alkstore worker tasks:handlers --driver asyncio --db app.db

README.md has the Postgres commands.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field

import db
from alkstore import DatabaseError, Store


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
    async with db.open_store() as store:  # one store for the process, closed at shutdown
        await db.create_tables(store)
        yield {"store": store}  # each request finds it in request.state


app = FastAPI(title="orders", lifespan=lifespan)


def get_store(request: Request) -> Store:
    store: Store = request.state.store
    return store


StoreDep = Annotated[Store, Depends(get_store)]


class NewOrder(BaseModel):
    id: str = Field(min_length=1, max_length=64)
    item: str = Field(min_length=1)
    quantity: int = Field(default=1, ge=1)


@app.post("/orders", status_code=201)
async def create_order(order: NewOrder, store: StoreDep) -> dict[str, Any]:
    try:
        async with store.transaction() as tx:
            job_id = await tx.enqueue("orders", {"order_id": order.id})
            await tx.execute(
                db.sql(
                    store,
                    "INSERT INTO orders (id, item, quantity, status, job_id)"
                    " VALUES (?, ?, ?, 'new', ?)",
                ),
                (order.id, order.item, order.quantity, job_id),
            )
    except DatabaseError:
        # The INSERT failed, so the block rolled back: the job is gone with it.
        if await db.find_order(store, order.id) is not None:
            raise HTTPException(409, f"order {order.id} already exists") from None
        raise
    return {"id": order.id, "job_id": job_id}


@app.get("/orders/{order_id}")
async def read_order(order_id: str, store: StoreDep) -> dict[str, Any]:
    order = await db.find_order(store, order_id)
    if order is None:
        raise HTTPException(404, f"no order {order_id}")
    return order


@app.get("/queue")
async def queue_stats(store: StoreDep) -> dict[str, Any]:
    stats = await store.queue("orders").stats()
    return {
        "ready": stats.ready,
        "scheduled": stats.scheduled,
        "processing": stats.processing,
        "dead": stats.dead,
        "paused": stats.paused,
    }
