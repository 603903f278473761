"""huey 3.5 (``SqliteHuey``, one file in ``--dir``) on the workloads of common.py.

Enqueueing calls a ``@huey.task()`` function; processing runs huey's own
consumer (``huey.create_consumer(workers=--concurrency)``, thread workers,
``Consumer.run()`` as ``huey_consumer`` does) in ``--processes`` worker
processes, stopped the way ``huey_consumer`` is (SIGINT, graceful). ``idle``
is that consumer with its defaults (``huey.create_consumer()``: one thread
worker) on an empty queue, ``memory`` the ``process`` consumer (both in one
worker process). Every setting is huey's default otherwise (polling from
0.1 s with backoff to 10 s when idle, so a longer ``--idle-seconds`` gives a
lower idle figure; results on).

Two configurations, two systems of the suite:

- ``huey`` (no ``--variant``): huey's defaults. ``SqliteStorage`` sets
  ``journal_mode=wal`` and ``cache_size`` on each connection it opens, and
  ``synchronous`` only when given ``fsync=`` (``True``: FULL, ``False``:
  OFF); by default it leaves SQLite's own, which is FULL (2) in this
  SQLite build, in WAL mode too. Durability: WAL + synchronous=FULL, the
  WAL is synced at every commit, so a committed task survives a process
  crash and an OS crash or power loss.
- ``huey-normal`` (``--variant normal``): the same with alkstore's
  durability, WAL + ``synchronous=NORMAL``. huey's ``fsync`` option cannot
  say NORMAL, so ``NormalSyncStorage`` (a ``SqliteStorage`` whose
  ``_create_connection``, huey's one place for a new connection's pragmas,
  adds ``pragma synchronous=NORMAL``) is the storage of a ``SqliteHuey``
  subclass, in every process of the run: the producer and every consumer
  process (the workers are this script again, with the same ``--variant``).
  Durability: a committed task survives a process crash; an OS crash or
  power loss may lose the last transactions (the WAL is synced only at
  checkpoints), as with alkstore.

Each process checks its connection's ``journal_mode`` and ``synchronous``
before it starts (a mismatch fails the run).
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import threading
import time
from typing import Any

import _harness as h
from common import Timer, parse, payload, report, report_latency, skipped
from huey import SqliteHuey
from huey.storage import SqliteStorage

VARIANTS = ("", "normal")
# PRAGMA synchronous each variant may run with: FULL (2; SQLite's default
# here) or EXTRA (3, a build's other power-safe default); NORMAL (1).
SYNCHRONOUS = {"": (2, 3), "normal": (1,)}


class NormalSyncStorage(SqliteStorage):
    """huey's SQLite storage with ``synchronous=NORMAL`` on every connection it opens."""

    def _create_connection(self) -> sqlite3.Connection:
        conn = super()._create_connection()
        conn.execute("pragma synchronous=NORMAL")
        return conn


class NormalSyncHuey(SqliteHuey):
    storage_class = NormalSyncStorage


def make_huey(
    path: str, variant: str, board: h.Board | None = None, sleep_s: float = 0.0
) -> tuple[SqliteHuey, dict[str, Any]]:
    cls = NormalSyncHuey if variant == "normal" else SqliteHuey
    huey = cls(name="bench", filename=path)
    check_pragmas(huey, variant)

    @huey.task(name="noop")
    def noop(p: dict[str, Any]) -> None:
        if board is not None:
            board.hit(p["i"])

    @huey.task(name="sleep")
    def sleeper(p: dict[str, Any]) -> None:
        time.sleep(sleep_s)
        if board is not None:
            board.hit(p["i"])

    return huey, {"noop": noop, "sleep": sleeper}


def check_pragmas(huey: SqliteHuey, variant: str) -> None:
    """The connection huey's storage opened runs the variant's durability."""
    journal = huey.storage.sql("pragma journal_mode", results=True)[0][0]
    sync = huey.storage.sql("pragma synchronous", results=True)[0][0]
    if str(journal).lower() != "wal" or sync not in SYNCHRONOUS[variant]:
        raise RuntimeError(
            f"huey {variant or 'default'}: journal_mode={journal}, synchronous={sync};"
            f" expected wal and one of {SYNCHRONOUS[variant]}"
        )


def pending(path: str) -> int:
    # huey deletes a task's row when it dequeues it.
    conn = sqlite3.connect(path, timeout=10)
    try:
        return int(conn.execute("SELECT count(*) FROM task").fetchone()[0])
    finally:
        conn.close()


def task_for(workload: str) -> str:
    return "sleep" if workload == "process-sleep" else "noop"


# -- worker process -------------------------------------------------------------


def interrupt_once_started(timeout: float = 10.0) -> None:
    """SIGINT this process once the consumer handles it: ``Consumer.start()``
    sets its handlers last, after starting every worker thread, and a short
    run can be done before then (a SIGINT earlier would be a
    KeyboardInterrupt inside ``start()``)."""
    deadline = time.monotonic() + timeout
    while signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)
    os.kill(os.getpid(), signal.SIGINT)


def worker(args: argparse.Namespace) -> None:
    ctl = h.Control()
    slot, path, board_path = h.worker_env()
    board = h.Board(board_path, args.jobs, slot=slot)
    huey, _ = make_huey(path, args.variant, board, args.sleep_ms / 1000)
    huey.pending_count()  # opens the connection before the clock starts
    if args.workload == "idle":
        consumer = huey.create_consumer()  # huey_consumer's defaults
    else:
        consumer = huey.create_consumer(workers=args.concurrency, worker_type="thread")
    ctl.ready()
    # The parent's stop becomes the SIGINT huey_consumer stops gracefully on.
    ctl.on_stop(interrupt_once_started)
    consumer.run()
    huey.storage.close()
    board.close()


# -- the workloads -----------------------------------------------------------------


def enqueue(args: argparse.Namespace, path: str) -> None:
    huey, tasks = make_huey(path, args.variant)
    noop = tasks["noop"]
    huey.pending_count()
    if args.workload == "enqueue-single":
        with Timer() as t:
            for i in range(args.jobs):
                noop(payload(i))
    else:
        # One huey instance shared by the threads, as in a threaded app
        # (SqliteStorage has one connection behind a lock).
        start = threading.Barrier(args.concurrency + 1)

        def run(k: int) -> None:
            start.wait()
            for i in range(k, args.jobs, args.concurrency):
                noop(payload(i))

        threads = [threading.Thread(target=run, args=(k,)) for k in range(args.concurrency)]
        for th in threads:
            th.start()
        with Timer() as t:
            start.wait()
            for th in threads:
                th.join()
    n = huey.pending_count()
    huey.storage.close()
    if n != args.jobs:
        raise RuntimeError(f"{n} tasks enqueued, expected {args.jobs}")
    report(jobs=args.jobs, seconds=t.seconds)


def process(args: argparse.Namespace, path: str, board_path: str) -> None:
    huey, tasks = make_huey(path, args.variant)
    task = tasks[task_for(args.workload)]
    for i in range(args.jobs):  # untimed: huey has no batched enqueue
        task(payload(i))
    huey.storage.close()
    board = h.Board(board_path, args.jobs, create=True)
    workers = h.Workers(args.processes, path, board_path)
    workers.wait_ready()
    if args.workload == "memory":
        return h.memory(board, args.jobs, workers, remaining=lambda: pending(path))
    t0 = workers.go()
    t1 = h.wait_done(board, args.jobs, workers, remaining=lambda: pending(path))
    workers.stop()
    board.check()
    report(jobs=args.jobs, seconds=t1 - t0)


def idle(args: argparse.Namespace, path: str, board_path: str) -> None:
    huey, _ = make_huey(path, args.variant)
    huey.pending_count()  # the table, before the consumer starts
    huey.storage.close()
    h.Board(board_path, 0, create=True)
    workers = h.Workers(args.processes, path, board_path)
    workers.wait_ready()
    h.idle(workers, args.idle_seconds)


def latency(args: argparse.Namespace, path: str, board_path: str) -> None:
    huey, tasks = make_huey(path, args.variant)
    noop = tasks["noop"]
    huey.pending_count()
    board = h.Board(board_path, args.jobs, create=True)
    workers = h.Workers(args.processes, path, board_path)
    workers.wait_ready()
    workers.go()
    time.sleep(0.5)  # the consumer is up before the first job
    returned = [0.0] * args.jobs
    first = time.monotonic()
    for i in h.paced(args.jobs, args.rate):
        noop(payload(i))
        returned[i] = time.monotonic()
    h.wait_done(board, args.jobs, workers)
    workers.stop()
    huey.storage.close()
    started = board.check()
    report_latency(args.jobs, first, returned, started)


def main() -> None:
    if h.is_worker():
        worker(parse(sys.argv[1:]))
        return
    args = parse(sys.argv[1:])
    if args.variant not in VARIANTS:
        raise SystemExit(f"unknown --variant {args.variant!r} (choose from '', normal)")
    if args.workload == "enqueue-batch":
        skipped(
            "huey has no batched enqueue: Task.map() and group enqueue each task"
            " on its own (SqliteStorage.enqueue commits per task)"
        )
    if args.workload == "process-batch":
        skipped(
            "huey has no bare claim-batch/ack-batch loop (its consumer dequeues one task at a time)"
        )
    base = h.run_dir(args.dir, "bench_huey_")
    path = os.path.join(base, "huey.db")
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
