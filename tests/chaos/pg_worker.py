"""A worker process for the Postgres chaos tests and ``bench/chaos.py``.

Run as ``python -m tests.chaos.pg_worker DSN SCHEMA LOG`` from the repository
root. It runs ``Queue.work`` on the queue ``chaos`` (visibility timeout 2 s,
concurrency 4), listens on the channel ``chaos`` and subscribes to the
stream ``chaos``, until killed, and appends one line per event to LOG with a
single O_APPEND write (lines from several processes never interleave):

- ``ready <pid> <t>`` once it works,
- ``done <payload> <pid> <t>`` when a handler returns,
- ``wake <channel> <pid> <t>`` for each wake on the channel (the reconnect
  wake included),
- ``event <payload> <pid> <t>`` for each stream event delivered.

``t`` is ``time.time()``: the tests compare lines, ``bench/chaos.py`` times.
"""

from __future__ import annotations

import os
import sys
import time
from functools import partial

import trio

from alkstore import Job
from alkstore.io_trio import ListenerOptions, PostgresOptions, open_postgres

QUEUE = "chaos"
CHANNEL = "chaos"
STREAM = "chaos"
VISIBILITY_TIMEOUT = 2.0
CONCURRENCY = 4


def log_line(path: str, *fields: object) -> None:
    line = " ".join(str(f) for f in (*fields, os.getpid(), f"{time.time():.6f}")) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def options(schema: str) -> PostgresOptions:
    return PostgresOptions(
        schema=schema,
        pool_size=CONCURRENCY + 1,
        connect_timeout=2.0,
        response_timeout=2.0,
        listener=ListenerOptions(
            connect_timeout=2.0, reconnect_cap=0.5, probe_interval=0.5, probe_timeout=0.5
        ),
    )


async def main(dsn: str, schema: str, log: str) -> None:
    async def handle(job: Job) -> None:
        await trio.sleep(0.002)
        log_line(log, "done", job.payload)

    async with open_postgres(dsn, options=options(schema)) as store:
        queue = store.queue(QUEUE, visibility_timeout=VISIBILITY_TIMEOUT)

        async def wakes() -> None:
            async with store.listen(CHANNEL) as rx:
                while True:
                    wake = await rx.recv()
                    log_line(log, "wake", wake.channel)

        async def events() -> None:
            async with store.stream(STREAM).subscribe(f"c{os.getpid()}") as sub:
                while True:
                    event = await sub.recv()
                    if event is not None:
                        log_line(log, "event", event.payload)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wakes)
            nursery.start_soon(events)
            await nursery.start(partial(queue.work, handle, concurrency=CONCURRENCY))
            log_line(log, "ready")


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
