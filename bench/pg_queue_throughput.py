"""Queue throughput on PostgreSQL through the trio driver, against the raw floor.

    python bench/pg_queue_throughput.py [--jobs N] [--runs R] [--dsn DSN]

alkstore runs in a fresh schema (``PostgresOptions(schema="alk_bench_<hex>")``)
that is dropped (``DROP SCHEMA ... CASCADE``) at the end of each run, whatever
happens. One run takes about half a minute here; ``--runs 3`` prints the
median and range of three.

The floor is sync psycopg (no event loop) doing the same row work per
transaction on a copy of alkstore's jobs table in that schema (same columns,
indexes and storage options): one INSERT per transaction for enqueue; the
same ``UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING`` claim in one
transaction and the ``DELETE`` of the ack in the next; the batch rows use
psycopg's ``executemany`` (pipelined) for enqueue and one UPDATE / one DELETE
of 100 rows for claim and ack. With 8 concurrent callers the floor uses 8
threads with a connection each, as alkstore uses 8 pooled connections.
Ratios are alkstore/floor (1.00 = as fast as the floor). alkstore's enqueue
also sends the queue's wake (``pg_notify``) in the same transaction, and
Postgres serialises the commits of transactions that sent a NOTIFY (a
cluster-wide lock held through the commit's WAL flush), so the enqueue rows
also show a second floor, ``floor+notify``, with the same ``pg_notify`` (on
its own table).

With ``synchronous_commit=on`` (the default) every commit waits for its WAL
to reach the disk, so the one-job-per-transaction figures measure the disk's
flush rate more than the code; concurrent callers share flushes.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import trio

from alkstore.io_trio import PostgresOptions, open_postgres

DEFAULT_DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
CONCURRENCY = 8
BATCH = 100
# The floor's variant with a wake in each enqueue transaction, as alkstore sends.
NOTIFY = "SELECT pg_notify('alk_bench_floor', '')"
ENQUEUES = ("enqueue (1 per tx)", "enqueue (8 producers)", "enqueue (batch of 100)")


async def alkstore_run(dsn: str, schema: str, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with open_postgres(dsn, options=PostgresOptions(schema=schema)) as store:
        q = store.queue("bench")

        t = time.perf_counter()
        for i in range(n):
            await q.enqueue({"i": i})
        out["enqueue (1 per tx)"] = n / (time.perf_counter() - t)

        t = time.perf_counter()
        done = 0
        while True:
            job = await q.claim_one("w")
            if job is None:
                break
            await job.ack()
            done += 1
        out["claim+ack (1 at a time)"] = done / (time.perf_counter() - t)

        async def producer(k: int) -> None:
            for i in range(k, n, CONCURRENCY):
                await q.enqueue({"i": i})

        t = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for k in range(CONCURRENCY):
                nursery.start_soon(producer, k)
        out["enqueue (8 producers)"] = n / (time.perf_counter() - t)

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
            for k in range(CONCURRENCY):
                nursery.start_soon(consumer, k)
        out["claim+ack (8 consumers)"] = done / (time.perf_counter() - t)

        t = time.perf_counter()
        for start in range(0, n, BATCH):
            await q.enqueue_batch([{"i": i} for i in range(start, min(n, start + BATCH))])
        out["enqueue (batch of 100)"] = n / (time.perf_counter() - t)

        t = time.perf_counter()
        done = 0
        while True:
            jobs = await q.claim_batch("w", BATCH)
            if not jobs:
                break
            done += await q.ack_batch([j.id for j in jobs], "w")
        out["claim+ack (batch of 100)"] = done / (time.perf_counter() - t)
    return out


class Floor:
    """Sync psycopg doing alkstore's row work on a copy of its jobs table."""

    def __init__(self, dsn: str, schema: str, table: str, *, notify: bool = False) -> None:
        self.dsn = dsn
        self.notify = notify
        t = f'"{schema}".{table}'
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                f'CREATE TABLE {t} (LIKE "{schema}".jobs INCLUDING ALL) WITH '
                "(fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02, "
                "autovacuum_analyze_scale_factor = 0.05)"
            )
        self.insert = (
            f"INSERT INTO {t} (queue, payload, priority, max_attempts, run_at, created_at, "
            "expires_at, visible_at) VALUES ('bench', %s, 0, 3, %s, %s, NULL, %s) RETURNING id"
        )
        self.claim = f"""WITH picked AS (
            SELECT id FROM {t}
            WHERE queue = 'bench' AND attempts < max_attempts AND visible_at <= %(now)s
              AND (expires_at IS NULL OR expires_at > %(now)s)
            ORDER BY priority DESC, visible_at, id
            LIMIT %(n)s
            FOR UPDATE SKIP LOCKED)
        UPDATE {t} AS j
            SET state = 1, attempts = j.attempts + 1, claims = j.claims + 1,
                claimed_by = %(worker)s, run_at = j.visible_at, visible_at = %(until)s
            FROM picked WHERE j.id = picked.id
            RETURNING j.id, j.queue, j.payload, j.priority, j.attempts, j.max_attempts,
                j.run_at, j.created_at, j.expires_at, j.claimed_by, j.visible_at, j.state,
                j.last_error, j.claims"""
        self.ack = (
            f"DELETE FROM {t} WHERE id = %s AND state = 1 AND claimed_by = %s "
            "AND claims = %s AND visible_at > %s"
        )
        self.ack_batch = (
            f"DELETE FROM {t} WHERE id = ANY(%s) AND queue = 'bench' AND state = 1 "
            "AND claimed_by = %s AND visible_at > %s"
        )

    def enqueue(self, conn: psycopg.Connection[Any], ids: range) -> None:
        cur = conn.cursor()
        for i in ids:
            now = time.time_ns() // 1000
            cur.execute(self.insert, (f'{{"i":{i}}}', now, now, now))
            cur.fetchone()
            if self.notify:
                cur.execute(NOTIFY)
            conn.commit()

    def enqueue_batches(self, conn: psycopg.Connection[Any], n: int) -> None:
        cur = conn.cursor()
        for start in range(0, n, BATCH):
            now = time.time_ns() // 1000
            rows = [(f'{{"i":{i}}}', now, now, now) for i in range(start, min(n, start + BATCH))]
            cur.executemany(self.insert, rows, returning=True)
            if self.notify:
                cur.execute(NOTIFY)
            conn.commit()

    def claim_ack(self, conn: psycopg.Connection[Any], worker: str) -> int:
        cur = conn.cursor()
        done = 0
        while True:
            now = time.time_ns() // 1000
            args = {"now": now, "n": 1, "worker": worker, "until": now + 300_000_000}
            rows = cur.execute(self.claim, args).fetchall()
            conn.commit()
            if not rows:
                return done
            job_id, claim = rows[0][0], rows[0][13]
            cur.execute(self.ack, (job_id, worker, claim, time.time_ns() // 1000))
            conn.commit()
            done += cur.rowcount

    def claim_ack_batches(self, conn: psycopg.Connection[Any]) -> int:
        cur = conn.cursor()
        done = 0
        while True:
            now = time.time_ns() // 1000
            args = {"now": now, "n": BATCH, "worker": "w", "until": now + 300_000_000}
            rows = cur.execute(self.claim, args).fetchall()
            conn.commit()
            if not rows:
                return done
            cur.execute(self.ack_batch, ([r[0] for r in rows], "w", time.time_ns() // 1000))
            conn.commit()
            done += cur.rowcount

    def run(self, n: int, *, claims: bool = True) -> dict[str, float]:
        """The same phases as ``alkstore_run``; ``claims=False``: enqueues only."""
        out: dict[str, float] = {}
        conns = [psycopg.connect(self.dsn) for _ in range(CONCURRENCY)]
        conn = conns[0]
        try:
            t = time.perf_counter()
            self.enqueue(conn, range(n))
            out["enqueue (1 per tx)"] = n / (time.perf_counter() - t)

            if claims:
                t = time.perf_counter()
                done = self.claim_ack(conn, "w")
                out["claim+ack (1 at a time)"] = done / (time.perf_counter() - t)

            t = time.perf_counter()
            in_threads(conns, lambda k, c: self.enqueue(c, range(k, n, CONCURRENCY)))
            out["enqueue (8 producers)"] = n / (time.perf_counter() - t)

            if claims:
                t = time.perf_counter()
                done = sum(in_threads(conns, lambda k, c: self.claim_ack(c, f"w{k}")))
                out["claim+ack (8 consumers)"] = done / (time.perf_counter() - t)

            t = time.perf_counter()
            self.enqueue_batches(conn, n)
            out["enqueue (batch of 100)"] = n / (time.perf_counter() - t)

            if claims:
                t = time.perf_counter()
                done = self.claim_ack_batches(conn)
                out["claim+ack (batch of 100)"] = done / (time.perf_counter() - t)
        finally:
            for c in conns:
                c.close()
        return out


def in_threads(
    conns: list[psycopg.Connection[Any]], fn: Callable[[int, psycopg.Connection[Any]], Any]
) -> list[Any]:
    results: list[Any] = [None] * len(conns)
    errors: list[BaseException] = []

    def body(k: int) -> None:
        try:
            results[k] = fn(k, conns[k])
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(k,)) for k in range(len(conns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return results


def one_run(dsn: str, n: int) -> tuple[dict[str, float], ...]:
    """alkstore, the floor and the notifying floor, in a schema dropped after."""
    schema = "alk_bench_" + secrets.token_hex(4)
    try:
        ours = trio.run(alkstore_run, dsn, schema, n)
        floors = Floor(dsn, schema, "floor_jobs").run(n)
        notifying = Floor(dsn, schema, "floor_notify", notify=True).run(n, claims=False)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return ours, floors, notifying


def cell(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:,.0f}"
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument(
        "--runs", type=int, default=1, help="repeat; cells show the median (and range)"
    )
    args = parser.parse_args()
    n = args.jobs
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        settings = {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("server_version", "synchronous_commit", "fsync")
        }
    results = [one_run(args.dsn, n) for _ in range(args.runs)]
    names = list(results[0][0])
    ours = {k: [r[0][k] for r in results] for k in names}
    floors = {k: [r[1][k] for r in results] for k in names}
    notifying = {k: [r[2][k] for r in results] for k in results[0][2]}
    runs = f", median (range) of {args.runs} runs" if args.runs > 1 else ""
    print(
        f"PostgreSQL {settings['server_version']}, trio driver, {n} jobs "
        f"(jobs/s{runs}; ratio = alkstore / sync psycopg floor)"
    )
    print(
        f"synchronous_commit={settings['synchronous_commit']}, fsync={settings['fsync']}: "
        "each commit waits for a WAL flush, so one-job-per-transaction figures are "
        "fsync-bound here"
    )
    print(
        "floor+notify: the floor with a pg_notify in each enqueue transaction, as "
        "alkstore sends (NOTIFY serialises the commits of notifying transactions)"
    )
    w = 12 if args.runs == 1 else 24
    print(f"{'operation':<26}{'alkstore':>{w}}{'floor':>{w}}{'ratio':>7}{'floor+notify':>{w}}")
    for name in names:
        ratio = statistics.median(ours[name]) / statistics.median(floors[name])
        extra = cell(notifying[name]) if name in notifying else "-"
        print(
            f"{name:<26}{cell(ours[name]):>{w}}{cell(floors[name]):>{w}}{ratio:>7.2f}{extra:>{w}}"
        )


if __name__ == "__main__":
    main()
