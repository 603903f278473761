"""The worker's handlers, run by the alkstore command in a process of its own
(no Django needed there):

    alkstore worker orders.tasks:handlers --db app.db
"""

from dataclasses import dataclass

from alkstore import Job


@dataclass
class OrderJob:
    order_id: str


async def process_order(job: Job) -> None:
    order_id = job.payload_as(OrderJob).order_id
    # ... charge, ship, send the e-mail: the real work goes here ...
    mark = "UPDATE orders SET status = 'processed' WHERE id = " + (
        "?" if job.store.engine == "sqlite" else "$1"
    )
    async with job.store.transaction() as tx:  # the worker's own store
        await tx.execute(mark, (order_id,))
    # Returning acks the job; raising retries it with backoff.


handlers = {"orders": process_order}
