"""The worker's handlers, run by the alkstore command in a process of their own:

    alkstore worker tasks:handlers --driver asyncio --db app.db
"""

from dataclasses import dataclass

import db
from alkstore import Job


@dataclass
class OrderJob:
    order_id: str


async def process_order(job: Job) -> None:
    order = job.payload_as(OrderJob)
    # ... charge, ship, send the e-mail: the real work goes here ...
    await db.mark_processed(job.store, order.order_id)  # the worker's own store
    # Returning acks the job; raising retries it with backoff.


handlers = {"orders": {"handler": process_order, "concurrency": 4}}
