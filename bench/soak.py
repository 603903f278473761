"""A soak: millions of jobs through one queue, watching the tables stay healthy.

    python bench/soak.py --engine postgres            # 2,000,000 jobs at 4,000/s
    python bench/soak.py --engine sqlite
    python bench/soak.py --engine postgres --jobs 500000 --rate 3000
    python bench/soak.py --smoke                      # both engines, seconds; writes nothing

A producer process offers jobs at a steady rate (every 100 ms it enqueues,
in one ``enqueue_batch``, what the rate owes since the start: the offered
rate does not drift when one batch is slow), and ``--workers`` worker
processes (``queue.work(concurrency=--concurrency)``) run them. One job in
``--retry-every`` fails its first attempt (a retry after the queue's
backoff, 0.2 s doubling, jittered); one in ``--dead-every`` fails every
attempt (3) and becomes a dead letter. The queue keeps ``--history``
seconds of job history, so the history table churns as well, pruned by
the stores' own housekeeping. Everything runs on one machine: the
database server, the producer, the workers and this sampler share its
cores.

Every ``--sample`` seconds (30) the sampler records the queue's depth and,
for each of alkstore's tables, on Postgres ``pg_total_relation_size`` (heap,
indexes, TOAST), the indexes' size, live and dead tuples and how often
autovacuum has run (``pg_stat_user_tables``); on SQLite the database file's
size, its pages and free pages, and the WAL's size (polled every 0.5 s, so
the window's largest WAL is recorded, not only its size at the sample).
The workers record, per window, the jobs their handlers finished and each
job's claim latency (handler start minus the moment the job became due:
its ``run_at``, which a retry moves to the end of its backoff).

The verdict, over the windows wholly inside the offered phase:

- **throughput holds**: jobs finished per second over the last 10% of the
  windows >= 0.9x the first 10%;
- **sizes are bounded**: no table (SQLite: the file, the WAL) is larger in
  the second half of the run than 1.5x its peak in the first half, plus
  1 MiB (a table that starts near empty needs the slack). Space that leaks
  with churn grows with the jobs processed, so it would double between the
  halves; space that is reused stays flat once the retention windows have
  passed.

Results: ``bench/results/soak-<engine>-<date>-<commit>.json`` (every
sample), ``.md`` (the verdict and a table over time) and ``.png`` (drawn by
``bench/soak_chart.py`` under the peers' interpreter, which has matplotlib;
without it, the PNG is skipped and the markdown says so). ``--smoke`` runs
each engine for a few seconds with 2 s samples, checks that samples and a
verdict come out and writes nothing. Exit status: 0 when the verdict
passes (or, with ``--smoke``, when everything ran), 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PEERS_PYTHON = ROOT / "bench" / ".peers" / "bin" / "python"
DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
QUEUE = "soak"
TICK_S = 0.1  # the producer's cadence
PAD = "x" * 60


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--engine", choices=("postgres", "sqlite"), default="postgres")
    p.add_argument("--jobs", type=int, default=2_000_000)
    p.add_argument("--rate", type=float, default=4000.0, help="jobs offered per second")
    p.add_argument("--workers", type=int, default=4, help="worker processes")
    p.add_argument("--concurrency", type=int, default=10, help="slots per worker")
    p.add_argument("--sample", type=float, default=30.0, help="seconds between samples")
    p.add_argument("--retry-every", type=int, default=100)
    p.add_argument("--dead-every", type=int, default=20_000)
    p.add_argument("--history", type=float, default=60.0, help="history retention, s")
    p.add_argument("--dsn", default=DSN)
    p.add_argument("--dir", default=None, help="where the SQLite file goes (a fresh temp dir)")
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--role", choices=("producer", "worker"), help=argparse.SUPPRESS)
    p.add_argument("--location", help=argparse.SUPPRESS)
    p.add_argument("--run-dir", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# -- the child processes (trio; alkstore imported only here) ---------------------------


def child(args: argparse.Namespace) -> None:
    import trio

    trio.run(producer if args.role == "producer" else worker, args)


def open_store(args: argparse.Namespace) -> Any:
    from alkstore import io_trio

    if args.engine == "sqlite":
        return io_trio.open_sqlite(args.location)
    options = io_trio.PostgresOptions(schema=args.location)
    return io_trio.open_postgres(args.dsn, options=options)


def the_queue(store: Any) -> Any:
    from alkstore import Backoff

    return store.queue(QUEUE, max_attempts=3, backoff=Backoff.of(base=0.2, cap=2.0))


async def wait_for_go(run_dir: Path, me: str) -> float:
    import trio

    (run_dir / f"ready-{me}").touch()
    go = run_dir / "go"
    while not go.exists():  # noqa: ASYNC110 (another process makes it)
        await trio.sleep(0.01)
    return float(go.read_text())


async def producer(args: argparse.Namespace) -> None:
    """Offer ``--jobs`` at ``--rate``; a line per window of what was offered."""
    import trio

    run_dir = Path(args.run_dir)
    offered: dict[int, int] = {}
    async with open_store(args) as store:
        q = the_queue(store)
        await q.set_retention(history=args.history, dead=None)
        t0 = await wait_for_go(run_dir, "producer")
        await trio.sleep_until(trio.current_time() + max(0.0, t0 - time.time()))
        sent = 0
        start = time.time()
        while sent < args.jobs:
            owed = min(args.jobs, int(args.rate * (time.time() - start))) - sent
            while owed > 0:
                n = min(owed, 1000)
                await q.enqueue_batch([{"i": i, "pad": PAD} for i in range(sent, sent + n)])
                w = int((time.time() - t0) // args.sample)
                offered[w] = offered.get(w, 0) + n
                sent += n
                owed -= n
            await trio.sleep(TICK_S)
        (run_dir / "producer.json").write_text(json.dumps({"offered": offered, "end": time.time()}))


class Failing(Exception):
    """A handler failure the soak asked for."""


async def worker(args: argparse.Namespace) -> None:
    """Run the queue until SIGTERM; a line per window of what the handlers did."""
    import trio

    from alkstore import Job

    run_dir = Path(args.run_dir)
    me = f"worker-{os.getpid()}"
    windows: dict[int, dict[str, Any]] = {}

    def window(now: float) -> dict[str, Any]:
        w = int((now - t0) // args.sample)
        if w not in windows:
            windows[w] = {"done": 0, "failed": 0, "lat_ms": []}
        return windows[w]

    async def handler(job: Job) -> None:
        now = time.time()
        win = window(now)
        win["lat_ms"].append(round((now - job.run_at.timestamp()) * 1000, 2))
        i = job.payload["i"]
        if i % args.dead_every == 0 or (i % args.retry_every == 0 and job.attempts == 1):
            win["failed"] += 1
            raise Failing(f"job {i}: failing on purpose (attempt {job.attempts})")
        win["done"] += 1

    async with open_store(args) as store:
        q = the_queue(store)
        await q.stats()  # connected, schema read
        t0 = await wait_for_go(run_dir, me)
        with trio.open_signal_receiver(signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(lambda: q.work(handler, concurrency=args.concurrency))

                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break
    (run_dir / f"{me}.json").write_text(json.dumps(windows))


# -- the sampler -------------------------------------------------------------------------


@dataclass
class Sampler:
    """Reads the database's sizes with a connection of its own (no alkstore)."""

    engine: str
    location: str
    dsn: str
    wal_peak: int = 0
    conn: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.engine == "postgres":
            import psycopg

            self.conn = psycopg.connect(self.dsn, autocommit=True)

    def depth(self) -> int:
        if self.engine == "postgres":
            row = self.conn.execute(f'SELECT count(*) FROM "{self.location}".jobs').fetchone()
            return int(row[0])
        import sqlite3

        with sqlite3.connect(f"file:{self.location}?mode=ro", uri=True, timeout=30) as c:
            return int(c.execute("SELECT count(*) FROM __alkstore_jobs").fetchone()[0])

    def poll_wal(self) -> None:
        if self.engine == "sqlite":
            wal = Path(self.location + "-wal")
            with contextlib.suppress(FileNotFoundError):
                self.wal_peak = max(self.wal_peak, wal.stat().st_size)

    def sample(self) -> dict[str, Any]:
        depth = self.depth()
        if self.engine == "postgres":
            rows = self.conn.execute(
                """SELECT c.relname, pg_total_relation_size(c.oid), pg_indexes_size(c.oid),
                          s.n_live_tup, s.n_dead_tup, s.autovacuum_count, s.autoanalyze_count,
                          s.vacuum_count
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
                   WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY c.relname""",
                (self.location,),
            ).fetchall()
            tables = {
                name: {
                    "bytes": total,
                    "index_bytes": idx,
                    "live": live,
                    "dead": dead,
                    "autovacuums": av,
                    "autoanalyzes": aa,
                    "vacuums": vac,
                }
                for name, total, idx, live, dead, av, aa, vac in rows
            }
            return {"depth": depth, "tables": tables}
        import sqlite3

        with sqlite3.connect(f"file:{self.location}?mode=ro", uri=True, timeout=30) as c:
            pages = c.execute("PRAGMA page_count").fetchone()[0]
            free = c.execute("PRAGMA freelist_count").fetchone()[0]
        self.poll_wal()
        wal_now = 0
        with contextlib.suppress(FileNotFoundError):
            wal_now = Path(self.location + "-wal").stat().st_size
        out = {
            "depth": depth,
            "file_bytes": Path(self.location).stat().st_size,
            "pages": pages,
            "free_pages": free,
            "wal_bytes": wal_now,
            "wal_peak_bytes": self.wal_peak,
        }
        self.wal_peak = wal_now
        return out

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# -- the run -----------------------------------------------------------------------------


def spawn(args: argparse.Namespace, role: str, location: str, run_dir: Path) -> subprocess.Popen:
    argv = [
        sys.executable,
        __file__,
        "--role",
        role,
        "--engine",
        args.engine,
        "--location",
        location,
        "--run-dir",
        str(run_dir),
        "--dsn",
        args.dsn,
        "--jobs",
        str(args.jobs),
        "--rate",
        str(args.rate),
        "--sample",
        str(args.sample),
        "--concurrency",
        str(args.concurrency),
        "--retry-every",
        str(args.retry_every),
        "--dead-every",
        str(args.dead_every),
        "--history",
        str(args.history),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    log = open(run_dir / f"{role}-{uuid.uuid4().hex[:6]}.log", "w")  # noqa: SIM115 (the child's)
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)


def migrate(args: argparse.Namespace, location: str) -> None:
    """Create the store once, before the children open it together."""
    import trio

    async def go() -> None:
        ns = argparse.Namespace(**{**vars(args), "location": location})
        async with open_store(ns):
            pass

    trio.run(go)


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="alk-soak-"))
    if args.engine == "sqlite":
        base = Path(args.dir) if args.dir else run_dir
        location = str(base / "soak.db")
    else:
        location = f"alk_soak_{uuid.uuid4().hex[:8]}"
    migrate(args, location)
    sampler = Sampler(args.engine, location, args.dsn)
    procs = [spawn(args, "producer", location, run_dir)]
    procs += [spawn(args, "worker", location, run_dir) for _ in range(args.workers)]
    samples: list[dict[str, Any]] = []
    ok = False
    try:
        deadline = time.time() + 120
        while len(list(run_dir.glob("ready-*"))) < len(procs):
            if time.time() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit(f"a child did not start; logs in {run_dir}")
            time.sleep(0.05)
        t0 = time.time() + 0.5
        (run_dir / "go").write_text(repr(t0))
        time.sleep(max(0.0, t0 - time.time()))
        samples.append({"t": 0.0, **sampler.sample()})
        next_sample = t0 + args.sample
        produced = False
        while True:
            time.sleep(0.5)
            sampler.poll_wal()
            for p in procs[1:]:
                if p.poll() is not None:
                    raise SystemExit(f"a worker exited ({p.returncode}); logs in {run_dir}")
            if procs[0].poll() is not None and not produced:
                if procs[0].returncode != 0:
                    raise SystemExit(f"the producer failed; logs in {run_dir}")
                produced = True
            now = time.time()
            if now >= next_sample:
                samples.append({"t": round(now - t0, 2), **sampler.sample()})
                print(_progress(samples[-1]), flush=True)
                next_sample += args.sample
            if produced and sampler.depth() == 0:
                break
        end = time.time()
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
        for p in procs[1:]:
            p.wait(60)
        samples.append({"t": round(end - t0, 2), **sampler.sample()})
        result = collect(args, location, run_dir, t0, end, samples)
        ok = True
        return result
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        sampler.close()
        cleanup(args, location)
        if ok:  # a failed run keeps its children's logs, as its message says
            shutil.rmtree(run_dir, ignore_errors=True)


def _progress(s: dict[str, Any]) -> str:
    if "tables" in s:
        jobs = s["tables"].get("jobs", {})
        size = sum(t["bytes"] for t in s["tables"].values())
        return (
            f"t={s['t']:7.1f}s depth={s['depth']:6d} tables={size / 2**20:7.1f} MiB "
            f"jobs={jobs.get('bytes', 0) / 2**20:6.1f} MiB dead_tup={jobs.get('dead')}"
        )
    return (
        f"t={s['t']:7.1f}s depth={s['depth']:6d} file={s['file_bytes'] / 2**20:7.1f} MiB "
        f"wal_peak={s['wal_peak_bytes'] / 2**20:5.1f} MiB"
    )


def cleanup(args: argparse.Namespace, location: str) -> None:
    if args.engine == "postgres":
        import psycopg

        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{location}" CASCADE')


def collect(
    args: argparse.Namespace,
    location: str,
    run_dir: Path,
    t0: float,
    end: float,
    samples: list[dict[str, Any]],
) -> dict[str, Any]:
    produced = json.loads((run_dir / "producer.json").read_text())
    per: dict[int, dict[str, Any]] = {}
    for f in run_dir.glob("worker-*.json"):
        for w, win in json.loads(f.read_text()).items():
            into = per.setdefault(int(w), {"done": 0, "failed": 0, "lat_ms": []})
            into["done"] += win["done"]
            into["failed"] += win["failed"]
            into["lat_ms"].extend(win["lat_ms"])
    offered = {int(w): n for w, n in produced["offered"].items()}
    windows = []
    for w in range(max([*per, *offered, 0]) + 1):
        win = per.get(w, {"done": 0, "failed": 0, "lat_ms": []})
        lat = sorted(win["lat_ms"])
        windows.append(
            {
                "window": w,
                "start_s": w * args.sample,
                "offered": offered.get(w, 0),
                "done": win["done"],
                "failed": win["failed"],
                "rate": win["done"] / args.sample,
                "claim_p50_ms": statistics.median(lat) if lat else None,
                "claim_p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None,
            }
        )
    return {
        "engine": args.engine,
        "config": {
            k: getattr(args, k)
            for k in (
                "jobs",
                "rate",
                "workers",
                "concurrency",
                "sample",
                "retry_every",
                "dead_every",
                "history",
            )
        },
        "seconds": end - t0,
        "producer_seconds": produced["end"] - t0,
        "finished": sum(w["done"] for w in windows),
        "failed_attempts": sum(w["failed"] for w in windows),
        "windows": windows,
        "samples": samples,
        "verdict": verdict(args, windows, samples, produced["end"] - t0),
    }


def sizes(engine: str, sample: dict[str, Any]) -> dict[str, int]:
    if engine == "postgres":
        return {name: t["bytes"] for name, t in sample["tables"].items()}
    return {"file": sample["file_bytes"], "wal": sample["wal_peak_bytes"]}


def verdict(
    args: argparse.Namespace,
    windows: list[dict[str, Any]],
    samples: list[dict[str, Any]],
    produced_s: float,
) -> dict[str, Any]:
    full = [w for w in windows if (w["window"] + 1) * args.sample <= produced_s]
    k = max(1, math.ceil(len(full) / 10))
    first = sum(w["done"] for w in full[:k]) / (k * args.sample) if full else 0.0
    last = sum(w["done"] for w in full[-k:]) / (k * args.sample) if full else 0.0
    throughput_ok = bool(full) and last >= 0.9 * first
    half = max(1, len(samples) // 2)
    early, late = samples[:half], samples[half:] or samples[-1:]
    bounds = {}
    for name in sizes(args.engine, samples[-1]):
        peak_early = max(sizes(args.engine, s).get(name, 0) for s in early)
        peak_late = max(sizes(args.engine, s).get(name, 0) for s in late)
        limit = int(1.5 * peak_early) + 2**20
        bounds[name] = {
            "first_half_peak": peak_early,
            "second_half_peak": peak_late,
            "limit": limit,
            "ok": peak_late <= limit,
        }
    # Every job ran to its end once: finished, or dead after its attempts.
    dead = len(range(0, args.jobs, args.dead_every))
    finished = sum(w["done"] for w in windows)
    all_ran = finished == args.jobs - dead
    return {
        "finished_expected": args.jobs - dead,
        "all_ran": all_ran,
        "windows_measured": len(full),
        "first_rate": first,
        "last_rate": last,
        "ratio": last / first if first else 0.0,
        "throughput_ok": throughput_ok,
        "sizes": bounds,
        "sizes_ok": all(b["ok"] for b in bounds.values()),
        "passed": all_ran and throughput_ok and all(b["ok"] for b in bounds.values()),
    }


# -- the report --------------------------------------------------------------------------


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def mib(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:.1f}"


def markdown(result: dict[str, Any], png: str | None) -> str:
    c, v = result["config"], result["verdict"]
    engine = {"postgres": "PostgreSQL", "sqlite": "SQLite"}[result["engine"]]
    lines = [
        f"# Soak on {engine}: {result['finished']:,} jobs",
        "",
        f"`python bench/soak.py --engine {result['engine']} --jobs {c['jobs']} "
        f"--rate {c['rate']:g}`"
        f" at {result['commit']} on {result['date']} ({result['machine']}).",
        "",
        f"{c['jobs']:,} jobs offered at {c['rate']:,.0f}/s by one producer, {c['workers']} worker "
        f"processes of {c['concurrency']} slots; one job in {c['retry_every']} retried once, "
        f"one in {c['dead_every']:,} dead after 3 attempts; history kept {c['history']:g} s; "
        f"samples every "
        f"{c['sample']:g} s. Offered for {result['producer_seconds']:.0f} s, all done after "
        f"{result['seconds']:.0f} s; {result['failed_attempts']:,} failed attempts.",
        "",
        "## Verdict: " + ("PASS" if v["passed"] else "FAIL"),
        "",
        f"- throughput, last 10% of the {v['windows_measured']} full windows vs the first 10%: "
        f"{v['last_rate']:,.0f} vs {v['first_rate']:,.0f} jobs/s = **{v['ratio']:.2f}x** "
        f"(target >= 0.90x): {'yes' if v['throughput_ok'] else 'no'}",
        f"- every job ran to its end once: {result['finished']:,} finished + "
        f"{c['jobs'] - v['finished_expected']:,} dead of {c['jobs']:,}: "
        + ("yes" if v["all_ran"] else "no"),
        "- sizes, peak over the second half of the run vs 1.5x the first half's peak + 1 MiB: "
        + ("yes" if v["sizes_ok"] else "no"),
        "",
        "| size (MiB) | first half peak | second half peak | limit | ok |",
        "|---|---:|---:|---:|---|",
    ]
    for name, b in v["sizes"].items():
        lines.append(
            f"| {name} | {mib(b['first_half_peak'])} | {mib(b['second_half_peak'])} | "
            f"{mib(b['limit'])} | {'yes' if b['ok'] else 'no'} |"
        )
    lines += ["", f"![soak]({png})" if png else "(no chart: matplotlib is in bench/.peers only)"]
    lines += ["", "## Over time", ""]
    if result["engine"] == "postgres":
        lines += [
            "| t (s) | jobs/s | claim p50 / p99 (ms) | depth | all tables (MiB) | jobs (MiB) "
            "| jobs dead tuples | jobs vacuums: housekeeping / autovacuum | history (MiB) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
    else:
        lines += [
            "| t (s) | jobs/s | claim p50 / p99 (ms) | depth | file (MiB) | free pages "
            "| WAL peak (MiB) |",
            "|---:|---:|---:|---:|---:|---:|---:|",
        ]
    by_window = {w["window"]: w for w in result["windows"]}
    for s in result["samples"][1:]:
        w = by_window.get(int(s["t"] // c["sample"]) - 1, {})
        lat = (
            f"{w['claim_p50_ms']:.1f} / {w['claim_p99_ms']:.1f}"
            if w.get("claim_p50_ms") is not None
            else ""
        )
        rate = f"{w['rate']:,.0f}" if w else ""
        if result["engine"] == "postgres":
            t = s["tables"]
            jobs, hist = t.get("jobs", {}), t.get("history", {})
            total = sum(x["bytes"] for x in t.values())
            lines.append(
                f"| {s['t']:.0f} | {rate} | {lat} | {s['depth']:,} | {mib(total)} | "
                f"{mib(jobs.get('bytes'))} | {jobs.get('dead', 0):,} | "
                f"{jobs.get('vacuums', 0)} / {jobs.get('autovacuums', 0)} | "
                f"{mib(hist.get('bytes'))} |"
            )
        else:
            lines.append(
                f"| {s['t']:.0f} | {rate} | {lat} | {s['depth']:,} | "
                f"{mib(s['file_bytes'])} | {s['free_pages']:,} | "
                f"{mib(s['wal_peak_bytes'])} |"
            )
    return "\n".join(lines) + "\n"


def write(result: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"soak-{result['engine']}-{result['date']}-{result['commit']}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1))
    png: str | None = None
    if PEERS_PYTHON.exists():
        chart = [
            str(PEERS_PYTHON),
            str(ROOT / "bench" / "soak_chart.py"),
            str(stem.with_suffix(".json")),
            str(stem.with_suffix(".png")),
        ]
        if subprocess.run(chart, check=False).returncode == 0:
            png = stem.with_suffix(".png").name
    stem.with_suffix(".md").write_text(markdown(result, png))
    return stem.with_suffix(".md")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.role:
        child(args)
        return 0
    engines = [args.engine]
    if args.smoke:
        engines = ["sqlite", "postgres"]
        args.jobs, args.rate, args.sample, args.workers = 3000, 1000.0, 1.0, 2
        args.retry_every, args.dead_every, args.history = 50, 1000, 2.0
    ok = True
    for engine in engines:
        args.engine = engine
        result = run(args)
        result.update(
            commit=commit(),
            date=datetime.date.today().isoformat(),
            machine=f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
        )
        v = result["verdict"]
        if args.smoke:
            ran = v["all_ran"] and len(result["samples"]) >= 3 and v["windows_measured"]
            print(
                json.dumps(
                    {
                        "engine": engine,
                        "finished": result["finished"],
                        "samples": len(result["samples"]),
                        "verdict": v["passed"],
                    }
                )
            )
            ok = ok and bool(ran)
            continue
        path = write(result, Path(args.out))
        print(f"{engine}: {'PASS' if v['passed'] else 'FAIL'} ratio {v['ratio']:.2f}; {path}")
        ok = ok and v["passed"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
