"""``Outbox``: deliver to the outside world exactly when your transaction commits."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Unpack

from ..protocol.machines.worker import WorkerPolicy
from ..protocol.plans import queues
from ..protocol.values import codec
from ..protocol.values.names import check_identifier, outbox_queue_name
from ..protocol.values.types import EnqueueOptions, JobInfo, QueueOptions, QueueStats, WorkerReport
from ..services.worker import Worker, check_handler, default_worker_id
from .core import ops
from .core.handle import StoreCore
from .job import Job, StoreHandle
from .queue import Queue

Deliver = Callable[[codec.JSON], Awaitable[Any]]


class Outbox(ops.OutboxHandle):
    """Messages to deliver, backed by the reserved queue ``__alkstore_outbox:{name}``.

    Enqueue inside a transaction (``tx.outbox_enqueue``) so the message exists
    exactly when your own writes commit; ``run_once``/``work`` deliver it with
    retries, backoff and dead letters.
    """

    def __init__(
        self, core: StoreCore, owner: StoreHandle, name: str, options: QueueOptions
    ) -> None:
        self.name = name
        self.queue: Queue = Queue(core, owner, outbox_queue_name(name), options)

    def __repr__(self) -> str:
        return f"Outbox({self.name!r})"

    async def enqueue(self, payload: codec.JSON, **options: Unpack[EnqueueOptions]) -> int:
        """Add a message outside any transaction (``Queue.enqueue``'s options); returns its id.
        Usually you want ``tx.outbox_enqueue`` instead."""
        return await self.queue.enqueue(payload, **options)

    async def run_once(
        self, deliver: Deliver, *, batch: int = 100, worker_id: str | None = None
    ) -> int:
        """Claim up to ``batch`` messages and deliver each; returns how many succeeded.

        Successes are acked together; a failure is retried with backoff, or
        dead-lettered once its attempts are spent.

        Cancelled (or stopped by an error) part way, it still settles every
        message it claimed by what happened to it, shielded for at most as
        long as their claims last: delivered ones (``deliver`` returned) are
        acked, failed ones retried, and the rest (not reached, or ``deliver``
        did not finish) handed back at once with their attempt refunded;
        then the cancellation (or error) propagates.
        """
        check_handler(deliver, "deliver")
        wid = check_identifier(default_worker_id() if worker_id is None else worker_id,
                               "worker id")  # fmt: skip
        n = queues.check_limit(batch, "batch")
        queue = self.queue
        vt = queue._options.visibility_timeout_us
        policy = WorkerPolicy.of(concurrency=1, visibility_timeout_us=vt, poll_interval_us=vt)

        async def handler(job: Job) -> None:
            await deliver(job.payload)

        # The worker's machinery, one batch: its settler acks the delivered
        # messages in one statement and retries the failed ones, and its
        # shutdown settles what a cancellation interrupted.
        core = queue._core
        worker = Worker(core, queue.name, queue._options, handler, queue._job, policy, wid)
        return (await worker.run_once(n)).acked

    async def work(self, deliver: Deliver, **options: Any) -> WorkerReport:
        """Deliver continuously, woken by enqueues, until cancelled or
        drained (``Queue.work``'s options, ``drain=`` included)."""
        check_handler(deliver, "deliver")

        async def handler(job: Job) -> None:
            await deliver(job.payload)

        return await self.queue.work(handler, **options)

    async def stats(self) -> QueueStats:
        """The outbox's counts (``Queue.stats``)."""
        return await self.queue.stats()

    async def dead_letters(self, limit: int = 100) -> list[JobInfo]:
        """Up to ``limit`` messages whose delivery gave up (``Queue.dead_letters``)."""
        return await self.queue.dead_letters(limit)

    async def requeue_dead(self, job_id: int) -> bool:
        """Deliver a dead message again (``Queue.requeue_dead``)."""
        return await self.queue.requeue_dead(job_id)

    async def purge_dead(self, before: datetime | None = None) -> int:
        """Delete dead messages (``Queue.purge_dead``); returns how many."""
        return await self.queue.purge_dead(before)
