"""Claim cost against queue depth: it must not grow with the jobs waiting.

    python bench/claim_scaling.py [--depths 1000,10000,100000] [--engine sqlite|postgres]
                                  [--keys 1000] [--hot 1000] [--rate 1000]

For each depth, fills a queue with that many ready jobs (plus as many
scheduled for later and as many dead letters, which claims must not walk
over), then times claim_one+ack of 500 jobs, and claim_batch(100) +
ack_batch of 50 batches. Prints microseconds per job for each and the ratio
to the smallest depth (1.00 = flat).

``--keys K`` runs the same on a limited queue: every job (ready and
scheduled) gets one of K concurrency keys, dealt round robin, and the queue
allows one live claim per key (``set_limits(concurrency_per_key=1)``), so a
batch of 100 takes the first job of 100 keys. Compare with the same depths
without ``--keys`` (the plain claim).

``--hot H`` (with ``--keys``) is the limited claim's worst case: H more jobs
of one key, ahead of everything in claim order (priority 9), whose key is
full (one of them is claimed and never settled), so every limited claim
walks past all of them before it finds a job with room: its cost grows with
H, not with the backlog behind.

``--rate N`` puts a rate on the queue instead of a concurrency limit:
``Rate(N, per=3600 s)``, never reached in the run, so what it measures is
the rate's bookkeeping (a count of the window, a claim log row per job, the
pruning): with N at or above the samples, the window holds up to all the
run's claims.

On PostgreSQL (``--engine postgres``, ``--dsn``, default ``$ALKSTORE_DSN``)
each depth gets a fresh schema, dropped afterwards; the jobs table is never
analyzed before the claims, as for a new store that just backed up. Each
claim+ack is two commits there, so the figure is mostly the disk's flush time:
what matters is the ratio.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
import trio

from alkstore import Rate, Store
from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite

DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@asynccontextmanager
async def opened(location: str, dsn: str | None) -> AsyncIterator[Store]:
    if dsn is None:
        async with open_sqlite(location) as store:
            yield store
        return
    try:
        async with open_postgres(dsn, options=PostgresOptions(schema=location)) as store:
            yield store
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{location}" CASCADE')


BATCH = 100


async def measure(
    location: str,
    dsn: str | None,
    depth: int,
    samples: int,
    batches: int,
    keys: int,
    hot: int = 0,
    rate: int = 0,
) -> tuple[float, float]:
    async with opened(location, dsn) as store:
        q = store.queue("bench", max_attempts=1)
        total = depth + samples + batches * BATCH + min(depth, 1000)
        if keys:
            await q.set_limits(concurrency_per_key=1)
        if rate:
            await q.set_limits(rate=Rate(rate, per=3600))
        for start in range(0, total, 1000):
            count = min(1000, total - start)
            if not keys:
                await q.enqueue_batch([{"i": i} for i in range(count)])
                await q.enqueue_batch([{"later": i} for i in range(count)], delay=3600)
                continue
            async with store.transaction() as tx:
                for i in range(start, start + count):
                    await tx.enqueue(q, {"i": i}, concurrency_key=f"k{i % keys}")
                    await tx.enqueue(q, {"later": i}, concurrency_key=f"k{i % keys}", delay=3600)
        # Dead letters: claim and fail a slice of the backlog.
        dead = await q.claim_batch("setup", min(depth, 1000))
        for job in dead:
            await job.fail("setup")
        if hot:
            for start in range(0, hot + 1, 1000):
                count = min(1000, hot + 1 - start)
                await q.enqueue_batch([{"hot": i} for i in range(count)], concurrency_key="hot",
                                      priority=9)  # fmt: skip
            held = await q.claim_one("holder")  # fills the hot key, never settled
            assert held is not None and held.payload.get("hot") == 0
        t = time.perf_counter()
        for _ in range(samples):
            job = await q.claim_one("w")
            assert job is not None
            await job.ack()
        single = (time.perf_counter() - t) / samples * 1e6
        t = time.perf_counter()
        for _ in range(batches):
            jobs = await q.claim_batch("w", BATCH)
            assert len(jobs) == BATCH
            await q.ack_batch([j.id for j in jobs], "w")
        batch = (time.perf_counter() - t) / (batches * BATCH) * 1e6
        return single, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--depths", default="1000,10000,100000")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--keys", type=int, default=0, help="concurrency keys, limit 1 each")
    parser.add_argument("--hot", type=int, default=0, help="jobs of one full key ahead of all")
    parser.add_argument("--rate", type=int, default=0, help="a rate of N claims an hour")
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    results = []
    dsn = args.dsn if args.engine == "postgres" else None
    with tempfile.TemporaryDirectory() as tmp:
        for depth in depths:
            location = (
                os.path.join(tmp, f"d{depth}.db")
                if dsn is None
                else f"alk_bench_{uuid.uuid4().hex[:10]}"
            )
            single, batch = trio.run(
                measure, location, dsn, depth, args.samples, args.batches, args.keys,
                args.hot, args.rate,
            )
            results.append((depth, single, batch))
    base_single, base_batch = results[0][1], results[0][2]
    engine = "SQLite" if dsn is None else "PostgreSQL"
    limited = f", {args.keys:,} keys, limit 1 each" if args.keys else ", no limits"
    if args.hot:
        limited += f", {args.hot:,} jobs of a full key first"
    if args.rate:
        limited = f", a rate of {args.rate:,} claims an hour"
    print(f"{engine}, trio{limited}: microseconds per job")
    print(f"{'ready jobs':>12}{'+ scheduled':>13}{'claim_one+ack':>15}{'ratio':>8}"
          f"{'batch of 100':>14}{'ratio':>8}")  # fmt: skip
    for depth, single, batch in results:
        print(f"{depth:>12,}{depth:>13,}{single:>15.0f}{single / base_single:>8.2f}"
              f"{batch:>14.1f}{batch / base_batch:>8.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
