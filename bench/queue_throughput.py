"""Queue throughput on SQLite through the trio driver, against the raw floor.

    python bench/queue_throughput.py [--jobs N]

The floor is plain sqlite3 doing the same row work (one INSERT, or one
UPDATE...RETURNING + DELETE) per transaction on one connection with the same
pragmas, no event loop: what any library on SQLite can at best approach.
Ratios are alkstore/floor (1.00 = as fast as the floor).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time

import trio

from alkstore.io_trio import open_sqlite


def floor_enqueue(path: str, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE j (id INTEGER PRIMARY KEY, q TEXT, p TEXT, s INT, v INT)")
    conn.execute("CREATE INDEX j_i ON j (q, s, v, id)")
    t = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO j (q, p, s, v) VALUES ('q', ?, 0, 0)", (str(i),))
        conn.execute("COMMIT")
    dt = time.perf_counter() - t
    conn.close()
    return n / dt


def floor_claim_ack(path: str, n: int, batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    t = time.perf_counter()
    done = 0
    while done < n:
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute(
            "UPDATE j SET s = 1 WHERE id IN (SELECT id FROM j WHERE q = 'q' AND s = 0 "
            "ORDER BY v, id LIMIT ?) RETURNING id",
            (batch,),
        ).fetchall()
        conn.execute("COMMIT")
        if not rows:
            break
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("DELETE FROM j WHERE id = ?", rows)
        conn.execute("COMMIT")
        done += len(rows)
    dt = time.perf_counter() - t
    conn.close()
    return done / dt


async def alkstore_run(path: str, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with open_sqlite(path) as store:
        q = store.queue("bench")
        t = time.perf_counter()
        for i in range(n):
            await q.enqueue({"i": i})
        out["enqueue (1 per tx)"] = n / (time.perf_counter() - t)

        t = time.perf_counter()

        async def producer(k: int) -> None:
            for i in range(k, n, 8):
                await q.enqueue({"i": i})

        async with trio.open_nursery() as nursery:
            for k in range(8):
                nursery.start_soon(producer, k)
        out["enqueue (8 producers)"] = n / (time.perf_counter() - t)

        t = time.perf_counter()
        done = 0
        while True:
            job = await q.claim_one("w")
            if job is None:
                break
            await job.ack()
            done += 1
        out["claim+ack (1 at a time)"] = done / (time.perf_counter() - t) if done else 0.0

        t = time.perf_counter()
        await q.enqueue_batch([{"i": i} for i in range(n)])
        done = 0

        async def consumer(k: int) -> None:
            nonlocal done
            while True:
                job = await q.claim_one(f"w{k}")
                if job is None:
                    return
                await job.ack()
                done += 1

        t = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for k in range(8):
                nursery.start_soon(consumer, k)
        out["claim+ack (8 consumers)"] = done / (time.perf_counter() - t)

        t = time.perf_counter()
        for start in range(0, n, 100):
            await q.enqueue_batch([{"i": i} for i in range(start, min(n, start + 100))])
        out["enqueue (batch of 100)"] = n / (time.perf_counter() - t)

        t = time.perf_counter()
        done = 0
        while True:
            jobs = await q.claim_batch("w", 100)
            if not jobs:
                break
            done += await q.ack_batch([j.id for j in jobs], "w")
        out["claim+ack (batch of 100)"] = done / (time.perf_counter() - t)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    n = args.jobs
    with tempfile.TemporaryDirectory() as tmp:
        ours = trio.run(alkstore_run, os.path.join(tmp, "a.db"), n)
        floor_path = os.path.join(tmp, "floor.db")
        f_enq = floor_enqueue(floor_path, n)
        f_claim1 = floor_claim_ack(floor_path, n // 2, 1)
        f_claim100 = floor_claim_ack(floor_path, n, 100)
    floors = {
        "enqueue (1 per tx)": f_enq,
        "claim+ack (1 at a time)": f_claim1,
        "enqueue (8 producers)": f_enq,
        "claim+ack (8 consumers)": f_claim1,
        "enqueue (batch of 100)": None,
        "claim+ack (batch of 100)": f_claim100,
    }
    print(f"SQLite, trio driver, {n} jobs (jobs/s; ratio = alkstore / raw sqlite3 floor)")
    print(f"{'operation':<28}{'alkstore':>12}{'floor':>12}{'ratio':>8}")
    for name, value in ours.items():
        floor = floors.get(name)
        ratio = f"{value / floor:.2f}" if floor else "-"
        floor_text = f"{floor:,.0f}" if floor else "-"
        print(f"{name:<28}{value:>12,.0f}{floor_text:>12}{ratio:>8}")


if __name__ == "__main__":
    main()
