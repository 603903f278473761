"""The dashboard's pages over a big queue: how long each takes to render.

    python bench/dashboard_pages.py [--jobs 1000000] [--engine sqlite|postgres|both]
                                    [--samples 5] [--dsn DSN]

Fills a queue with ``--jobs`` ready jobs (``enqueue_batch``, 10,000 a
transaction), plus 2,000 dead letters and 2,000 acked jobs kept in history
(so every listing has something to find), then times requests through the
dashboard's ASGI app (httpx's ASGI transport, no network): the overview,
the queue page's first page, a deep page (``after`` an id 90% of the way
in), the dead letters, one job, and the live endpoint's refresh of the
queue page. Also the read models those pages call, alone: the queue's
summary (its counts), one page of ``list_jobs`` first and deep, and its
throughput. Prints the median and the slowest of ``--samples`` runs, in ms.

On PostgreSQL (``--dsn``, default ``$ALKSTORE_DSN``) the queue lives in a
fresh schema ``alk_bench_<hex>``, analyzed after the fill and dropped at the
end. SQLite works in a temporary file.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import trio

from alkstore import Store
from alkstore.dashboard import create_app
from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite

DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
CHUNK = 10_000
QUEUE = "big"


@asynccontextmanager
async def opened(engine: str, dsn: str) -> AsyncIterator[Store]:
    if engine == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            async with open_sqlite(os.path.join(tmp, "bench.db")) as store:
                yield store
        return
    schema = f"alk_bench_{uuid.uuid4().hex[:10]}"
    try:
        async with open_postgres(dsn, options=PostgresOptions(schema=schema)) as store:
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def fill(store: Store, jobs: int, engine: str, dsn: str) -> list[int]:
    """``jobs`` ready jobs, 2,000 dead and 2,000 acked into history; the ids
    of the ready ones' first chunk and the deep page's ``after``."""
    q = store.queue(QUEUE, max_attempts=1)
    await q.set_retention(history=86_400, dead=None)
    started = time.perf_counter()
    side = min(2_000, max(1, jobs // 10))
    await q.enqueue_batch([{"n": -i} for i in range(2 * side)], priority=10)
    for batch in range(0, 2 * side, 500):
        claimed = await q.claim_batch("bench", 500)
        for i, job in enumerate(claimed):
            await (job.ack() if (batch + i) % 2 else job.fail("ValueError: benchmark"))
    first_id = 0
    deep_after = 0
    done = 0
    while done < jobs:
        n = min(CHUNK, jobs - done)
        ids = await q.enqueue_batch([{"n": done + i, "to": "user@example.com"} for i in range(n)])
        first_id = first_id or ids[0]
        if done <= jobs * 9 // 10 < done + n:
            deep_after = ids[jobs * 9 // 10 - done]
        done += n
    took = time.perf_counter() - started
    print(f"  filled {jobs:,} jobs (+{side:,} dead, +{side:,} acked) in {took:.1f} s")
    if engine == "postgres":
        schema = store._core.dialect.schema
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'ANALYZE "{schema}".jobs')
            conn.execute(f'ANALYZE "{schema}".dead')
            conn.execute(f'ANALYZE "{schema}".history')
    return [first_id, deep_after]


async def timed(call: Callable[[], Awaitable[Any]], samples: int) -> tuple[float, float]:
    """Median and slowest of ``samples`` calls, in ms (after one warm-up)."""
    await call()
    took = []
    for _ in range(samples):
        started = time.perf_counter()
        await call()
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took), max(took)


async def run(engine: str, jobs: int, samples: int, dsn: str) -> None:
    print(f"{engine}: {jobs:,} ready jobs in queue {QUEUE!r}")
    async with opened(engine, dsn) as store:
        _, deep_after = await fill(store, jobs, engine, dsn)
        dead = (await store.queue(QUEUE).list_jobs(state="dead", limit=1))[0].id
        app = create_app(store, allow_actions=True)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:

            def page(path: str, **params: Any) -> Callable[[], Awaitable[Any]]:
                async def get() -> None:
                    response = await c.get(path, params=params)
                    assert response.status_code == 200, (path, response.status_code)

                return get

            q = store.queue(QUEUE)
            rows: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("page: overview /", page("/")),
                ("page: queue, first page", page("/queue", name=QUEUE)),
                ("page: queue, deep page", page("/queue", name=QUEUE, after=deep_after)),
                ("page: queue, ready, deep", page("/queue", name=QUEUE, state="ready",
                                                  after=deep_after)),
                ("page: dead letters", page("/queue/dead", name=QUEUE)),
                ("page: one job", page(f"/job/{dead}")),
                ("live: queue page refresh", page("/live", view="queue", name=QUEUE)),
                ("read: Queue.summary()", q.summary),
                ("read: list_jobs(limit=51)", lambda: q.list_jobs(limit=51)),
                ("read: list_jobs deep", lambda: q.list_jobs(limit=51, after=deep_after)),
                ("read: Queue.throughput()", q.throughput),
            ]  # fmt: skip
            print(f"  {'':28} {'median ms':>10} {'max ms':>10}")
            for name, call in rows:
                median, worst = await timed(call, samples)
                print(f"  {name:28} {median:10.1f} {worst:10.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--engine", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--dsn", default=DSN)
    args = parser.parse_args()
    engines = ("sqlite", "postgres") if args.engine == "both" else (args.engine,)
    for engine in engines:
        trio.run(run, engine, args.jobs, args.samples, args.dsn)


if __name__ == "__main__":
    main()
