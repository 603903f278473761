"""Rule (issue text): many workers over a small pool drain what concurrent
producers enqueue, each job processed exactly once when nothing crashes
(SKIP LOCKED claims hand out disjoint jobs; acks count only owned jobs)."""

from __future__ import annotations

from collections import Counter
from functools import partial

import trio

from alkstore import Job

from .pg import open_pg

JOBS = 5000
PRODUCERS = 2
WORKERS = 8
POOL = 4


async def test_eight_workers_four_connections_two_producers(schema: str) -> None:
    """Two producer tasks (their own store) enqueue 5,000 jobs, in batches
    and singly, while 8 worker tasks sharing one store with a pool of 4
    connections claim in batches (``claim_batch``), record each job they
    process, and ack (``ack_batch`` for most, ``Job.ack`` for some). Every
    job is processed exactly once, every ack finds its job still owned, and
    the queue ends empty."""
    processed: Counter[int] = Counter()
    enqueued: list[int] = []
    acked = 0
    async with (
        open_pg(schema, pool_size=POOL) as workers_store,
        open_pg(schema, pool_size=PRODUCERS) as producers_store,
    ):
        pq = producers_store.queue("work", visibility_timeout=60)
        wq = workers_store.queue("work", visibility_timeout=60)
        producing = trio.Event()

        async def producer(p: int) -> None:
            per = JOBS // PRODUCERS
            i = 0
            while i < per:
                if i % 500 == 0:  # some singles among the batches
                    enqueued.append(await pq.enqueue({"p": p, "i": i}))
                    i += 1
                    continue
                n = min(50, per - i)
                enqueued.extend(await pq.enqueue_batch([{"p": p, "i": i + k} for k in range(n)]))
                i += n

        async def worker(w: int) -> None:
            nonlocal acked
            wid = f"worker-{w}"
            while True:
                jobs: list[Job] = await wq.claim_batch(wid, 10)
                if not jobs:
                    if producing.is_set() and sum(processed.values()) >= JOBS:
                        return
                    await trio.sleep(0.002)
                    continue
                for job in jobs:
                    processed[job.id] += 1
                if w % 4 == 0:
                    for job in jobs:
                        assert await job.ack()
                    acked += len(jobs)
                else:
                    n = await wq.ack_batch([j.id for j in jobs], wid)
                    assert n == len(jobs)
                    acked += n

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for w in range(WORKERS):
                    nursery.start_soon(worker, w)
                async with trio.open_nursery() as producers:
                    for p in range(PRODUCERS):
                        producers.start_soon(producer, p)
                producing.set()
        assert len(enqueued) == len(set(enqueued)) == JOBS
        assert set(processed) == set(enqueued)
        assert max(processed.values()) == 1
        assert acked == JOBS
        stats = await wq.stats()
        assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)
        assert workers_store._core.executor._pool._total <= POOL


async def test_queue_work_with_concurrency_over_small_pool(schema: str) -> None:
    """``Queue.work(concurrency=8)`` on a store whose pool has 4
    connections, fed by 2 concurrent producers: 2,000 jobs each handled
    exactly once (the worker runtime acks on return), the queue drains."""
    total = 2000
    handled: Counter[int] = Counter()
    all_done = trio.Event()
    async with (
        open_pg(schema, pool_size=POOL) as workers_store,
        open_pg(schema, pool_size=PRODUCERS) as producers_store,
    ):
        q = workers_store.queue("work", visibility_timeout=60)

        async def handler(job: Job) -> None:
            handled[job.id] += 1
            await trio.lowlevel.checkpoint()
            if sum(handled.values()) >= total:
                all_done.set()

        async def producer(p: int) -> None:
            pq = producers_store.queue("work")
            for start in range(0, total // PRODUCERS, 40):
                await pq.enqueue_batch([{"p": p, "i": start + k} for k in range(40)])

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                await nursery.start(partial(q.work, handler, concurrency=8))
                for p in range(PRODUCERS):
                    nursery.start_soon(producer, p)
                await all_done.wait()
                with trio.fail_after(5):  # the last acks land
                    while True:
                        stats = await q.stats()
                        if stats.processing == stats.ready == 0:
                            break
                        await trio.sleep(0.01)
                nursery.cancel_scope.cancel()
        assert len(handled) == total
        assert max(handled.values()) == 1
        stats = await q.stats()
        assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)
