"""One process of one alkstore release on a shared database.

Run it with ``PYTHONPATH`` pointing at the release's code (an earlier
release unpacked from git, or this checkout): it uses only the public API
every release since schema version 3 has, so the same program plays the old
and the new code of a rolling deploy.

    python actor.py ENGINE LOCATION fill N        # N jobs (ids on stdout), scheduled, dead
    python actor.py ENGINE LOCATION run TAG OUT
    python actor.py ENGINE LOCATION produce TAG OUT   # run's producer alone
    python actor.py ENGINE LOCATION work TAG OUT      # run's worker alone
    python actor.py ENGINE LOCATION claim         # claim_one from queue q, ack it
    python actor.py ENGINE LOCATION open          # open, print the schema version

``run`` enqueues a job every few milliseconds and works queue ``q`` with
four handlers until its standard input ends (the test closes it, or dies),
then drains. It appends ``E id``
for each job it enqueued and ``A id`` for each job its handler finished to
OUT (flushed line by line, so the test reads progress while it runs). A
failure exits 1 with the traceback on stderr; ``open`` on a store it cannot
use, or ``claim`` refused, exits 3 with the error's class and message on
stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

import alkstore
from alkstore import Drain, Job
from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite


@asynccontextmanager
async def opened(engine: str, location: str) -> AsyncIterator[Any]:
    if engine == "sqlite":
        async with open_sqlite(location) as store:
            yield store
    else:
        options = PostgresOptions(schema=location, pool_size=4)
        async with open_postgres(os.environ["ALKSTORE_DSN"], options=options) as store:
            yield store


async def fill(store: Any, n: int) -> None:
    q = store.queue("q")
    ids = await q.enqueue_batch([{"by": "fill", "n": i} for i in range(n)])
    print(" ".join(map(str, ids)), flush=True)
    later = store.queue("later")
    for i in range(20):
        await later.enqueue({"n": i}, delay=3600)
    poison = store.queue("poison", max_attempts=1)
    for i in range(5):
        await poison.enqueue({"n": i})
        job = await poison.claim_one("filler")
        assert job is not None
        await job.fail(f"poison {i}")


async def produce(store: Any, tag: str, out: Path) -> None:
    q = store.queue("q")
    with out.open("a", buffering=1) as log, trio.CancelScope() as scope:

        async def watch() -> None:
            await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            n = 0
            while True:
                job_id = await q.enqueue({"by": tag, "n": n})
                log.write(f"E {job_id}\n")
                n += 1
                await trio.sleep(0.005)


async def claim(store: Any) -> None:
    job = await store.queue("q").claim_one("claimer")
    if job is not None:
        await job.ack()
    print("claimed" if job is not None else "nothing", flush=True)


async def run(store: Any, tag: str, out: Path, *, producing: bool = True) -> None:
    q = store.queue("q")
    drain = Drain()
    with out.open("a", buffering=1) as log:

        async def handler(job: Job) -> None:
            await trio.sleep(0.002)
            log.write(f"A {job.id}\n")

        async def produce() -> None:
            n = 0
            while producing and not drain.started:
                job_id = await q.enqueue({"by": tag, "n": n})
                log.write(f"E {job_id}\n")
                n += 1
                await trio.sleep(0.005)

        async def watch() -> None:
            await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
            drain.start(timeout=10)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            nursery.start_soon(produce)
            await q.work(handler, concurrency=4, drain=drain)


async def main(argv: list[str]) -> int:
    engine, location, mode, *rest = argv
    try:
        async with opened(engine, location) as store:
            if mode == "fill":
                await fill(store, int(rest[0]))
            elif mode == "run":
                await run(store, rest[0], Path(rest[1]))
            elif mode == "work":
                await run(store, rest[0], Path(rest[1]), producing=False)
            elif mode == "produce":
                await produce(store, rest[0], Path(rest[1]))
            elif mode == "claim":
                await claim(store)
            elif mode == "open":
                print("opened", flush=True)
            else:
                raise SystemExit(f"unknown mode {mode!r}")
    except alkstore.AlkstoreError as exc:
        if mode not in ("open", "claim"):
            raise
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(trio.run(main, sys.argv[1:]))
