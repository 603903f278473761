"""Live cancellation latency: from ``Queue.cancel`` to the handler seeing it.

    python bench/cancel_latency.py [--samples 200] [--engines sqlite,postgres]
                                   [--modes same,cross] [--held 1] [--dsn DSN]

A worker (concurrency 1, the trio driver) runs a handler that sleeps until
cancelled and notes ``time.monotonic_ns()`` as ``trio.Cancelled`` reaches
it. The canceller enqueues a job, waits until its handler started, waits a
random gap of 0-20 ms, then calls ``q.cancel(id)``. Per sample:

- ``cancel call``: how long ``q.cancel`` took (its round trip and commit);
- ``from call``: from just before ``q.cancel`` to the handler's note: the
  whole latency the caller sees, its own commit included;
- ``after return``: from ``q.cancel`` returning to the handler's note
  (negative: the handler was cancelled before the call returned to the
  canceller, as happens in one process where the commit wakes the worker
  directly).

Modes: ``same`` (the worker and the canceller share one store and one event
loop) and ``cross`` (the worker is another process, on the same database;
the cancel's wake reaches it through the SQLite watcher or Postgres LISTEN).
CLOCK_MONOTONIC is shared by every process on the machine, so the cross
figures compare timestamps taken in two processes. SQLite uses a temporary
file; Postgres a fresh schema ``alk_bench_<hex>`` dropped at the end, on
``--dsn`` (default ``$ALKSTORE_DSN``, then
``postgresql://postgres@127.0.0.1:5432/test``). The worker's heartbeat is
75 s away (visibility timeout 300 s): only the cancel's wake can deliver it.

``--held N`` (default 1) runs the worker with concurrency N and N - 1 other
jobs whose handlers run for the whole benchmark, so on each cancel wake the
worker asks about N held jobs, not one.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from alkstore import Job, Store
from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite

DEFAULT_DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
QUEUE = "bench_cancel"
WARMUP = 5


@asynccontextmanager
async def open_store(engine: str, location: str, dsn: str) -> AsyncIterator[Store]:
    if engine == "sqlite":
        async with open_sqlite(location) as store:
            yield store
    else:
        async with open_postgres(dsn, options=PostgresOptions(schema=location)) as store:
            yield store


def make_handler(on_start: Any, on_seen: Any) -> Any:
    async def handler(job: Job) -> None:
        on_start(job.id)
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            on_seen(job.id, time.monotonic_ns())
            raise

    return handler


# -- the worker process of the cross mode -------------------------------------------------
async def child(engine: str, location: str, dsn: str, held: int) -> None:
    async with open_store(engine, location, dsn) as store:

        def started(job_id: int) -> None:
            print(f"started {job_id}", flush=True)

        def seen(job_id: int, ns: int) -> None:
            print(f"seen {job_id} {ns}", flush=True)

        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: store.queue(QUEUE).work(
                make_handler(started, seen), concurrency=held, poll_interval=30.0,
                task_status=task_status))
            print("ready", flush=True)
            # Until the parent closes our stdin.
            await trio.to_thread.run_sync(sys.stdin.read)
            nursery.cancel_scope.cancel()


class Lines:
    """Lines from a child's stdout."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = b""

    async def next(self) -> str:
        while b"\n" not in self._buf:
            chunk = await self._stream.receive_some()
            if not chunk:
                raise SystemExit("the worker process ended")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()


# -- the canceller -----------------------------------------------------------------------
Sample = tuple[int, int, int]  # cancel call, from call, after return (ns)


async def hold(store: Store, wait_started: Any, held: int) -> None:
    """Start the ``held - 1`` jobs that keep the worker's other slots busy."""
    q = store.queue(QUEUE)
    for job_id in [await q.enqueue("held") for _ in range(held - 1)]:
        await wait_started(job_id)


async def sample(store: Store, wait_started: Any, wait_seen: Any, rng: random.Random) -> Sample:
    q = store.queue(QUEUE)
    job_id = await q.enqueue("x")
    await wait_started(job_id)
    await trio.sleep(rng.uniform(0, 0.02))
    t0 = time.monotonic_ns()
    assert await q.cancel(job_id)
    t1 = time.monotonic_ns()
    seen = await wait_seen(job_id)
    return t1 - t0, seen - t0, seen - t1


async def run_same(engine: str, location: str, dsn: str, n: int, held: int) -> list[Sample]:
    rng = random.Random(1)
    started: dict[int, trio.Event] = {}
    seen: dict[int, int] = {}
    seen_event: dict[int, trio.Event] = {}

    def event(d: dict[int, trio.Event], job_id: int) -> trio.Event:
        return d.setdefault(job_id, trio.Event())

    def on_start(job_id: int) -> None:
        event(started, job_id).set()

    def on_seen(job_id: int, ns: int) -> None:
        seen[job_id] = ns
        event(seen_event, job_id).set()

    async def wait_started(job_id: int) -> None:
        await event(started, job_id).wait()

    async def wait_seen(job_id: int) -> int:
        await event(seen_event, job_id).wait()
        return seen[job_id]

    async with open_store(engine, location, dsn) as store, trio.open_nursery() as nursery:
        await nursery.start(lambda task_status: store.queue(QUEUE).work(
            make_handler(on_start, on_seen), concurrency=held, poll_interval=30.0,
            task_status=task_status))
        out = []
        with trio.fail_after(30 + n):
            await hold(store, wait_started, held)
            for _ in range(n + WARMUP):
                out.append(await sample(store, wait_started, wait_seen, rng))
        nursery.cancel_scope.cancel()
    return out[WARMUP:]


async def run_cross(engine: str, location: str, dsn: str, n: int, held: int) -> list[Sample]:
    rng = random.Random(2)
    if engine == "sqlite":  # the schema exists before the child opens the file
        async with open_store(engine, location, dsn):
            pass
    process = await trio.lowlevel.open_process(
        [sys.executable, __file__, "--child", engine, location, "--dsn", dsn,
         "--held", str(held)],
        stdin=-1, stdout=-1,  # subprocess.PIPE
    )  # fmt: skip
    assert process.stdout is not None and process.stdin is not None
    lines = Lines(process.stdout)
    try:
        with trio.fail_after(60):
            assert await lines.next() == "ready"
        # Lines read ahead of the one awaited (the held jobs may start in
        # any order), by (kind, job id).
        pending: dict[tuple[str, int], list[str]] = {}

        async def expect(kind: str, job_id: int) -> list[str]:
            while (kind, job_id) not in pending:
                words = (await lines.next()).split()
                pending[words[0], int(words[1])] = words
            return pending.pop((kind, job_id))

        async def wait_started(job_id: int) -> None:
            await expect("started", job_id)

        async def wait_seen(job_id: int) -> int:
            return int((await expect("seen", job_id))[2])

        async with open_store(engine, location, dsn) as store:
            out = []
            with trio.fail_after(30 + n):
                await hold(store, wait_started, held)
                for _ in range(n + WARMUP):
                    out.append(await sample(store, wait_started, wait_seen, rng))
        return out[WARMUP:]
    finally:
        with trio.CancelScope(shield=True):
            await process.stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


def ms(ns: float) -> str:
    return f"{ns / 1e6:7.2f}"


def summarize(label: str, samples: list[Sample]) -> str:
    cols = []
    for i in range(3):
        values = sorted(s[i] for s in samples)
        p50 = statistics.median(values)
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        cols.append(f"{ms(p50)} {ms(p95)}")
    return f"| {label:<16} | {len(samples):>4} | " + " | ".join(cols) + " |"


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--engines", default="sqlite,postgres")
    parser.add_argument("--modes", default="same,cross")
    parser.add_argument("--held", type=int, default=1,
                        help="jobs the worker holds at each cancel (its concurrency)")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "LOCATION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        trio.run(child, args.child[0], args.child[1], args.dsn, args.held)
        return
    if args.held < 1:
        parser.error("--held must be at least 1")
    print(f"ms: p50 p95 per column; the worker holds {args.held} job(s) at each cancel")
    print("| engine, mode     |    n | cancel call     | from call       | after return    |")
    print("|---|---|---|---|---|")
    for engine in args.engines.split(","):
        for mode in args.modes.split(","):
            run = run_same if mode == "same" else run_cross
            if engine == "sqlite":
                with tempfile.TemporaryDirectory() as tmp:
                    samples = trio.run(run, engine, os.path.join(tmp, "bench.db"), args.dsn,
                                       args.samples, args.held)  # fmt: skip
            else:
                schema = "alk_bench_" + secrets.token_hex(4)
                try:
                    samples = trio.run(run, engine, schema, args.dsn, args.samples, args.held)
                finally:
                    drop_schema(args.dsn, schema)
            print(summarize(f"{engine}, {mode}", samples), flush=True)


if __name__ == "__main__":
    main()
