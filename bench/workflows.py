"""A 10,000-way fan-out into one fan-in step, against plain ``work()``.

    python bench/workflows.py [--engines sqlite,postgres] [--jobs 10000] [--rounds 3]
                              [--driver trio|asyncio] [--concurrency 10] [--no-celery]

Per engine, on a fresh database each round, in one process:

- ``plain``: ``--jobs`` jobs enqueued in batches, then ``queue.work(handler)``
  (``--concurrency`` slots) with a no-op handler until every job is acked.
- ``chord``: a workflow of N steps and a ``join`` step after all of them
  (Celery's chord: a group, then a callback), enqueued in one transaction,
  then the same worker until ``join`` is acked: each step returns a small
  result, and ``join`` reads all N results and returns their sum (checked).
  Every job is kept (moved into history with its result); each ack round
  counts its jobs off the join's count of unfinished dependencies.
- ``split``: the same with a ``split`` step first that the N steps wait
  for: its ack releases all N into the queue in one transaction.

Each is timed two ways: ``process`` from the worker's start to the last
ack, and ``total`` with the enqueue too. Rates are jobs/s (N + 1 jobs for
the chord, N + 2 for the split); the ratios are against plain, the issue's
target >= 0.5x.

Celery's chord (``chord(group(N tasks), callback)`` on Redis, results on
Redis) runs side by side when ``bench/.peers`` has Celery (``python
bench/install_peers.py``) and Redis answers on ``--redis``: the same N
small tasks, timed from the chord's send to its callback's result, and a
plain group of N tasks without results for its own ratio; its worker is one
``celery worker`` process with ``--concurrency`` threads.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent / "workloads"))
from common import DSN, fresh_schema

from alkstore import Job, Store, io_asyncio, io_trio

HERE = Path(__file__).resolve().parent
PEERS_PYTHON = HERE / ".peers" / "bin" / "python"
QUEUE = "wf"
KINDS = ("plain", "chord", "split")


def open_store(args: argparse.Namespace, engine: str, where: str) -> Any:
    mod = io_trio if args.driver == "trio" else io_asyncio
    if engine == "sqlite":
        return mod.open_sqlite(where)
    return mod.open_postgres(args.dsn, options=mod.PostgresOptions(schema=where))


async def work_until(
    args: argparse.Namespace,
    store: Store,
    handler: Callable[[Job], Awaitable[Any]],
    done: Callable[[], Awaitable[None]],
) -> None:
    """Run the worker until ``done()`` returns, then stop it."""
    q = store.queue(QUEUE)
    if args.driver == "trio":
        async with trio.open_nursery() as n:
            n.start_soon(lambda: q.work(handler, concurrency=args.concurrency))
            await done()
            n.cancel_scope.cancel()
    else:
        import asyncio
        import contextlib

        task = asyncio.create_task(q.work(handler, concurrency=args.concurrency))
        try:
            await done()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def plain(args: argparse.Namespace, store: Store) -> dict[str, float]:
    n = args.jobs
    q = store.queue(QUEUE)
    start = time.perf_counter()
    for first in range(0, n, 1000):
        await q.enqueue_batch([{"i": i} for i in range(first, min(n, first + 1000))])
    enqueued = time.perf_counter()
    count = 0
    finished = trio.Event() if args.driver == "trio" else _asyncio_event()

    async def handler(job: Job) -> None:
        nonlocal count
        count += 1
        if count >= n:
            finished.set()

    async def done() -> None:
        await finished.wait()
        while (s := await q.stats()).ready + s.scheduled + s.processing:
            await _sleep(args, 0.002)

    await work_until(args, store, handler, done)
    end = time.perf_counter()
    return {"jobs": n, "enqueue_s": enqueued - start, "process_s": end - enqueued,
            "total_s": end - start}  # fmt: skip


async def fan_out(args: argparse.Namespace, store: Store, *, split: bool) -> dict[str, float]:
    n = args.jobs
    start = time.perf_counter()
    wf = store.workflow("fan-out")
    first = [wf.step("split", QUEUE, {"split": True})] if split else []
    parts = [wf.step(f"p{i}", QUEUE, {"i": i}, after=first) for i in range(n)]
    wf.step("join", QUEUE, {"join": True}, after=parts)
    run = await wf.enqueue()
    enqueued = time.perf_counter()
    joined: list[int] = []

    async def handler(job: Job) -> Any:
        payload = job.payload
        assert isinstance(payload, dict)
        if "i" in payload:
            return payload["i"]
        if payload.get("join"):
            results = await job.dependency_results()
            joined.append(len(results))
            return sum(v for v in results.values() if isinstance(v, int))
        return None

    async def done() -> None:
        await run.result("join", timeout=600)

    await work_until(args, store, handler, done)
    end = time.perf_counter()
    total = await run.result("join")
    assert joined == [n] and total == n * (n - 1) // 2, (joined, total)
    return {"jobs": n + 1 + split, "enqueue_s": enqueued - start, "process_s": end - enqueued,
            "total_s": end - start}  # fmt: skip


def _asyncio_event() -> Any:
    import asyncio

    return asyncio.Event()


async def _sleep(args: argparse.Namespace, s: float) -> None:
    if args.driver == "trio":
        await trio.sleep(s)
    else:
        import asyncio

        await asyncio.sleep(s)


async def one(args: argparse.Namespace, engine: str, kind: str, tmp: Path) -> dict[str, float]:
    if engine == "sqlite":
        where = str(tmp / f"{kind}-{time.monotonic_ns()}.db")
    else:
        where = fresh_schema("wf")
    try:
        async with open_store(args, engine, where) as store:
            if kind == "plain":
                return await plain(args, store)
            return await fan_out(args, store, split=kind == "split")
    finally:
        if engine == "postgres":
            import psycopg

            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{where}" CASCADE')


def run_alkstore(args: argparse.Namespace, engine: str, tmp: Path) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for r in range(args.rounds):
        for kind in KINDS:
            if args.driver == "trio":
                got = trio.run(one, args, engine, kind, tmp)
            else:
                import asyncio

                got = asyncio.run(one(args, engine, kind, tmp))
            rounds[kind].append(got)
            print(f"  {engine} {kind:8} round {r + 1}: "
                  f"process {got['jobs'] / got['process_s']:8,.0f} jobs/s, "
                  f"total {got['jobs'] / got['total_s']:8,.0f} jobs/s", flush=True)  # fmt: skip
    return {kind: _rates(rs) for kind, rs in rounds.items()}


def _rates(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {
        "process": statistics.median(r["jobs"] / r["process_s"] for r in rounds),
        "total": statistics.median(r["jobs"] / r["total_s"] for r in rounds),
    }


def redis_up(url: str) -> bool:
    host, _, port = url.removeprefix("redis://").split("/")[0].partition(":")
    try:
        with socket.create_connection((host, int(port or 6379)), timeout=1):
            return True
    except OSError:
        return False


def run_celery(args: argparse.Namespace) -> dict[str, Any] | str:
    """Celery's figures, or why there are none."""
    if args.no_celery:
        return "not asked for (--no-celery)"
    if not PEERS_PYTHON.exists():
        return "bench/.peers is not installed (python bench/install_peers.py)"
    check = subprocess.run([str(PEERS_PYTHON), "-c", "import celery, redis"], capture_output=True)
    if check.returncode:
        return "Celery is not installed in bench/.peers"
    if not redis_up(args.redis):
        return f"Redis does not answer at {args.redis}"
    out = subprocess.run(
        [str(PEERS_PYTHON), str(HERE / "workloads" / "celery_chord.py"), "--jobs",
         str(args.jobs), "--rounds", str(args.rounds), "--concurrency", str(args.concurrency),
         "--redis", args.redis],
        capture_output=True, text=True, timeout=3600, cwd=HERE.parent,
    )  # fmt: skip
    if out.returncode:
        return f"the Celery run failed: {out.stderr.strip().splitlines()[-1:]}"
    sys.stdout.write(out.stdout.rsplit("\n", 2)[0] + "\n")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--engines", default="sqlite,postgres")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--driver", choices=("trio", "asyncio"), default="trio")
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--dsn", default=DSN)
    p.add_argument("--redis", default="redis://127.0.0.1:6379/15")
    p.add_argument("--no-celery", action="store_true")
    p.add_argument("--json", type=Path, help="also write the figures here")
    args = p.parse_args()
    import tempfile

    figures: dict[str, Any] = {"jobs": args.jobs, "rounds": args.rounds, "driver": args.driver,
                               "concurrency": args.concurrency}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for engine in args.engines.split(","):
            figures[engine] = run_alkstore(args, engine, Path(tmp))
    figures["celery"] = run_celery(args)
    print(f"\n{args.jobs:,}-way fan-out into one fan-in, medians of {args.rounds} "
          f"(jobs/s; ratio to plain):")  # fmt: skip
    for engine in args.engines.split(","):
        f = figures[engine]
        for how in ("process", "total"):
            line = f"  {engine:8} {how:7}: plain {f['plain'][how]:8,.0f}"
            for kind in KINDS[1:]:
                ratio = f[kind][how] / f["plain"][how]
                f[f"ratio_{kind}_{how}"] = ratio
                line += f"  {kind} {f[kind][how]:8,.0f} ({ratio:.2f}x)"
            print(line)
    celery = figures["celery"]
    if isinstance(celery, dict):
        print(f"  celery   chord on Redis: {celery['chord']:8,.0f} jobs/s, plain group "
              f"{celery['group']:8,.0f} jobs/s, ratio {celery['chord'] / celery['group']:.2f}x")
        for engine in args.engines.split(","):
            mine = figures[engine]["chord"]["total"]
            print(f"  {engine} chord / celery chord (enqueue to join): "
                  f"{mine / celery['chord']:.2f}x")  # fmt: skip
    else:
        print(f"  celery: not run ({celery})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
