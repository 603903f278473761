"""Rule: a paused queue accepts enqueues and gives no claims, to anyone,
until it is resumed; resuming wakes its workers (contract extension: pause,
on every backend)."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import Job, QueueStats, Store

from . import aio
from .helpers import SOON


@pytest.mark.producer
async def test_a_paused_queue_takes_jobs_and_gives_none_until_resumed(store: Store) -> None:
    q, other = store.queue("q"), store.queue("other")
    assert await q.is_paused() is False
    await q.pause()
    await q.pause()  # pausing a paused queue changes nothing
    assert await q.is_paused() is True
    first = await q.enqueue("a")
    await q.enqueue_batch(["b", "c"])
    await other.enqueue("x")
    assert await q.claim_one("w") is None
    assert await q.claim_batch("w", 10) == []
    assert await q.stats() == QueueStats(ready=3, scheduled=0, processing=0, dead=0, paused=True)
    # Only that queue: another one, and a new handle on the same name, agree.
    assert (await other.claim_one("w")) is not None
    assert await store.queue("q").is_paused() is True

    await q.resume()
    assert await q.is_paused() is False
    assert (await q.stats()).paused is False
    jobs = await q.claim_batch("w", 10)
    assert len(jobs) == 3 and jobs[0].id == first


@pytest.mark.producer
async def test_resuming_a_queue_never_paused_changes_nothing(store: Store) -> None:
    q = store.queue("q")
    await q.resume()
    await q.enqueue(1)
    assert await q.is_paused() is False
    assert (await q.claim_one("w")) is not None


@pytest.mark.producer
async def test_a_worker_on_a_paused_queue_waits_and_resume_wakes_it(store: Store) -> None:
    """The worker claims nothing while paused (its 60 s poll never comes in
    the test) and runs the jobs as soon as the queue is resumed."""
    q = store.queue("q")
    await q.pause()
    done: list[Any] = []
    all_done = aio.event()

    async def handler(job: Job) -> None:
        done.append(job.payload)
        if len(done) == 2:
            all_done.set()

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, poll_interval=60.0, task_status=task_status)

    async with aio.open_task_group() as group:
        await group.start(worker)
        await q.enqueue(1)  # the enqueue's wake finds the queue paused
        await aio.sleep(0.3)
        assert done == []
        await q.enqueue(2)
        await aio.sleep(0.1)
        assert done == []
        await q.resume()
        async with aio.fail_after(SOON):
            await all_done.wait()
        group.cancel()
    assert sorted(done) == [1, 2]
