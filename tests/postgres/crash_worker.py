"""A worker process for ``test_crash.py``, killed with SIGKILL at random.

Run as ``python -m tests.postgres.crash_worker SCHEMA LOG SEED`` from the
repository root. It runs ``Queue.work`` on the queue ``crash`` (visibility
timeout 1 s, concurrency 4) until killed, and appends one line per event to
LOG with a single O_APPEND write (lines from several processes never
interleave):

- ``start <id> <pid> <attempts>`` when the handler begins,
- ``done <id> <pid> <attempts>`` when it returns (the job is finished),
- ``ack <id> <pid>`` after an ack the database accepted.
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

import trio

from alkstore import Job

QUEUE = "crash"
VISIBILITY_TIMEOUT = 1.0
CONCURRENCY = 4


def log_line(path: str, *fields: object) -> None:
    line = " ".join(str(f) for f in fields) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


async def main(schema: str, log: str, seed: int) -> None:
    from tests.postgres.pg import open_pg

    rng = random.Random(seed)
    pid = os.getpid()
    import alkstore.services.worker.settler as worker_module

    real_ack = worker_module.Settler._ack

    async def logged_ack(self: Any, jobs: Any) -> Any:
        # Logged once the worker's batch ack has committed.
        acked = await real_ack(self, jobs)
        for job_id in sorted(acked or ()):
            log_line(log, "ack", job_id, pid)
        return acked

    worker_module.Settler._ack = logged_ack  # type: ignore[method-assign]

    async def handle(job: Job) -> None:
        log_line(log, "start", job.id, pid, job.attempts)
        await trio.sleep(rng.uniform(0.01, 0.08))
        log_line(log, "done", job.id, pid, job.attempts)

    async with open_pg(schema, pool_size=CONCURRENCY) as store:
        queue = store.queue(QUEUE, visibility_timeout=VISIBILITY_TIMEOUT)
        log_line(log, "ready", 0, pid)
        await queue.work(handle, concurrency=CONCURRENCY, poll_interval=0.5)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
