"""``Outbox``: deliver to the outside world exactly when your transaction commits."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Unpack

from ..protocol.machines.worker import settle_bound
from ..protocol.plans import outbox as plans
from ..protocol.plans import queues
from ..protocol.values import codec
from ..protocol.values.errors import AlkstoreError
from ..protocol.values.names import check_identifier, outbox_queue_name
from ..protocol.values.types import EnqueueOptions, JobInfo, QueueOptions, QueueStats, WorkerReport
from . import ops
from .queue import Job, Queue
from .worker import check_handler, default_worker_id, log_refused_acks, retry_failed

if TYPE_CHECKING:
    from .store import Store

Deliver = Callable[[codec.JSON], Awaitable[Any]]

# Outbox deliveries log where the worker's jobs do (see docs/queues.md).
log = logging.getLogger("alkstore.worker")


class Outbox(ops.OutboxHandle):
    """Messages to deliver, backed by the reserved queue ``__alkstore_outbox:{name}``.

    Enqueue inside a transaction (``tx.outbox_enqueue``) so the message exists
    exactly when your own writes commit; ``run_once``/``work`` deliver it with
    retries, backoff and dead letters.
    """

    def __init__(self, store: Store, name: str, options: QueueOptions) -> None:
        self.name = name
        self.queue: Queue = Queue(store, outbox_queue_name(name), options)

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
        store = queue._store
        run = plans.Batch()
        telemetry = store._telemetry
        try:
            plan = plans.claim(
                store._dialect, queue.name, wid, n, store._now_us(),
                queue._options.visibility_timeout_us, run,
            )  # fmt: skip
            claiming = store._run(plan)
            if telemetry is not None:
                claiming = telemetry.claim(queue.name, wid, n, claiming)
            for record in await claiming:
                job = Job(queue, record)
                try:
                    if telemetry is None:
                        await deliver(job.payload)
                    else:
                        await telemetry.process(job, lambda j: deliver(j.payload))
                except Exception as exc:
                    run.failed(job.id, exc)
                    await retry_failed(job, exc)
                    run.retried(job.id)
                else:
                    run.delivered(job.id)
            delivered = run.to_ack()
            if not delivered:
                return 0
            settled = await store._run(
                plans.settle(store._dialect, wid, run, store._origin, store._now_us())
            )
            run.finished()
            log_refused_acks(queue.name, delivered, settled.acked)
            if telemetry is not None:
                telemetry.acked(queue.name, len(settled.acked))
            return len(settled.acked)
        except BaseException:
            if run.unsettled():
                await self._settle_stopped(run, wid)
            raise

    async def _settle_stopped(self, run: plans.Batch, wid: str) -> None:
        """A run stopped part way: settle what it claimed (see ``run_once``),
        shielded, but no longer than the claims last (plus a round trip):
        past that an ack or hand-back would be refused anyway."""
        queue = self.queue
        store = queue._store
        bound = settle_bound(store._now_us(), run.open_records())
        with store._runtime.shield(bound) as scope:
            try:
                for record, error in run.to_retry():
                    await retry_failed(Job(queue, record), error)
                    run.retried(record.id)
                delivered = run.to_ack()
                if delivered or run.to_release():
                    plan = plans.settle(store._dialect, wid, run, store._origin, store._now_us())
                    settled = await store._run(plan)
                    log_refused_acks(queue.name, delivered, settled.acked)
                    log.debug("outbox %s: a stopped run acked %d delivered and handed back %d "
                              "undelivered message(s)", self.name, len(settled.acked),
                              settled.released)  # fmt: skip
                run.finished()
            except AlkstoreError:
                log.warning("outbox %s: a stopped run could not settle its messages; delivered "
                            "ones are delivered again, the rest return, once their claims "
                            "lapse", self.name, exc_info=True)  # fmt: skip
        if scope.cancelled_caught:
            log.warning("outbox %s: a stopped run could not settle its messages within %.1f s; "
                        "unless that commits, delivered ones are delivered again and the rest "
                        "return once their claims lapse", self.name, bound)  # fmt: skip

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
