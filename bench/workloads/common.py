"""What every workload script of ``bench/suite.py`` shares.

A workload script is ``python bench/workloads/<system>.py WORKLOAD [options]``.
It runs one workload once, in a fresh process, on a fresh database (a file in
``--dir``, or a fresh Postgres schema it drops at the end), and prints one
JSON object on its last line of stdout:

    {"jobs": 20000, "seconds": 1.23}                      # throughput
    {"jobs": 2000, "seconds": 1.0, "p50_ms": .., "p99_ms": ..}   # latency too
    {"jobs": 0, "seconds": 5.0, "cpu_s": .., "cpu_pct": 0.08}     # idle
    {"jobs": 100000, "seconds": .., "rss_start_mb": .., "rss_end_mb": .., "rss_growth": 1.02}
    {"skipped": "why"}                                     # not offered by the system

Rates are ``jobs / seconds``; ``seconds`` covers only the measured phase
(set-up, such as filling a queue before a processing run, is not timed).

Workloads (the same names for every system; each system implements what it
offers):

- ``enqueue-single``: ``--jobs`` enqueues, one per transaction, one task.
- ``enqueue-concurrent``: the same from ``--concurrency`` tasks at once.
- ``enqueue-batch``: ``--jobs`` enqueues in transactions of ``--batch``.
- ``process``: ``--jobs`` jobs already enqueued; process them all with a
  no-op handler through the system's worker runtime (``--concurrency`` slots,
  ``--processes`` worker processes, the system's default batch otherwise);
  timed from the workers' start to the last job acked.
- ``process-batch``: the same through the bare claim-batch/ack-batch loop
  (no worker runtime), for systems that have one.
- ``process-sleep``: like ``process``, with a handler that sleeps ``--sleep-ms``
  (I/O-bound jobs: concurrency should turn into throughput).
- ``latency``: enqueue one job at a time at ``--rate`` jobs/s (a fraction of
  the maximum) while a worker runs; report p50/p99 of enqueue-return to
  handler-start, in ms.
- ``idle``: the system's worker runtime with its default options and a no-op
  handler on an empty queue; after ``SETTLE_S`` (1 s), the worker process's
  CPU time (every thread: ``time.process_time()`` in that process) over
  ``--idle-seconds`` of wall time, as a percentage of one core (``cpu_pct``).
  No jobs.
- ``memory``: like ``process`` (the same fill, ``--concurrency`` slots), in
  one worker process of its own; its resident set (``VmRSS`` of
  ``/proc/<pid>/status``) once 10% of the jobs have run (``rss_start_mb``)
  and once all have (``rss_end_mb``), their ratio (``rss_growth``: 1.0 is
  flat) and the peak (``VmHWM``, ``rss_peak_mb``). MB are MiB.

Payloads are 100 bytes of JSON: ``payload(i)``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
WORKLOADS = (
    "enqueue-single",
    "enqueue-concurrent",
    "enqueue-batch",
    "process",
    "process-batch",
    "process-sleep",
    "latency",
    "idle",
    "memory",
)
SETTLE_S = 1.0  # idle: the worker runs this long before the measured window


_PADS = {n: "x" * max(0, 100 - len(json.dumps({"i": 10**n, "kind": "bench", "pad": ""},
                                                 separators=(",", ":"))) - 1)
         for n in range(19)}  # fmt: skip


def payload(i: int) -> dict[str, Any]:
    """A job payload whose JSON is about 100 bytes (cheap to make: the
    benchmark must not measure itself)."""
    return {"i": i, "kind": "bench", "pad": _PADS[len(str(abs(i))) - 1]}


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=WORKLOADS)
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--processes", type=int, default=1)
    p.add_argument("--sleep-ms", type=float, default=1.0)
    p.add_argument("--rate", type=float, default=500.0)
    p.add_argument("--idle-seconds", type=float, default=5.0)
    p.add_argument("--driver", choices=("trio", "asyncio"), default="trio")
    p.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)  # a spawned worker
    p.add_argument("--variant", default="")
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--dsn", default=DSN)
    return p.parse_args(argv)


def fresh_schema(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def report(**fields: Any) -> None:
    """The workload's one result line (the suite reads the last line)."""
    print(json.dumps(fields), flush=True)


def skipped(why: str) -> None:
    report(skipped=why)
    sys.exit(0)


def latency_fields(samples_s: Sequence[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples_s)
    if not ms:
        return {}
    return {
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max_ms": ms[-1],
    }


def report_latency(jobs: int, first: float, returned: Sequence[float],
                   started: Sequence[float]) -> None:
    """The latency workload's result from a peer's board: each job's handler
    start against its enqueue's return (``first``: the first enqueue began)."""
    report(
        jobs=jobs,
        seconds=max(started) - first,
        **latency_fields([s - r for s, r in zip(started, returned, strict=True)]),
    )  # fmt: skip


def idle_fields(cpu_s: float, seconds: float) -> dict[str, Any]:
    """The idle workload's result: ``cpu_s`` of CPU over ``seconds`` of wall time."""
    return {"jobs": 0, "seconds": seconds, "cpu_s": cpu_s, "cpu_pct": 100 * cpu_s / seconds}


def status_mb(pid: int | str, field: str = "VmRSS") -> float:
    """A memory figure of ``/proc/<pid>/status`` (``VmRSS``: resident now,
    ``VmHWM``: the peak), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


def memory_fields(
    jobs: int, seconds: float, start_mb: float, end_mb: float, peak_mb: float
) -> dict[str, Any]:
    """The memory workload's result: resident set after 10% and after all jobs."""
    return {"jobs": jobs, "seconds": seconds, "rss_start_mb": start_mb, "rss_end_mb": end_mb,
            "rss_growth": end_mb / start_mb, "rss_peak_mb": peak_mb}  # fmt: skip


class Timer:
    """Wall time, and this process's CPU time (all threads), of a block."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        self.cpu = time.process_time() - self.cpu_start
