"""honker 0.5 (``honker.open(path)``, one file in ``--dir``) on the workloads of common.py.

Enqueueing is honker's queue API (``queue.enqueue(payload)``, one write
transaction each; ``--batch`` of them in one ``db.transaction()`` with
``tx=``). Processing is its worker runtime, what ``python -m honker worker``
runs: ``db.run_workers(queue, concurrency=--concurrency)`` over an
``@queue.task()`` handler, so the queue is filled by calling the task (the
runtime dead-letters raw payloads). ``process-batch`` is the bare loop,
``claim_batch(worker, 100)`` then ``ack_batch``. ``idle`` is
``db.run_workers(queue)`` with its defaults on an empty queue, ``memory`` the
``process`` worker (both in one worker process). Defaults otherwise: WAL,
synchronous=NORMAL (set by honker on every connection it opens, with
busy_timeout 5 s, cache_size 32 MB, wal_autocheckpoint 10000), the 1 ms
update watcher, tasks store their result (``store_result=True``, one more
write per job), 3 attempts. Durability: WAL + synchronous=NORMAL, as
alkstore's: a committed job survives a process crash; an OS crash or power
loss may lose the last transactions.

Which SQLite: one row, honker on the system's SQLite library. honker is a
Rust extension (``honker/_honker_native.abi3.so``, rusqlite, built by
maturin); ``honker.open`` and everything on the Database it returns
(enqueue, claim, ack, the watcher, ``run_workers``) run in it, on the
libsqlite3 it links dynamically, ``honker.libs/libsqlite3-f2cd05de.so.0``.
The wheel bundles there a copy of Ubuntu 24.04's libsqlite3 (SQLite 3.45.1,
per its auditwheel SBOM), which needs glibc 2.38 (``fmod@GLIBC_2.38``);
this machine has Debian 12's glibc 2.36, so it does not load (``version
'GLIBC_2.38' not found``), and ``bench/install_peers.py`` replaces it with a
link to the system's ``/usr/lib/x86_64-linux-gnu/libsqlite3.so.0`` (SQLite
3.40.1): the SQLite Python's ``sqlite3`` uses here, which this script's own
``sqlite3.connect`` (only ``live()``: a read-only count, checked after a
fill and once the handlers are done) and alkstore and the floor use too.

There is no second honker row: one on its bundled SQLite cannot run on
glibc 2.36, and honker cannot run its queue on Python's ``sqlite3``
connection either (``honker.load_extension`` loads only its SQL functions,
``libhonker_ext.so``, into a connection; the Queue, Job and worker API
exists only on ``honker.open``'s native Database). The one row measures
honker's own client on the system's SQLite, the same library as every
other SQLite row; the suite's header shows the version honker reports
(``select sqlite_version()``) in the run.

Expect ``process``/``process-sleep`` on a deep queue to hit the time limit:
in 0.5.0 each ``honker_claim_batch`` call costs time in proportion to the
jobs queued (about 7.6 ms at 16000, where the same UPDATE as plain SQL takes
0.2 ms), and the runtime claims one job per call; ``memory`` (100,000 jobs)
with it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import threading
import time
import warnings
from typing import Any

import _harness as h
import honker
from common import Timer, parse, payload, report, report_latency

QUEUE = "bench"


def open_queue(
    path: str, board: h.Board | None = None, sleep_s: float = 0.0
) -> tuple[honker.Database, honker.Queue, dict[str, Any]]:
    db = honker.open(path)
    q = db.queue(QUEUE)

    # async handlers: run_workers would run a sync one in asyncio.to_thread.
    @q.task(name="bench.noop")
    async def noop(p: dict[str, Any]) -> None:
        if board is not None:
            board.hit(p["i"])

    @q.task(name="bench.sleep")
    async def sleeper(p: dict[str, Any]) -> None:
        await asyncio.sleep(sleep_s)
        if board is not None:
            board.hit(p["i"])

    return db, q, {"noop": noop, "sleep": sleeper}


def live(path: str) -> int:
    # Pending and claimed jobs; ack deletes the row.
    conn = sqlite3.connect(path, timeout=10)
    try:
        return int(
            conn.execute("SELECT count(*) FROM _honker_live WHERE queue = ?", (QUEUE,)).fetchone()[
                0
            ]
        )
    finally:
        conn.close()


# -- worker process -------------------------------------------------------------


def worker(args: argparse.Namespace) -> None:
    ctl = h.Control()
    slot, path, board_path = h.worker_env()
    board = h.Board(board_path, args.jobs, slot=slot)
    db, q, _ = open_queue(path, board, args.sleep_ms / 1000)
    if args.workload == "process-batch":
        worker_id = f"bench-{slot}"
        ctl.ready()
        while jobs := q.claim_batch(worker_id, 100):
            for job in jobs:
                board.hit(job.payload["i"])
            q.ack_batch([job.id for job in jobs], worker_id)
        ctl.wait_stop()
    else:

        async def run() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            ctl.on_stop(lambda: loop.call_soon_threadsafe(stop.set))
            # idle: run_workers' own default concurrency.
            kw = {} if args.workload == "idle" else {"concurrency": args.concurrency}
            runner = asyncio.create_task(db.run_workers(queue=QUEUE, stop_event=stop, **kw))
            await stop.wait()
            # run_workers cancels each drain loop once, and Python 3.11's
            # wait_for drops a cancel that races the update watcher's wake-up
            # (the loop then waits on, its stop_event only seen with a job in
            # hand): cancel what is left until run_workers returns.
            await asyncio.wait({runner}, timeout=0.2)
            # (Cancelling them before they start leaves a harmless "never awaited".)
            warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)
            while not runner.done():
                for task in asyncio.all_tasks():
                    if task is not runner and task is not asyncio.current_task():
                        task.cancel()
                await asyncio.wait({runner}, timeout=0.05)
            runner.result()

        ctl.ready()
        asyncio.run(run())
    db.close()
    board.close()


# -- the workloads -----------------------------------------------------------------


def enqueue(args: argparse.Namespace, path: str) -> None:
    db, q, _ = open_queue(path)
    if args.workload == "enqueue-single":
        with Timer() as t:
            for i in range(args.jobs):
                q.enqueue(payload(i))
    elif args.workload == "enqueue-batch":
        with Timer() as t:
            for lo in range(0, args.jobs, args.batch):
                with db.transaction() as tx:
                    for i in range(lo, min(lo + args.batch, args.jobs)):
                        q.enqueue(payload(i), tx=tx)
    else:
        # One Database shared by the threads (its writer slot serialises them).
        start = threading.Barrier(args.concurrency + 1)

        def run(k: int) -> None:
            start.wait()
            for i in range(k, args.jobs, args.concurrency):
                q.enqueue(payload(i))

        threads = [threading.Thread(target=run, args=(k,)) for k in range(args.concurrency)]
        for th in threads:
            th.start()
        with Timer() as t:
            start.wait()
            for th in threads:
                th.join()
    db.close()
    n = live(path)
    if n != args.jobs:
        raise RuntimeError(f"{n} jobs enqueued, expected {args.jobs}")
    report(jobs=args.jobs, seconds=t.seconds)


def process(args: argparse.Namespace, path: str, board_path: str) -> None:
    db, q, tasks = open_queue(path)
    # Untimed fill, in transactions of 1000.
    if args.workload == "process-batch":
        for lo in range(0, args.jobs, 1000):
            with db.transaction() as tx:
                for i in range(lo, min(lo + 1000, args.jobs)):
                    q.enqueue(payload(i), tx=tx)
    else:
        # run_workers runs only task-envelope jobs, and a task call takes no tx=.
        task = tasks["sleep" if args.workload == "process-sleep" else "noop"]
        for i in range(args.jobs):
            task(payload(i))
    db.close()
    board = h.Board(board_path, args.jobs, create=True)
    workers = h.Workers(args.processes, path, board_path)
    workers.wait_ready()
    if args.workload == "memory":
        return h.memory(board, args.jobs, workers, remaining=lambda: live(path))
    t0 = workers.go()
    t1 = h.wait_done(board, args.jobs, workers, remaining=lambda: live(path))
    workers.stop()
    board.check()
    report(jobs=args.jobs, seconds=t1 - t0)


def idle(args: argparse.Namespace, path: str, board_path: str) -> None:
    db, _, _ = open_queue(path)  # the schema, before the worker starts
    db.close()
    h.Board(board_path, 0, create=True)
    workers = h.Workers(args.processes, path, board_path)
    workers.wait_ready()
    h.idle(workers, args.idle_seconds)


def latency(args: argparse.Namespace, path: str, board_path: str) -> None:
    db, _, tasks = open_queue(path)
    noop = tasks["noop"]
    board = h.Board(board_path, args.jobs, create=True)
    workers = h.Workers(args.processes, path, board_path)
    workers.wait_ready()
    workers.go()
    time.sleep(0.5)  # the workers are up before the first job
    returned = [0.0] * args.jobs
    first = time.monotonic()
    for i in h.paced(args.jobs, args.rate):
        noop(payload(i))
        returned[i] = time.monotonic()
    h.wait_done(board, args.jobs, workers)
    workers.stop()
    db.close()
    started = board.check()
    report_latency(args.jobs, first, returned, started)


def main() -> None:
    if h.is_worker():
        worker(parse(sys.argv[1:]))
        return
    args = parse(sys.argv[1:])
    base = h.run_dir(args.dir, "bench_honker_")
    path = os.path.join(base, "honker.db")
    board_path = os.path.join(base, "board")
    if args.workload.startswith("enqueue"):
        enqueue(args, path)
    elif args.workload == "latency":
        latency(args, path, board_path)
    elif args.workload == "idle":
        idle(args, path, board_path)
    else:
        process(args, path, board_path)


if __name__ == "__main__":
    h.bounded(main)
