"""``alkstore.otel``'s gauges and the metrics that are not a span's, on
every backend: queue depth and the oldest ready job's age, consumer lag,
wake latency, the sweep's burials, and the sampling task that keeps the
gauges fresh."""

from __future__ import annotations

from typing import Any

import alkstore.otel
from alkstore import Job, ManualClock, Store
from tests.backends import Backend
from tests.contract import aio
from tests.contract.helpers import wait_until

from .conftest import Capture


def depth(capture: Capture, queue: str) -> dict[str, int]:
    return {
        state: capture.value("alkstore.queue.depth", queue=queue, state=state)
        for state in ("ready", "scheduled", "processing", "dead")
    }


async def test_queue_depth_and_the_oldest_ready_jobs_age(
    store: Store, clock: ManualClock, capture: Capture
) -> None:
    """Sampled for the queues named to ``instrument``: the counts by state,
    as ``Queue.stats`` gives them, and how long the oldest ready job has
    been due (0 when none is)."""
    telemetry = alkstore.otel.instrument(
        store, meter_provider=capture.meter_provider, queues=["q"], refresh_interval=3600
    )
    try:
        q = store.queue("q", max_attempts=1)
        await q.enqueue("first")
        clock.advance(2)
        await q.enqueue("second")
        await q.enqueue("later", delay=60)
        await q.enqueue("doomed")
        clock.advance(1.5)
        await telemetry.refresh()
        assert depth(capture, "q") == {"ready": 3, "scheduled": 1, "processing": 0, "dead": 0}
        assert capture.value("alkstore.queue.oldest_ready.age", queue="q") == 3.5
        (first,) = await q.claim_batch("w", 1)
        (second,) = await q.claim_batch("w", 1)
        await second.fail("no")
        await telemetry.refresh()
        assert depth(capture, "q") == {"ready": 1, "scheduled": 1, "processing": 1, "dead": 1}
        assert capture.value("alkstore.queue.oldest_ready.age", queue="q") == 1.5
        await first.ack()
        (doomed,) = await q.claim_batch("w", 1)
        await doomed.ack()
        await telemetry.refresh()
        assert capture.value("alkstore.queue.oldest_ready.age", queue="q") == 0.0
        assert capture.value("alkstore.queue.depth", queue="elsewhere", state="ready") is None
    finally:
        telemetry.close()
    # Closed: its gauges are no longer reported.
    assert capture.points("alkstore.queue.depth") == []


def lag(capture: Capture, consumer: str) -> int | None:
    value: int | None = capture.value("alkstore.stream.consumer.lag", stream="s", consumer=consumer)
    return value


async def test_consumer_lag_of_named_and_subscribed_consumers(
    store: Store, capture: Capture
) -> None:
    """Lag is ``head_offset - get_offset(consumer)``: for the consumers
    named to ``instrument``, and for those subscribed in this process while
    they are."""
    telemetry = alkstore.otel.instrument(
        store, meter_provider=capture.meter_provider, consumers=[("s", "audit")],
        refresh_interval=3600,
    )  # fmt: skip
    try:
        s = store.stream("s")
        for i in range(5):
            await s.publish(i)
        await s.save_offset("audit", 2)
        async with s.subscribe("billing") as events:
            await events.recv()
            await events.recv()
            await events.save_offset()
            await telemetry.refresh()
            assert lag(capture, "audit") == 3
            assert lag(capture, "billing") == 3
        await telemetry.refresh()
        assert lag(capture, "billing") is None
        assert lag(capture, "audit") == 3
    finally:
        telemetry.close()


async def test_a_workers_queue_is_sampled_by_the_stores_task_while_it_runs(
    store: Store, capture: Capture
) -> None:
    """No ``refresh()`` here: the store's own task samples the queue a
    worker serves, from when the worker starts, every ``refresh_interval``."""
    telemetry = alkstore.otel.instrument(
        store, meter_provider=capture.meter_provider, refresh_interval=0.05
    )
    try:
        q = store.queue("served")
        await q.enqueue(1, delay=3600)
        assert capture.value("alkstore.queue.depth", queue="served", state="scheduled") is None

        async def handler(job: Job) -> None:
            pass

        async def worker(task_status: Any = None) -> None:
            await q.work(handler, task_status=task_status)

        async with aio.open_task_group() as group:
            await group.start(worker)
            await wait_until(
                lambda: capture.value("alkstore.queue.depth", queue="served", state="scheduled")
                == 1
            )
            await q.enqueue(2, delay=3600)
            await wait_until(
                lambda: capture.value("alkstore.queue.depth", queue="served", state="scheduled")
                == 2
            )
            group.cancel()
        # The worker has stopped: the next sample leaves its queue out.
        await wait_until(lambda: capture.points("alkstore.queue.depth") == [])
    finally:
        telemetry.close()


async def test_wake_latency_is_from_due_to_claim_for_jobs_due_while_the_worker_idled(
    store: Store, clock: ManualClock, capture: Capture
) -> None:
    """The worker found its queue empty (here: paused), then a job became
    due; 1.5 s later (on the store's clock) the resume woke the worker,
    which claimed it. Jobs that were already waiting when a worker looked
    are not wake latency and are not recorded."""
    telemetry = alkstore.otel.instrument(store, meter_provider=capture.meter_provider)
    q = store.queue("w")
    await q.enqueue("waiting")  # due before the worker's first look
    done: list[Any] = []

    async def handler(job: Job) -> None:
        done.append(job.payload)

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, poll_interval=60.0, task_status=task_status)

    try:
        async with aio.open_task_group() as group:
            await group.start(worker)
            await wait_until(lambda: done == ["waiting"])
            assert capture.points("alkstore.wake.latency") == []
            await q.pause()
            await aio.sleep(0.05)  # any claim in flight finds nothing: the worker idles
            await q.enqueue("woken")
            clock.advance(1.5)
            await q.resume()
            await wait_until(lambda: done == ["waiting", "woken"])
            group.cancel()
        (point,) = capture.points("alkstore.wake.latency")
        assert point.count == 1 and point.sum == 1.5
        assert dict(point.attributes)["messaging.destination.name"] == "w"
    finally:
        telemetry.close()


async def test_the_sweeps_burials_are_counted_dead_with_their_reason(
    store: Store, clock: ManualClock, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    q = store.queue("s")
    await q.enqueue(1, expires=1)
    await q.enqueue(2, expires=1)
    clock.advance(2)
    assert await q.sweep_expired() == 2
    assert capture.value("alkstore.jobs.dead", queue="s", reason="expired") == 2


async def test_a_closed_stores_gauges_are_no_longer_reported(
    backend: Backend, location: str, capture: Capture
) -> None:
    async with backend.open(location) as store:
        telemetry = alkstore.otel.instrument(
            store, meter_provider=capture.meter_provider, queues=["q"], refresh_interval=0.05
        )
        await store.queue("q").enqueue(1)
        await wait_until(lambda: capture.value("alkstore.queue.depth", queue="q", state="ready"))
    assert capture.points("alkstore.queue.depth") == []
    assert capture.points("alkstore.queue.oldest_ready.age") == []
    telemetry.close()
