"""Celery's side of ``bench/workflows.py``: a chord of N small tasks into one
callback, on Redis (broker and results), and a plain group of N tasks.

    bench/.peers/bin/python bench/workloads/celery_chord.py --jobs 10000 --rounds 3

One ``celery worker`` process with its defaults (the prefork pool, one
child per core) runs the tasks; this process sends the work and waits:

- ``chord``: ``chord(square.s(i) for i in range(N))(total.s())``, timed from
  before the send to the callback's result (checked), the figure beside
  alkstore's fan-out ``total``. Every task stores its result in Redis, as
  a chord needs.
- ``group``: ``group(count.si() for _ in range(N))`` with results ignored,
  timed from the send until the tasks' counter in Redis reaches N (the
  counter's INCR is the task's only work): Celery's own plain figure.

Prints its rounds, then one JSON line with the medians (jobs/s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import redis
from celery import Celery, chord, group

URL = os.environ.get("CELERY_BENCH_REDIS", "redis://127.0.0.1:6379/15")
COUNTER = "alkstore-bench:count"

app = Celery("celery_chord", broker=URL, backend=URL)
app.conf.update(worker_hijack_root_logger=False, result_expires=3600)


@app.task(name="bench.square")
def square(i: int) -> int:
    return i * i


@app.task(name="bench.total")
def total(values: list[int]) -> int:
    return sum(values)


@app.task(name="bench.count", ignore_result=True)
def count() -> None:
    redis.Redis.from_url(URL).incr(COUNTER)


def start_worker(pool: list[str]) -> subprocess.Popen[bytes]:
    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, CELERY_BENCH_REDIS=URL, PYTHONPATH=path)
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_chord", "worker", "--loglevel=WARNING",
         "--without-gossip", "--without-mingle", *pool],
        env=env, cwd=here, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def wait_ready() -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if app.control.ping(timeout=0.5):
            return
    raise SystemExit("the celery worker did not answer within 60 s")


def one_chord(n: int) -> float:
    start = time.perf_counter()
    result = chord(square.s(i) for i in range(n))(total.s())
    # Polled, not ``result.get()``: a chord's get re-walks all N parent
    # results on each wake-up and, here, never returned once the callback
    # had stored its result.
    while not result.ready():
        time.sleep(0.005)
    seconds = time.perf_counter() - start
    got = result.result
    assert got == sum(i * i for i in range(n)), got
    return (n + 1) / seconds


def one_group(n: int, r: redis.Redis) -> float:
    r.delete(COUNTER)
    start = time.perf_counter()
    group(count.si() for _ in range(n)).apply_async()
    while int(r.get(COUNTER) or 0) < n:
        time.sleep(0.002)
    return n / (time.perf_counter() - start)


def main() -> None:
    global URL
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=10)  # alkstore's; Celery keeps its own
    p.add_argument("--redis", default=URL)
    p.add_argument("--pool", default="", help="celery worker's --pool (default: its own)")
    args = p.parse_args()
    URL = args.redis
    app.conf.update(broker_url=URL, result_backend=URL)
    r = redis.Redis.from_url(URL)
    # The database is emptied between rounds and at the end: it must be
    # this benchmark's alone.
    if r.dbsize():
        raise SystemExit(f"{URL} is not empty: give --redis a database of its own")
    pool = [f"--pool={args.pool}", f"--concurrency={args.concurrency}"] if args.pool else []
    worker = start_worker(pool)
    try:
        wait_ready()
        chords, groups = [], []
        for i in range(args.rounds):
            chords.append(one_chord(args.jobs))
            groups.append(one_group(args.jobs, r))
            print(f"  celery   chord    round {i + 1}: {chords[-1]:8,.0f} jobs/s; "
                  f"group {groups[-1]:8,.0f} jobs/s", flush=True)  # fmt: skip
            r.flushdb()
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        r.flushdb()
    worker_kind = "celery worker, prefork pool, its default concurrency"
    print(json.dumps({"chord": statistics.median(chords), "group": statistics.median(groups),
                      "worker": worker_kind}))  # fmt: skip


if __name__ == "__main__":
    main()
