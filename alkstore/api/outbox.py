"""``Outbox``: deliver to the outside world exactly when your transaction commits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..protocol import codec
from ..protocol.names import outbox_queue_name
from ..protocol.types import JobInfo, QueueOptions, QueueStats
from .queue import Job, Queue
from .worker import check_handler, default_worker_id, retry_failed

if TYPE_CHECKING:
    from .store import Store

Deliver = Callable[[codec.JSON], Awaitable[Any]]


class Outbox:
    """Messages to deliver, backed by the reserved queue ``__alkstore_outbox:{name}``.

    Enqueue inside a transaction (``tx.outbox_enqueue``) so the message exists
    exactly when your own writes commit; ``run_once``/``work`` deliver it with
    retries, backoff and dead letters.
    """

    def __init__(self, store: Store, name: str, options: QueueOptions) -> None:
        self.name = name
        self.queue = Queue(store, outbox_queue_name(name), options)

    def __repr__(self) -> str:
        return f"Outbox({self.name!r})"

    async def enqueue(self, payload: codec.JSON, **options: Any) -> int:
        return await self.queue.enqueue(payload, **options)

    async def run_once(
        self, deliver: Deliver, *, batch: int = 100, worker_id: str | None = None
    ) -> int:
        """Claim up to ``batch`` messages and deliver each; returns how many succeeded.

        Successes are acked together; a failure is retried with backoff, or
        dead-lettered once its attempts are spent.
        """
        check_handler(deliver, "deliver")
        wid = default_worker_id() if worker_id is None else worker_id
        jobs = await self.queue.claim_batch(wid, batch)
        delivered: list[int] = []
        for job in jobs:
            try:
                await deliver(job.payload)
            except Exception as exc:
                await retry_failed(job, exc)
            else:
                delivered.append(job.id)
        if not delivered:
            return 0
        return await self.queue.ack_batch(delivered, wid)

    async def work(self, deliver: Deliver, **options: Any) -> None:
        """Deliver continuously, woken by enqueues (see ``Queue.work``)."""
        check_handler(deliver, "deliver")

        async def handler(job: Job) -> None:
            await deliver(job.payload)

        await self.queue.work(handler, **options)

    async def stats(self) -> QueueStats:
        return await self.queue.stats()

    async def dead_letters(self, limit: int = 100) -> list[JobInfo]:
        return await self.queue.dead_letters(limit)

    async def requeue_dead(self, job_id: int) -> bool:
        return await self.queue.requeue_dead(job_id)

    async def purge_dead(self, before: datetime | None = None) -> int:
        return await self.queue.purge_dead(before)
