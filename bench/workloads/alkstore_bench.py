"""alkstore's side of every workload (see common.py), on either engine and driver.

    python bench/workloads/alkstore_bench.py process --engine sqlite --driver trio

Processing is ``queue.work(handler, concurrency=--concurrency)`` in this
process (``--processes`` above 1: that many spawned worker processes).
``idle`` runs ``queue.work(handler)`` with its defaults (concurrency 1, the
5 s poll behind the engine's wake-up) on an empty queue in this process and
takes this process's CPU time. ``memory`` runs the ``process`` worker in one
spawned process, so its resident set is the worker's alone (not the fill's).

alkstore runs with its defaults. Durability: on SQLite, WAL and
``synchronous=NORMAL`` (``alkstore/engines/sqlite/schema.py``'s ``PRAGMAS``,
on every connection): a committed job survives a process crash; an OS crash
or power loss may lose the last transactions. On Postgres, ordinary
(LOGGED) tables and the server's ``synchronous_commit`` (on by default; the
suite's header shows it): a committed job survives both.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import MAX_SLOTS, Board
from common import (
    SETTLE_S,
    Timer,
    fresh_schema,
    idle_fields,
    latency_fields,
    memory_fields,
    parse,
    payload,
    report,
    status_mb,
)

from alkstore import Job, Store, io_asyncio, io_trio

QUEUE = "bench"


def driver_module(args: Any) -> Any:
    return io_trio if args.driver == "trio" else io_asyncio


@asynccontextmanager
async def open_store(args: Any, location: str) -> AsyncIterator[Store]:
    mod = driver_module(args)
    if args.engine == "sqlite":
        async with mod.open_sqlite(location) as store:
            yield store
    else:
        options = mod.PostgresOptions(schema=location, pool_size=max(4, args.concurrency // 4))
        async with mod.open_postgres(args.dsn, options=options) as store:
            yield store


# -- the async library's few tools, for trio and asyncio alike -------------------------
class Lib:
    def __init__(self, driver: str) -> None:
        self.trio = driver == "trio"

    async def sleep(self, s: float) -> None:
        if self.trio:
            await trio.sleep(s)
        else:
            await asyncio.sleep(s)

    def event(self) -> Any:
        return trio.Event() if self.trio else asyncio.Event()

    def now(self) -> float:
        return time.perf_counter()

    async def run_tasks(self, fns: list[Callable[[], Awaitable[Any]]]) -> None:
        if self.trio:
            async with trio.open_nursery() as n:
                for fn in fns:
                    n.start_soon(fn)
        else:
            async with asyncio.TaskGroup() as g:
                for fn in fns:
                    g.create_task(fn())

    async def work_until(
        self, store: Store, handler: Callable[[Job], Awaitable[None]], done: Any, **kw: Any
    ) -> None:
        """Run ``q.work(handler)`` until ``done`` is set, then stop it."""
        q = store.queue(QUEUE)
        if self.trio:
            async with trio.open_nursery() as n:
                n.start_soon(lambda: q.work(handler, **kw))
                await done.wait()
                n.cancel_scope.cancel()
        else:
            task = asyncio.create_task(q.work(handler, **kw))
            await done.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def fill(store: Store, n: int) -> None:
    q = store.queue(QUEUE)
    for start in range(0, n, 1000):
        await q.enqueue_batch([payload(i) for i in range(start, min(n, start + 1000))])


async def main(args: Any, lib: Lib, location: str) -> None:
    n = args.jobs
    async with open_store(args, location) as store:
        q = store.queue(QUEUE)
        w = args.workload
        if w == "enqueue-single":
            with Timer() as t:
                for i in range(n):
                    await q.enqueue(payload(i))
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w == "enqueue-concurrent":
            per = n // args.concurrency

            async def producer(k: int) -> None:
                for i in range(per):
                    await q.enqueue(payload(k * per + i))

            with Timer() as t:
                await lib.run_tasks([lambda k=k: producer(k) for k in range(args.concurrency)])
            return report(jobs=per * args.concurrency, seconds=t.seconds, cpu=t.cpu)
        if w == "enqueue-batch":
            with Timer() as t:
                for start in range(0, n, args.batch):
                    end = min(n, start + args.batch)
                    await q.enqueue_batch([payload(i) for i in range(start, end)])
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w == "latency":
            return await latency(args, lib, store)
        if w == "idle":
            return await idle(args, lib, store)
        await fill(store, n)
        if w == "memory":
            return await memory(args, lib, store, n)
        if w == "process-batch":
            if args.processes > 1:
                return await many_processes(args, lib, store, n)
            with Timer() as t:
                done = 0
                while done < n:
                    jobs = await q.claim_batch("w", 100)
                    if not jobs:
                        await lib.sleep(0.001)
                        continue
                    done += await q.ack_batch([j.id for j in jobs], "w")
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w in ("process", "process-sleep"):
            if args.processes > 1:
                return await many_processes(args, lib, store, n)
            count = 0
            finished = lib.event()
            delay = args.sleep_ms / 1000 if w == "process-sleep" else 0.0

            async def handler(job: Job) -> None:
                nonlocal count
                if delay:
                    await lib.sleep(delay)
                count += 1
                if count >= n:
                    finished.set()

            with Timer() as t:
                await lib.work_until(store, handler, finished, concurrency=args.concurrency)
                # Timed to the last job acked (the worker stopped after the
                # last handler returned, settling what had finished).
                await drained(lib, q)
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        raise SystemExit(f"unknown workload {w}")


async def drained(lib: Lib, q: Any) -> None:
    while True:
        s = await q.stats()
        if s.ready + s.scheduled + s.processing == 0:
            return
        await lib.sleep(0.005)


async def latency(args: Any, lib: Lib, store: Store) -> None:
    q = store.queue(QUEUE)
    n = args.jobs
    sent: dict[int, float] = {}
    # Handler start per job; latencies are taken once all have run, since a
    # handler may start before its enqueue has returned to the producer.
    started: dict[int, float] = {}
    finished = lib.event()

    async def handler(job: Job) -> None:
        started.setdefault(job.payload["i"], lib.now())
        if len(started) >= n:
            finished.set()

    async def producer() -> None:
        gap = 1.0 / args.rate
        start = lib.now()
        for i in range(n):
            target = start + i * gap
            wait = target - lib.now()
            if wait > 0:
                await lib.sleep(wait)
            await q.enqueue(payload(i))
            # From the enqueue's return (its commit), as the peers' scripts time it.
            sent[i] = lib.now()

    with Timer() as t:
        await lib.run_tasks([producer, lambda: lib.work_until(
            store, handler, finished, concurrency=args.concurrency)])  # fmt: skip
    samples = [max(0.0, started[i] - sent[i]) for i in range(n)]
    report(jobs=n, seconds=t.seconds, **latency_fields(samples))


async def idle(args: Any, lib: Lib, store: Store) -> None:
    """``q.work(handler)`` with its defaults on an empty queue; this process's
    CPU time over ``--idle-seconds`` once it has run ``SETTLE_S``."""
    stop = lib.event()

    async def handler(job: Job) -> None:
        pass

    async def measure() -> None:
        await lib.sleep(SETTLE_S)
        with Timer() as t:
            await lib.sleep(args.idle_seconds)
        stop.set()
        report(**idle_fields(t.cpu, t.seconds))

    await lib.run_tasks([measure, lambda: lib.work_until(store, handler, stop)])


@asynccontextmanager
async def spawned(args: Any, lib: Lib, count: int) -> AsyncIterator[tuple[list[Any], Path]]:
    """``count`` worker processes on the same database, each ready (imported,
    store open); they start on ``go.touch()``."""
    go = Path(args.dir) / f"go-{os.getpid()}"
    # Where each worker counts the jobs it ran (its slot of the board).
    Board(f"{go}.board", args.jobs, create=True).close()
    if count > MAX_SLOTS:
        raise SystemExit(f"--processes must be at most {MAX_SLOTS}")

    def argv(slot: int) -> list[str]:
        return [sys.executable, __file__, args.workload, "--engine", args.engine,
                "--driver", args.driver, "--concurrency", str(args.concurrency),
                "--sleep-ms", str(args.sleep_ms), "--dsn", args.dsn, "--dir", args.dir,
                "--jobs", str(args.jobs),
                "--worker", f"{location_of(args)}|{go}|{slot}"]  # fmt: skip

    # Spawned before the timed part starts, so the blocking call costs nothing measured.
    procs = [subprocess.Popen(argv(slot)) for slot in range(count)]  # noqa: ASYNC220
    ready = [Path(f"{go}.ready-{p.pid}") for p in procs]
    try:
        # Each worker says when it has imported and opened its store.
        while not all(r.exists() for r in ready):
            if any(p.poll() is not None for p in procs):
                raise SystemExit("a worker process died while starting")
            await lib.sleep(0.01)
        yield procs, go
    finally:
        go.unlink(missing_ok=True)
        for f in go.parent.glob(f"{go.name}.*"):  # ready, and memory's marks
            f.unlink(missing_ok=True)
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


async def many_processes(args: Any, lib: Lib, store: Store, n: int) -> None:
    """``--processes`` worker processes on the same database; timed from go
    to the queue being empty. As for the peers (``_harness.wait_done``), the
    workers count what they ran on a board the parent reads without a
    query; only once it adds up does the parent ask the database (whose
    counts read the jobs table: asked every few ms from the start, they
    loaded the server the workers share)."""
    async with spawned(args, lib, args.processes) as (procs, go):
        board = Board(f"{go}.board", n)
        with Timer() as t:
            go.touch()
            while board.total() < n:
                if any(p.poll() is not None for p in procs):
                    raise SystemExit("a worker process died")
                await lib.sleep(0.001)
            await drained(lib, store.queue(QUEUE))
        board.close()
    report(jobs=n, seconds=t.seconds)


async def memory(args: Any, lib: Lib, store: Store, n: int) -> None:
    """One spawned ``process`` worker; its resident set once its handler has
    run 10% of the jobs (the worker reads its own and leaves it in a file:
    polling the queue's counts would load the machine) and once all are acked."""
    async with spawned(args, lib, 1) as (procs, go):
        pid = procs[0].pid
        tenth, done = (Path(f"{go}.{mark}-{pid}") for mark in ("tenth", "done"))
        with Timer() as t:
            go.touch()
            while not done.exists():
                if procs[0].poll() is not None:
                    raise SystemExit("the worker process died")
                await lib.sleep(0.005)
            await drained(lib, store.queue(QUEUE))  # the last handlers' acks
        start = float(tenth.read_text())
        report(**memory_fields(n, t.seconds, start, status_mb(pid), status_mb(pid, "VmHWM")))


_LOCATION = ""


def location_of(args: Any) -> str:
    return _LOCATION


async def worker(args: Any, lib: Lib) -> None:
    """A spawned worker: wait for go, then process until stopped."""
    location, go, slot = args.worker.split("|")
    delay = args.sleep_ms / 1000 if args.workload == "process-sleep" else 0.0
    board = Board(f"{go}.board", args.jobs, slot=int(slot))
    async with open_store(args, location) as store:
        await store.queue(QUEUE).stats()  # connected, schema read
        Path(f"{go}.ready-{os.getpid()}").touch()  # noqa: ASYNC240 (before the timed part)
        while not Path(go).exists():  # noqa: ASYNC240 (a stat before the timed part)
            await lib.sleep(0.002)
        q = store.queue(QUEUE)
        if args.workload == "process-batch":
            wid = f"w{os.getpid()}"
            while True:
                jobs = await q.claim_batch(wid, 100)
                if not jobs:
                    await lib.sleep(0.001)
                    continue
                await q.ack_batch([j.id for j in jobs], wid)
                for j in jobs:
                    board.hit(j.payload["i"])

        count = 0
        marks: dict[int, list[str]] = {}  # handler runs -> the marks to leave then
        if args.workload == "memory":
            marks.setdefault(max(1, args.jobs // 10), []).append("tenth")
            marks.setdefault(args.jobs, []).append("done")

        async def handler(job: Job) -> None:
            nonlocal count
            if delay:
                await lib.sleep(delay)
            count += 1
            board.hit(job.payload["i"])
            if count in marks:
                leave_marks(go, marks[count])

        await q.work(handler, concurrency=args.concurrency)


def leave_marks(go: str, names: list[str]) -> None:
    """memory: the worker's resident set now, in a file per mark (a blocking
    write, twice a run)."""
    for name in names:
        Path(f"{go}.{name}-{os.getpid()}").write_text(str(status_mb("self")))


def run() -> None:
    global _LOCATION
    args = parse()
    lib = Lib(args.driver)
    if args.worker:
        coro = worker(args, lib)
    else:
        if args.engine == "sqlite":
            _LOCATION = os.path.join(args.dir, f"alkstore-{os.getpid()}.db")
        else:
            _LOCATION = fresh_schema("alk_bench")
        coro = main(args, lib, _LOCATION)
    try:
        if args.driver == "trio":
            trio.run(lambda: coro)
        else:
            asyncio.run(coro)
    except KeyboardInterrupt:
        pass
    finally:
        if not args.worker:
            cleanup(args)


def cleanup(args: Any) -> None:
    if args.engine == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(_LOCATION + suffix).unlink(missing_ok=True)
    else:
        import psycopg

        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{_LOCATION}" CASCADE')


if __name__ == "__main__":
    run()
