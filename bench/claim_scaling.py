"""Claim cost against queue depth: it must not grow with the jobs waiting.

    python bench/claim_scaling.py [--depths 1000,10000,100000]

For each depth, fills a queue with that many ready jobs (plus as many
scheduled for later and as many dead letters, which claims must not walk
over), then times claim_one+ack of 500 jobs. Prints microseconds per
claim+ack and the ratio to the smallest depth (1.00 = flat).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import trio

from alkstore.io_trio import open_sqlite


async def measure(path: str, depth: int, samples: int) -> float:
    async with open_sqlite(path) as store:
        q = store.queue("bench", max_attempts=1)
        total = depth + samples + min(depth, 1000)
        for start in range(0, total, 1000):
            count = min(1000, total - start)
            await q.enqueue_batch([{"i": i} for i in range(count)])
            await q.enqueue_batch([{"later": i} for i in range(count)], delay=3600)
        # Dead letters: claim and fail a slice of the backlog.
        dead = await q.claim_batch("setup", min(depth, 1000))
        for job in dead:
            await job.fail("setup")
        t = time.perf_counter()
        for _ in range(samples):
            job = await q.claim_one("w")
            assert job is not None
            await job.ack()
        return (time.perf_counter() - t) / samples * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--depths", default="1000,10000,100000")
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for depth in depths:
            path = os.path.join(tmp, f"d{depth}.db")
            results.append((depth, trio.run(measure, path, depth, args.samples)))
    base = results[0][1]
    print("SQLite, trio: claim_one + ack, microseconds per job")
    print(f"{'ready jobs':>12}{'+ scheduled':>13}{'us/job':>10}{'ratio':>8}")
    for depth, us in results:
        print(f"{depth:>12,}{depth:>13,}{us:>10.0f}{us / base:>8.2f}")


if __name__ == "__main__":
    main()
