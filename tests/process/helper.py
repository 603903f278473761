"""The other process in the cross-process tests.

Run as ``python -m tests.process.helper COMMAND BACKEND LOCATION ...`` from the
repository root:

- ``enqueue QUEUE PAYLOAD_JSON``: enqueue one job, print ``<id> <monotonic>``
  (``time.monotonic()`` right after the commit; CLOCK_MONOTONIC is shared by
  every process on the machine).
- ``notify CHANNEL``: notify once, print ``<monotonic>`` after the commit.
- ``worker QUEUE LOG VT``: run ``Queue.work`` on QUEUE (visibility timeout VT
  seconds) with ``handle`` below, logging to LOG, until killed.
- ``workflow-worker QUEUE LOG VT``: the same with ``workflow_step`` below,
  the handler of the workflow a kill test runs.

The handler and the ack log are shared with the test process, so both sides
write the same record of what happened.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import orjson
import trio

from alkstore import Job


def log_line(path: str, *fields: object) -> None:
    """One line, one O_APPEND write: lines from several processes never interleave."""
    line = " ".join(str(f) for f in fields) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_log(path: str) -> list[list[str]]:
    try:
        with open(path) as f:
            return [line.split() for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def logging_ack(path: str, real_ack: Any) -> Any:
    """The worker's batch ack (``Settler._ack``), also logging every job it
    acked, once the ack committed (one line per job id)."""

    async def logged_ack(self: Any, jobs: Any) -> Any:
        acked = await real_ack(self, jobs)
        for job_id in sorted(acked or ()):
            log_line(path, "ack", job_id, os.getpid(), self.ctx.worker_id)
        return acked

    return logged_ack


def make_handler(path: str) -> Any:
    async def handle(job: Job) -> None:
        log_line(path, "start", job.id, os.getpid(), job.attempts, f"{time.time():.6f}")
        payload = job.payload
        if isinstance(payload, dict) and payload.get("block") and job.attempts == 1:
            await trio.sleep_forever()  # until this process is killed
        log_line(path, "done", job.id, os.getpid(), job.attempts, f"{time.time():.6f}")

    return handle


def workflow_step(path: str) -> Any:
    """A step of the kill tests' workflow: ``{"n": N}`` returns N * N after
    a while; ``{"fail": true}`` raises; ``{"sum": true}`` returns the sum
    and count of its dependencies' results, read when it runs (logging
    ``early`` if one of them has none: it had not finished)."""

    async def handle(job: Job) -> Any:
        log_line(path, "start", job.id, os.getpid(), job.attempts, f"{time.time():.6f}")
        payload = job.payload
        assert isinstance(payload, dict)
        # 0.2-0.6 s, varied by job: long enough for kills to land mid-step
        await trio.sleep(0.2 + (job.id * 7919 % 40) / 100)
        if payload.get("fail"):
            raise RuntimeError("this step always fails")
        result: Any
        if payload.get("sum"):
            results = await job.dependency_results()
            if any(value is None for value in results.values()):
                log_line(path, "early", job.id, os.getpid())  # a dependency had not finished
            total = sum(value for value in results.values() if isinstance(value, int))
            result = {"total": total, "count": len(results)}
        else:
            result = payload["n"] * payload["n"]
        log_line(path, "done", job.id, os.getpid(), job.attempts, f"{time.time():.6f}")
        return result

    return handle


async def _main(argv: list[str]) -> None:
    from tests.backends import BACKENDS

    command, backend_id, location, *rest = argv
    backend = BACKENDS[backend_id]
    async with backend.open(location, clock=None) as store:
        if command == "enqueue":
            queue, payload = rest
            job_id = await store.queue(queue).enqueue(orjson.loads(payload))
            print(job_id, f"{time.monotonic():.6f}", flush=True)
        elif command == "notify":
            (channel,) = rest
            await store.notify(channel)
            print(f"{time.monotonic():.6f}", flush=True)
        elif command == "worker":
            queue, log, vt = rest
            import alkstore.services.worker.settler as worker_module

            worker_module.Settler._ack = logging_ack(log, worker_module.Settler._ack)  # type: ignore[method-assign]
            q = store.queue(queue, visibility_timeout=float(vt))
            await q.work(make_handler(log), worker_id=f"proc-{os.getpid()}", poll_interval=60)
        elif command == "workflow-worker":
            queue, log, vt = rest
            q = store.queue(queue, visibility_timeout=float(vt))
            await q.work(workflow_step(log), worker_id=f"proc-{os.getpid()}", concurrency=4,
                         poll_interval=60)  # fmt: skip
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    trio.run(_main, sys.argv[1:])
