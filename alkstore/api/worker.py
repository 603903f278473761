"""The worker runtime behind ``Queue.work``.

Claims in batches when woken, runs the handler with bounded concurrency, acks
on return, retries with backoff on exception, heartbeats long jobs, and on
cancellation hands back at once whatever it has not finished.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..protocol.errors import AlkstoreError
from ..protocol.names import queue_channel
from ..protocol.timeconv import US_PER_S, to_datetime
from ..protocol.worker import WorkerPolicy
from ..runner.runtime import Signal

if TYPE_CHECKING:
    from .queue import Job, Queue

log = logging.getLogger("alkstore.worker")


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


async def run_worker(
    queue: Queue,
    handler: Callable[[Job], Awaitable[Any]],
    *,
    concurrency: int,
    worker_id: str | None,
    poll_interval: float,
    sweep_interval: float | None,
    heartbeat_interval: float | None,
    task_status: Any,
) -> None:
    store = queue.store
    runtime = store.runtime
    vt = queue.options.visibility_timeout_us
    policy = WorkerPolicy(
        concurrency=concurrency,
        poll_interval_us=round(poll_interval * US_PER_S),
        sweep_interval_us=(
            min(30 * US_PER_S, vt // 2) if sweep_interval is None else round(sweep_interval * US_PER_S)
        ),
        heartbeat_interval_us=(
            vt // 3 if heartbeat_interval is None else round(heartbeat_interval * US_PER_S)
        ),
    )
    wid = worker_id or default_worker_id()
    slot = _Slot(runtime)

    async def run_one(job: Job) -> None:
        try:
            await _run_job(queue, job, handler, policy.heartbeat_interval_us / US_PER_S)
        finally:
            policy.finished()
            slot.free()

    async with store.subscribe_channel(queue_channel(queue.name)) as wakes:
        async with runtime.task_group() as group:
            if task_status is not None:
                task_status.started()
            while True:
                now = store.now_us()
                if policy.sweep_due(now):
                    await _guard(queue.sweep_expired(), "sweep")
                    policy.swept(now)
                want = policy.claim_size()
                if want > 0:
                    wakes.try_recv()  # consume: a wake from now on means new work
                    jobs = await _guard(queue.claim_batch(wid, want), "claim") or []
                    next_due = None
                    if len(jobs) < want:
                        due = await _guard(queue.next_due(), "next_due")
                        next_due = None if due is None else _us(due)
                    policy.claimed(len(jobs), want, next_due)
                    for job in jobs:
                        group.start_soon(run_one, job)
                    if len(jobs) == want and policy.claim_size() > 0:
                        continue
                timeout = policy.sleep_us(store.now_us()) / US_PER_S
                if policy.claim_size() > 0:
                    await wakes.recv_timeout(timeout)
                else:
                    await slot.wait(runtime, timeout)


async def _run_job(
    queue: Queue, job: Job, handler: Callable[[Job], Awaitable[Any]], heartbeat_every: float
) -> None:
    runtime = queue.store.runtime
    lost = False

    async def keep_alive(scope: Any) -> None:
        nonlocal lost
        while True:
            await runtime.sleep(heartbeat_every)
            if not await _guard(job.heartbeat(), "heartbeat"):
                # Someone else may own it now: stop working on it.
                lost = True
                scope.cancel()
                return

    try:
        async with runtime.task_group() as group:
            with runtime.cancel_scope() as scope:
                group.start_soon(keep_alive, scope)
                try:
                    await handler(job)
                finally:
                    group.cancel()
        if lost:
            log.warning("job %s on %s lost its claim while running", job.id, queue.name)
            return
        await _guard(job.ack(), "ack")
    except Exception as exc:
        log.debug("job %s on %s raised; retrying", job.id, queue.name, exc_info=True)
        await _guard(job.retry(error=exc), "retry")
    except BaseException:
        # Cancelled (shutdown): give the job back now rather than after its
        # visibility timeout, and return the attempt it did not get to finish.
        with runtime.shield():
            await _guard(job.release(refund=True), "release")
        raise


async def _guard(awaitable: Awaitable[Any], what: str) -> Any:
    """A worker outlives a failed round trip: log it; the job's claim will
    lapse and it will be claimed again."""
    try:
        return await awaitable
    except AlkstoreError:
        log.exception("worker %s failed", what)
        return None


def _us(value: Any) -> int:
    from ..protocol.timeconv import instant_us

    return instant_us(value)


class _Slot:
    """Signals the claim loop that a handler finished and a slot is free."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self._signal: Signal = runtime.signal()

    def free(self) -> None:
        self._signal.set()

    async def wait(self, runtime: Any, timeout: float) -> None:
        await runtime.wait_signal(self._signal, timeout)
        if self._signal.is_set():
            self._signal = runtime.signal()


__all__ = ["default_worker_id", "run_worker", "to_datetime"]
