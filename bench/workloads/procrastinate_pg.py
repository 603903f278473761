"""procrastinate 3.10 (``PsycopgConnector``) on the workloads of common.py, in a fresh schema.

Each run applies procrastinate's schema (``schema_manager.apply_schema_async``)
in a fresh Postgres schema every session reaches through its search_path, and
drops it at the end. Enqueueing is ``task.defer_async(**payload)`` (one job,
one statement) and ``task.batch_defer_async`` (one statement per ``--batch``);
the job's args are the 100-byte payload. Processing is
``app.run_worker_async(concurrency=--concurrency)`` in ``--processes`` worker
processes, cancelled once every job is done (its documented way to stop a
worker run as a task). ``idle`` is ``app.run_worker_async()`` with its
defaults (concurrency 1) on an empty queue, ``memory`` the ``process`` worker
(both in one worker process). Defaults otherwise: the connector's pool (4
connections), LISTEN/NOTIFY with 5 s polling, finished jobs kept
(``delete_jobs="never"``), no retries. Durability: procrastinate's tables
are ordinary (LOGGED) ones and it leaves ``synchronous_commit`` at the
server's setting (on by default; the suite's header shows it): a deferred
job survives a process crash and an OS crash or power loss.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from typing import Any

import _harness as h
import procrastinate
from common import (
    Timer,
    fresh_schema,
    parse,
    payload,
    report,
    report_latency,
    skipped,
)

# Its task names are explicit, so an app in __main__ (which the warning is about) is fine here.
logging.getLogger("procrastinate.blueprints").addFilter(
    lambda record: getattr(record, "action", None) != "app_defined_in___main__"
)


def make_app(
    args: argparse.Namespace, schema: str, board: h.Board | None = None, **pool: int
) -> tuple[procrastinate.App, dict[str, Any]]:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=h.pg_conninfo(args.dsn, schema), **pool)
    )
    sleep_s = args.sleep_ms / 1000

    @app.task(name="bench.noop")
    async def noop(i: int, kind: str, pad: str) -> None:
        if board is not None:
            board.hit(i)

    @app.task(name="bench.sleep")
    async def sleeper(i: int, kind: str, pad: str) -> None:
        await asyncio.sleep(sleep_s)
        if board is not None:
            board.hit(i)

    return app, {"noop": noop, "sleep": sleeper}


def task_for(workload: str) -> str:
    return "sleep" if workload == "process-sleep" else "noop"


# -- worker process -------------------------------------------------------------


async def worker_run(args: argparse.Namespace, schema: str, board: h.Board, ctl: h.Control) -> None:
    app, _ = make_app(args, schema, board)
    async with app.open_async():
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        await asyncio.to_thread(ctl.ready)
        ctl.on_stop(lambda: loop.call_soon_threadsafe(stop.set))
        # idle: the worker's own default concurrency.
        kw = {} if args.workload == "idle" else {"concurrency": args.concurrency}
        run = asyncio.create_task(app.run_worker_async(install_signal_handlers=False, **kw))
        done, _ = await asyncio.wait(
            {run, asyncio.create_task(stop.wait())}, return_when="FIRST_COMPLETED"
        )
        if run in done:
            run.result()  # the worker ended on its own: an error
            raise RuntimeError("worker ended before it was stopped")
        # Cancelling run_worker_async stops the worker gracefully.
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run


def worker(args: argparse.Namespace) -> None:
    ctl = h.Control()
    slot, schema, board_path = h.worker_env()
    board = h.Board(board_path, args.jobs, slot=slot)
    asyncio.run(worker_run(args, schema, board, ctl))
    board.close()


# -- the workloads -----------------------------------------------------------------


async def install(args: argparse.Namespace, schema: str) -> None:
    app, _ = make_app(args, schema)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def defer_batches(task: Any, lo: int, hi: int, batch: int) -> None:
    for start in range(lo, hi, batch):
        await task.batch_defer_async(*(payload(i) for i in range(start, min(start + batch, hi))))


async def enqueue(args: argparse.Namespace, schema: str) -> float:
    concurrent = args.workload == "enqueue-concurrent"
    # Concurrent defers need a connection each; the default pool has 4.
    pool = {"min_size": args.concurrency, "max_size": args.concurrency} if concurrent else {}
    app, tasks = make_app(args, schema, **pool)
    noop = tasks["noop"]
    async with app.open_async():
        if args.workload == "enqueue-single":
            with Timer() as t:
                for i in range(args.jobs):
                    await noop.defer_async(**payload(i))
        elif args.workload == "enqueue-batch":
            with Timer() as t:
                await defer_batches(noop, 0, args.jobs, args.batch)
        else:

            async def run(k: int) -> None:
                for i in range(k, args.jobs, args.concurrency):
                    await noop.defer_async(**payload(i))

            with Timer() as t:
                await asyncio.gather(*(run(k) for k in range(args.concurrency)))
    return t.seconds


async def fill(args: argparse.Namespace, schema: str) -> None:
    app, tasks = make_app(args, schema)
    async with app.open_async():
        await defer_batches(tasks[task_for(args.workload)], 0, args.jobs, 1000)


async def paced_defer(args: argparse.Namespace, schema: str) -> tuple[float, list[float]]:
    app, tasks = make_app(args, schema)
    noop = tasks["noop"]
    returned = [0.0] * args.jobs
    async with app.open_async():
        first = time.monotonic()
        async for i in h.apaced(args.jobs, args.rate):
            await noop.defer_async(**payload(i))
            returned[i] = time.monotonic()
    return first, returned


def main() -> None:
    if h.is_worker():
        worker(parse(sys.argv[1:]))
        return
    args = parse(sys.argv[1:])
    if args.workload == "process-batch":
        skipped(
            "procrastinate has no bare claim-batch/ack-batch loop"
            " (its worker fetches one job per query)"
        )
    schema = fresh_schema("bench_proc")
    base = h.run_dir(args.dir, "bench_proc_")
    board_path = os.path.join(base, "board")
    h.pg_fresh_schema(args.dsn, schema)
    asyncio.run(install(args, schema))
    counter = h.PgCounter(args.dsn, schema)
    if args.workload.startswith("enqueue"):
        seconds = asyncio.run(enqueue(args, schema))
        n = counter.scalar("SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'")
        if n != args.jobs:
            raise RuntimeError(f"{n} jobs enqueued, expected {args.jobs}")
        report(jobs=args.jobs, seconds=seconds)
        return
    if args.workload not in ("latency", "idle"):
        asyncio.run(fill(args, schema))  # untimed
        # As autovacuum would within a minute: with no statistics the fetch
        # sorts every queued job (O(queue) per job, past the time limit at 20000).
        counter.conn.execute("ANALYZE procrastinate_jobs")
    board = h.Board(board_path, args.jobs, create=True)
    workers = h.Workers(args.processes, schema, board_path)
    workers.wait_ready()
    if args.workload == "idle":
        return h.idle(workers, args.idle_seconds)

    def unfinished() -> int:
        # Done once every job's finish_job has committed.
        return counter.scalar(
            "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        )

    if args.workload == "memory":
        return h.memory(board, args.jobs, workers, remaining=unfinished)
    t0 = workers.go()
    if args.workload == "latency":
        time.sleep(0.5)  # the workers are listening before the first job
        first, returned = asyncio.run(paced_defer(args, schema))
        h.wait_done(board, args.jobs, workers)
        workers.stop()
        started = board.check()
        report_latency(args.jobs, first, returned, started)
        return
    t1 = h.wait_done(board, args.jobs, workers, remaining=unfinished)
    workers.stop()
    board.check()
    n = counter.scalar("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")
    if n != args.jobs:
        raise RuntimeError(f"{n} jobs succeeded, expected {args.jobs}")
    report(jobs=args.jobs, seconds=t1 - t0)


if __name__ == "__main__":
    h.bounded(main)
