"""pgqueuer 1.6 (asyncpg) on the workloads of common.py, in a fresh schema.

Each run installs pgqueuer (``Queries.install()``) in a fresh schema every
session reaches through its search_path, and drops it at the end. Enqueueing
is ``Queries.enqueue`` (a scalar call is one job in one autocommit statement;
lists are its batch insert). Processing is the consumer of pgqueuer's quick
start, ``PgQueuer(AsyncpgDriver(connection))`` and its ``run()`` (what ``pgq
run`` calls: the QueueManager and an idle SchedulerManager), in
``--processes`` worker processes. ``idle`` is that consumer's ``run()`` with
its defaults on an empty queue, ``memory`` the ``process`` consumer (both in
one worker process).

Batch and concurrency: ``run()``'s default ``batch_size`` (10, as ``pgq
run --batch-size`` defaults too), and ``max_concurrent_tasks`` of
``max(--concurrency, 2 * 10)``: ``QueueManager.run`` refuses a
``max_concurrent_tasks`` below twice the batch size ("must be at least
twice the batch size"), so 20 is the smallest cap it accepts with its
default batch. At the suite's ``--concurrency 10`` (``process``,
``latency``, ``memory``) pgqueuer therefore runs 20 slots, not the 10 the
other systems get (the alternative, a batch of 5 under a cap of 10, is not
pgqueuer's default); ``process-sleep`` (concurrency 100) runs 100.

Defaults otherwise (LISTEN/NOTIFY, status log buffered up to the batch size
or 0.1 s, heartbeats, log aggregation). Durability: ``Durability.durable``,
its default (every table LOGGED, none UNLOGGED), and the server's
``synchronous_commit`` (on by default; the suite's header shows it): a
committed enqueue survives a process crash and an OS crash or power loss. A
finished job's status is written by that buffer, so a worker that crashes
can leave up to a batch of finished jobs to be re-run after the heartbeat
timeout (at-least-once, as any queue).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import sys
import time
from typing import Any

import _harness as h
import asyncpg
from common import (
    Timer,
    fresh_schema,
    parse,
    payload,
    report,
    report_latency,
    skipped,
)

ENTRY = "bench"
DEFAULT_BATCH = 10  # QueueManager.run's (and PgQueuer.run's) batch_size default


def max_concurrent_tasks(concurrency: int) -> int:
    # run() refuses max_concurrent_tasks < 2 * batch_size: at the default batch,
    # the smallest cap it accepts is 20, so --concurrency below that becomes 20.
    return max(concurrency, 2 * DEFAULT_BATCH)


async def connect(args: argparse.Namespace, schema: str) -> asyncpg.Connection:
    return await asyncpg.connect(args.dsn, server_settings=h.pg_server_settings(schema))


def queries_on(conn: asyncpg.Connection) -> Any:
    from pgqueuer import AsyncpgDriver, Queries

    return Queries(AsyncpgDriver(conn))


# -- worker process -------------------------------------------------------------


async def worker_run(args: argparse.Namespace, schema: str, board: h.Board, ctl: h.Control) -> None:
    from pgqueuer import AsyncpgDriver, PgQueuer

    default = inspect.signature(PgQueuer.run).parameters["batch_size"].default
    if default != DEFAULT_BATCH:
        raise RuntimeError(f"PgQueuer.run's batch_size default is {default}, not {DEFAULT_BATCH}")
    conn = await connect(args, schema)
    try:
        pgq = PgQueuer(AsyncpgDriver(conn))
        sleep_s = args.sleep_ms / 1000

        if args.workload == "process-sleep":

            @pgq.entrypoint(ENTRY)
            async def handler(job: Any) -> None:
                await asyncio.sleep(sleep_s)
                board.hit(json.loads(job.payload)["i"])

        else:

            @pgq.entrypoint(ENTRY)
            async def handler(job: Any) -> None:
                board.hit(json.loads(job.payload)["i"])

        loop = asyncio.get_running_loop()
        await asyncio.to_thread(ctl.ready)
        ctl.on_stop(lambda: loop.call_soon_threadsafe(pgq.shutdown.set))
        if args.workload == "idle":
            await pgq.run()  # its defaults
        else:
            await pgq.run(max_concurrent_tasks=max_concurrent_tasks(args.concurrency))
    finally:
        await conn.close()


def worker(args: argparse.Namespace) -> None:
    ctl = h.Control()
    slot, schema, board_path = h.worker_env()
    board = h.Board(board_path, args.jobs, slot=slot)
    asyncio.run(worker_run(args, schema, board, ctl))
    board.close()


# -- the workloads -----------------------------------------------------------------


async def install(args: argparse.Namespace, schema: str) -> None:
    conn = await connect(args, schema)
    try:
        await queries_on(conn).install()
    finally:
        await conn.close()


async def enqueue_batches(queries: Any, lo: int, hi: int, batch: int) -> None:
    for start in range(lo, hi, batch):
        ids = range(start, min(start + batch, hi))
        await queries.enqueue(
            [ENTRY] * len(ids), [h.payload_bytes(payload(i)) for i in ids], [0] * len(ids)
        )


async def enqueue(args: argparse.Namespace, schema: str) -> float:
    if args.workload == "enqueue-concurrent":
        from pgqueuer import AsyncpgPoolDriver, Queries

        # The pool driver runs queries concurrently (AsyncpgDriver serialises
        # them on its one connection): one connection per task.
        pool = await asyncpg.create_pool(
            args.dsn,
            min_size=args.concurrency,
            max_size=args.concurrency,
            server_settings=h.pg_server_settings(schema),
        )
        try:
            queries = Queries(AsyncpgPoolDriver(pool))

            async def run(k: int) -> None:
                for i in range(k, args.jobs, args.concurrency):
                    await queries.enqueue(ENTRY, h.payload_bytes(payload(i)))

            with Timer() as t:
                await asyncio.gather(*(run(k) for k in range(args.concurrency)))
        finally:
            await pool.close()
        return t.seconds
    conn = await connect(args, schema)
    try:
        queries = queries_on(conn)
        if args.workload == "enqueue-single":
            with Timer() as t:
                for i in range(args.jobs):
                    await queries.enqueue(ENTRY, h.payload_bytes(payload(i)))
        else:
            with Timer() as t:
                await enqueue_batches(queries, 0, args.jobs, args.batch)
    finally:
        await conn.close()
    return t.seconds


async def fill(args: argparse.Namespace, schema: str) -> None:
    conn = await connect(args, schema)
    try:
        await enqueue_batches(queries_on(conn), 0, args.jobs, 1000)
    finally:
        await conn.close()


async def paced_enqueue(args: argparse.Namespace, schema: str) -> tuple[float, list[float]]:
    conn = await connect(args, schema)
    try:
        queries = queries_on(conn)
        returned = [0.0] * args.jobs
        first = time.monotonic()
        async for i in h.apaced(args.jobs, args.rate):
            await queries.enqueue(ENTRY, h.payload_bytes(payload(i)))
            returned[i] = time.monotonic()
    finally:
        await conn.close()
    return first, returned


def main() -> None:
    if h.is_worker():
        worker(parse(sys.argv[1:]))
        return
    args = parse(sys.argv[1:])
    if args.workload == "process-batch":
        skipped(
            "pgqueuer has no user-facing bare claim/ack loop: Queries.dequeue/log_jobs"
            " are QueueManager's internals (manager id, entrypoint limits, heartbeats)"
        )
    schema = fresh_schema("bench_pgq")
    # NOTIFY channels are database-wide: one of the run's own keeps runs apart.
    os.environ["PGQUEUER_CHANNEL"] = f"ch_{schema}"
    base = h.run_dir(args.dir, "bench_pgq_")
    board_path = os.path.join(base, "board")
    h.pg_fresh_schema(args.dsn, schema)
    asyncio.run(install(args, schema))
    counter = h.PgCounter(args.dsn, schema)
    if args.workload.startswith("enqueue"):
        seconds = asyncio.run(enqueue(args, schema))
        n = counter.scalar("SELECT count(*) FROM pgqueuer")
        if n != args.jobs:
            raise RuntimeError(f"{n} jobs enqueued, expected {args.jobs}")
        report(jobs=args.jobs, seconds=seconds)
        return
    if args.workload not in ("latency", "idle"):
        asyncio.run(fill(args, schema))  # untimed
        # As autovacuum would within a minute (and as procrastinate_pg.py must).
        counter.conn.execute("ANALYZE pgqueuer")
    board = h.Board(board_path, args.jobs, create=True)
    workers = h.Workers(args.processes, schema, board_path)
    workers.wait_ready()
    if args.workload == "idle":
        return h.idle(workers, args.idle_seconds)

    def queued() -> int:
        # Done once the status log has been flushed: a successful job's row
        # leaves the queue table then.
        return counter.scalar("SELECT count(*) FROM pgqueuer")

    if args.workload == "memory":
        return h.memory(board, args.jobs, workers, remaining=queued)
    t0 = workers.go()
    if args.workload == "latency":
        time.sleep(0.5)  # the workers are listening before the first job
        first, returned = asyncio.run(paced_enqueue(args, schema))
        h.wait_done(board, args.jobs, workers)
        workers.stop()
        started = board.check()
        report_latency(args.jobs, first, returned, started)
        return
    t1 = h.wait_done(board, args.jobs, workers, remaining=queued)
    workers.stop()
    board.check()
    report(jobs=args.jobs, seconds=t1 - t0)


if __name__ == "__main__":
    h.bounded(main)
