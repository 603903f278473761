"""alkstore against its floor and its peers, side by side: one command.

    python bench/suite.py                    # 3 rounds of everything, files in bench/results/
    python bench/suite.py --rounds 1 --jobs 2000
    python bench/suite.py --systems alkstore,pgqueuer --engines postgres --workloads process
    python bench/suite.py --smoke            # every benchmark once, tiny, nothing written
    python bench/suite.py --smoke --systems huey,huey-normal   # the same, for two systems
    python bench/suite.py --compare bench/results/OLD.json   # run, then the change per cell
    python bench/suite.py --compare OLD.json --against NEW.json   # only compare two runs

Every workload of ``bench/workloads/common.py`` runs for every system that
offers it: alkstore on SQLite and Postgres under trio and asyncio
(``alkstore_bench.py``), the floor (``floor.py``: plain sqlite3/psycopg; no
worker runtime, so no ``idle`` or ``memory``), and the peers, honker and huey
on SQLite, pgqueuer and procrastinate on Postgres.

The peers run their defaults except where said, as these systems
(``--systems`` names; each script's docstring has the details, the results'
Systems table each column's durability):

- ``honker``: WAL, synchronous=NORMAL (as alkstore), its native client on the
  system's SQLite: its wheel's bundled libsqlite3 needs glibc 2.38, so
  ``install_peers.py`` links it to the system's, and honker cannot run its
  queue on Python's ``sqlite3``, so there is no second honker row.
- ``huey``: huey's defaults, WAL with SQLite's default synchronous=FULL (a
  commit survives power loss; alkstore's NORMAL may lose the last ones).
- ``huey-normal``: the same script with ``--variant normal``: huey's
  storage with synchronous=NORMAL on every connection, in every process,
  so at alkstore's durability.
- ``pgqueuer``: its default batch of 10 with ``max_concurrent_tasks``
  ``max(--concurrency, 20)``, the fewest its ``run()`` accepts with that
  batch (it refuses fewer than twice the batch): 20 slots at the default
  ``--concurrency 10``.
- ``procrastinate``: its defaults.

alkstore runs its defaults too: WAL + synchronous=NORMAL on SQLite, the
server's synchronous_commit (on by default) on Postgres.

Each run is a process of its own, with a timeout (SIGINT, so the script
cleans up its database, then SIGKILL for its whole process group).

The peers live in a virtual environment of their own, ``bench/.peers``
(``bench/install_peers.py``, pinned in ``bench/peers.txt``); a full run
installs it when it is missing. Their scripts run with its interpreter.
alkstore's scripts and the floor's run with the interpreter running this
suite, with this work tree first on ``PYTHONPATH``, so the alkstore measured
is the one beside this file (not whichever copy is installed), whether or not
the peers are installed.

Rounds are interleaved: round 1 runs every cell once in a shuffled order,
then round 2, and so on, so a slow spell of a shared machine spreads over
every system instead of landing on one. Within a round the ``latency`` cells
run last: each offers its system ``--latency-fraction`` (50%) of the lower of
that system's median ``process`` and ``enqueue-single`` rates measured so far
(the workload enqueues one job at a time while the worker runs: above either
maximum it measures a growing backlog, not latency). A cell that is not offered
(the script says ``skipped``) or that timed out is not repeated in later
rounds.

A full run writes ``bench/results/<YYYY-MM-DD>-<commit>.md`` (a header with
the machine, the settings and a Systems table, each column's configuration
and what its commits survive; tables: median and range per cell, then
ratios of every alkstore figure to the floor and to each peer on the same
engine and workload), ``.json`` (every run, raw),
``.png`` (a chart, drawn by ``bench/chart.py`` under the peers' interpreter,
which has matplotlib), and copies the markdown to ``bench/results/latest.md``.

``memory`` runs ``--memory-jobs`` (100,000) jobs, the issue's "memory of a
worker flat after 100,000 jobs", under its own ``--memory-timeout`` (600 s:
a slow peer needs minutes for them; honker 0.5, whose claim slows as the
queue deepens, is expected to reach it); ``idle`` measures ``--idle-seconds``
(5 s).

``--smoke`` runs every cell once with ``--smoke-jobs`` (50) jobs (``memory``:
300, ``idle``: 0.5 s), several at a time, and checks only that each prints a
valid result line (a ``skipped`` line counts where the system does not offer
the workload). It writes no files; its last line of stdout is a JSON summary.
Exit status: 0 when every requested cell ran, 1 when any failed, 2 when some
could not run at all (peers requested but not installed: never counted as a
pass).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import random
import shlex
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKLOADS = HERE / "workloads"
RESULTS = HERE / "results"
PEERS_VENV = HERE / ".peers"
PEERS_PYTHON = PEERS_VENV / "bin" / "python"
SCRATCH = HERE / ".scratch"
DEFAULT_DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")

ENGINES = ("sqlite", "postgres")
ENGINE_TITLES = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
DRIVERS = ("trio", "asyncio")
SYSTEM_NAMES = (
    "alkstore",
    "floor",
    "honker",
    "huey",
    "huey-normal",
    "pgqueuer",
    "procrastinate",
)
# The module each peer system needs (huey-normal is huey in another configuration).
PEER_MODULES = {
    "honker": "honker",
    "huey": "huey",
    "huey-normal": "huey",
    "pgqueuer": "pgqueuer",
    "procrastinate": "procrastinate",
}
PEER_DISTRIBUTIONS = (
    "honker",
    "huey",
    "pgqueuer",
    "procrastinate",
    "psycopg",
    "asyncpg",
    "matplotlib",
)
# Schema name prefixes the Postgres workload scripts create (and drop).
PG_PREFIXES = ("alk_bench_", "alk_floor_", "bench_pgq_", "bench_proc_")


# -- what runs ---------------------------------------------------------------------


# What a committed job survives, per durability (the Systems table of the results).
SURVIVES = {
    "wal-normal": "a process crash; an OS crash or power loss may lose the last transactions"
    " (WAL synced at checkpoints, not at each commit)",
    "wal-full": "a process crash, an OS crash and power loss (WAL synced at each commit)",
}


@dataclasses.dataclass(frozen=True)
class System:
    """One column: a workload script with its fixed options, on one engine."""

    name: str  # what --systems selects
    label: str  # the column heading
    engine: str
    script: str
    options: tuple[str, ...] = ()
    peer: bool = False
    processes: bool = True  # honours --processes
    # The Systems table of the results: its configuration ({sqlite},
    # {honker_sqlite} and {synchronous_commit} filled in from the run's
    # machine), and its durability, a key of SURVIVES (or "postgres": the
    # server's synchronous_commit and fsync decide).
    config: str = ""
    durability: str = ""

    @property
    def key(self) -> str:
        return f"{self.engine}/{self.label}"


ALKSTORE_CONFIG = {
    "sqlite": "alkstore's defaults: WAL, synchronous=NORMAL (SQLite {sqlite})",
    "postgres": "alkstore's defaults: LOGGED tables, synchronous_commit={synchronous_commit}",
}
FLOOR_CONFIG = {
    "sqlite": "plain sqlite3, one connection: WAL, synchronous=NORMAL (alkstore's)",
    "postgres": "plain psycopg, one connection: LOGGED tables,"
    " synchronous_commit={synchronous_commit}",
}
# (engine, name, script, options, configuration, durability), in column order.
PEERS = (
    (
        "sqlite",
        "honker",
        "honker_sqlite.py",
        (),
        "honker's defaults: WAL, synchronous=NORMAL; its native client on {honker_sqlite}"
        " (install_peers.py links the system's libsqlite3 in place of the one its wheel"
        " bundles, which needs glibc 2.38: see honker_sqlite.py)",
        "wal-normal",
    ),
    (
        "sqlite",
        "huey",
        "huey_sqlite.py",
        (),
        "huey's defaults: WAL, synchronous=FULL (SQLite's default; huey sets none)",
        "wal-full",
    ),
    (
        "sqlite",
        "huey-normal",
        "huey_sqlite.py",
        ("--variant", "normal"),
        "huey's defaults but synchronous=NORMAL (alkstore's durability), in every process",
        "wal-normal",
    ),
    (
        "postgres",
        "pgqueuer",
        "pgqueuer_pg.py",
        (),
        "pgqueuer's defaults: durable (LOGGED) tables, batch_size 10;"
        " max_concurrent_tasks max(concurrency, 20), the least its run() accepts at batch 10"
        " (so 20 slots at concurrency 10); synchronous_commit={synchronous_commit}",
        "postgres",
    ),
    (
        "postgres",
        "procrastinate",
        "procrastinate_pg.py",
        (),
        "procrastinate's defaults: LOGGED tables, synchronous_commit={synchronous_commit}",
        "postgres",
    ),
)


def all_systems() -> list[System]:
    out: list[System] = []
    for engine in ENGINES:
        durability = "wal-normal" if engine == "sqlite" else "postgres"
        for driver in DRIVERS:
            out.append(
                System(
                    "alkstore",
                    f"alkstore {driver}",
                    engine,
                    "alkstore_bench.py",
                    ("--engine", engine, "--driver", driver),
                    config=ALKSTORE_CONFIG[engine],
                    durability=durability,
                )
            )
        out.append(
            System(
                "floor",
                "floor",
                engine,
                "floor.py",
                ("--engine", engine),
                processes=False,
                config=FLOOR_CONFIG[engine],
                durability=durability,
            )
        )
        for peer_engine, name, script, opts, config, peer_durability in PEERS:
            if peer_engine == engine:
                out.append(
                    System(
                        name,
                        name,
                        engine,
                        script,
                        opts,
                        peer=True,
                        config=config,
                        durability=peer_durability,
                    )
                )
    return out


@dataclasses.dataclass(frozen=True)
class Row:
    """One table row: a workload of common.py with the suite's settings for it."""

    key: str
    workload: str
    processes: int = 1


ROWS = (
    Row("enqueue-single", "enqueue-single"),
    Row("enqueue-concurrent", "enqueue-concurrent"),
    Row("enqueue-batch", "enqueue-batch"),
    Row("process", "process"),
    Row("process x4", "process", 4),
    Row("process x8", "process", 8),
    Row("process-batch", "process-batch"),
    Row("process-batch x4", "process-batch", 4),
    Row("process-sleep", "process-sleep"),
    Row("latency", "latency"),
    Row("idle", "idle"),
    Row("memory", "memory"),
)
ROW_KEYS = [r.key for r in ROWS]


@dataclasses.dataclass(frozen=True)
class Cell:
    system: System
    row: Row

    @property
    def key(self) -> str:
        return f"{self.system.key}/{self.row.key}"

    def name(self) -> str:
        return f"{self.system.engine:8} {self.system.label:16} {self.row.key}"


def not_offered(cell: Cell) -> str | None:
    """Why the suite itself does not run ``cell`` (the scripts say the rest)."""
    if cell.row.processes > 1 and not cell.system.processes:
        return "one connection, no worker processes"
    return None


# -- running one ----------------------------------------------------------------------


def interpreter(system: System, args: argparse.Namespace) -> str:
    if system.peer:
        return str(PEERS_PYTHON)
    return args.alkstore_python or sys.executable


def environment(system: System) -> dict[str, str]:
    env = dict(os.environ)
    if not system.peer:
        # This tree's alkstore, not an installed copy elsewhere.
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("PYTHONSTARTUP", None)
    return env


def concurrency_for(cell: Cell, args: argparse.Namespace, jobs: int) -> int | None:
    w = cell.row.workload
    if w == "idle":
        return None  # the worker runtime's default
    if w == "process-sleep":
        return args.sleep_concurrency
    if w == "enqueue-concurrent":
        c = args.enqueue_concurrency if cell.system.engine == "sqlite" else args.concurrency
        return max(1, min(c, jobs // 5))  # a few jobs per task at the least
    return args.concurrency


def argv_for(
    cell: Cell, args: argparse.Namespace, jobs: int, rate: float, run_dir: str
) -> list[str]:
    s, r = cell.system, cell.row
    concurrency = concurrency_for(cell, args, jobs)
    return [
        interpreter(s, args),
        str(WORKLOADS / s.script),
        r.workload,
        *s.options,
        "--jobs",
        str(jobs),
        "--batch",
        str(args.batch),
        *(["--concurrency", str(concurrency)] if concurrency is not None else []),
        "--processes",
        str(r.processes),
        "--sleep-ms",
        str(args.sleep_ms),
        "--rate",
        f"{rate:.3f}",
        "--idle-seconds",
        str(args.idle_seconds),
        "--dir",
        run_dir,
        "--dsn",
        args.dsn,
    ]


def timeout_for(cell: Cell, args: argparse.Namespace) -> float:
    return args.memory_timeout if cell.row.workload == "memory" else args.timeout


def parse_result(stdout: str, workload: str) -> tuple[dict[str, Any] | None, str]:
    """The run's result line, or None and why it is not valid."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return None, "no output"
    try:
        result = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None, f"last line is not JSON: {lines[-1][:200]!r}"
    if not isinstance(result, dict):
        return None, f"last line is not an object: {lines[-1][:200]!r}"
    if "skipped" in result:
        if isinstance(result["skipped"], str) and result["skipped"]:
            return result, ""
        return None, "skipped without a reason"
    jobs, seconds = result.get("jobs"), result.get("seconds")
    if not isinstance(jobs, int) or jobs < (0 if workload == "idle" else 1):
        return None, f"bad jobs: {jobs!r}"
    if not isinstance(seconds, (int, float)) or not seconds > 0:
        return None, f"bad seconds: {seconds!r}"
    fields = {
        "latency": ("p50_ms", "p99_ms"),
        "idle": ("cpu_pct",),
        "memory": ("rss_start_mb", "rss_end_mb", "rss_growth"),
    }.get(workload, ())
    for field in fields:
        v = result.get(field)
        if not isinstance(v, (int, float)) or v < 0 or (field.startswith("rss") and not v > 0):
            return None, f"bad {field}: {v!r}"
    return result, ""


class Runner:
    """Runs cells, each in a process of its own (and its own process group)."""

    def __init__(self, args: argparse.Namespace, run_dir: str) -> None:
        self.args = args
        self.run_dir = run_dir
        self._live: dict[int, subprocess.Popen[str]] = {}
        self._lock = threading.Lock()

    def run(self, cell: Cell, round_no: int, jobs: int, rate: float) -> dict[str, Any]:
        argv = argv_for(cell, self.args, jobs, rate, self.run_dir)
        record: dict[str, Any] = {
            "round": round_no,
            "engine": cell.system.engine,
            "system": cell.system.label,
            "row": cell.row.key,
            "workload": cell.row.workload,
            "processes": cell.row.processes,
            "jobs": jobs,
            "concurrency": concurrency_for(cell, self.args, jobs),
            "argv": [Path(a).name if i == 0 else a for i, a in enumerate(argv)],
        }
        if cell.row.workload == "latency":
            record["rate"] = rate
        if cell.row.workload == "idle":
            record["idle_seconds"] = self.args.idle_seconds
        why = not_offered(cell)
        if why:
            return {**record, "status": "skipped", "reason": why, "wall_s": 0.0}
        timeout = timeout_for(cell, self.args)
        env = environment(cell.system)
        if timeout > self.args.timeout:
            # The peers' scripts stop themselves (and clean up) a minute before the suite would.
            env["BENCH_TIME_LIMIT"] = str(max(120.0, timeout - 60))
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        with self._lock:
            self._live[proc.pid] = proc
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            out, err = self._stop(proc)
        except BaseException:  # interrupted: the run goes too
            self._stop(proc)
            raise
        finally:
            with self._lock:
                self._live.pop(proc.pid, None)
        record["wall_s"] = round(time.monotonic() - start, 3)
        record["rc"] = proc.returncode
        tail = "\n".join(err.strip().splitlines()[-12:])
        if timed_out or proc.returncode == 124:
            why = f"over {timeout:g} s limit" if timed_out else "over the script's own limit"
            return {
                **record,
                "status": "timeout",
                "reason": why,
                "stderr": tail,
            }
        result, why = parse_result(out, cell.row.workload)
        if proc.returncode != 0 or result is None:
            why = why if proc.returncode == 0 else f"exit {proc.returncode}"
            return {
                **record,
                "status": "failed",
                "reason": why,
                "stderr": tail,
                "stdout": "\n".join(out.strip().splitlines()[-3:]),
            }
        if "skipped" in result:
            return {**record, "status": "skipped", "reason": result["skipped"]}
        return {**record, "status": "ok", "result": result}

    def _stop(self, proc: subprocess.Popen[str]) -> tuple[str, str]:
        """SIGINT (the scripts clean up on it), then SIGKILL to the process group."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        try:
            return proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            return proc.communicate()

    def stop_all(self) -> None:
        with self._lock:
            live = list(self._live.values())
        for proc in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
        for proc in live:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def rate_of(run: dict[str, Any]) -> float:
    r = run["result"]
    return float(r["jobs"] / r["seconds"])


# -- the plan ---------------------------------------------------------------------


def split(text: str | None, allowed: Sequence[str], what: str) -> list[str]:
    if not text:
        return list(allowed)
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (choose from {', '.join(allowed)})")
    return items


def plan(args: argparse.Namespace) -> list[Cell]:
    systems = split(args.systems, SYSTEM_NAMES, "system")
    engines = split(args.engines, ENGINES, "engine")
    drivers = split(args.drivers, DRIVERS, "driver")
    workloads = split(
        args.workloads, sorted({r.workload for r in ROWS} | set(ROW_KEYS)), "workload"
    )
    processes = [int(p) for p in split(args.processes, ("1", "4", "8"), "process count")]
    cells = []
    for s in all_systems():
        if s.name not in systems or s.engine not in engines:
            continue
        if s.name == "alkstore" and s.label.split()[1] not in drivers:
            continue
        for r in ROWS:
            if r.key not in workloads and r.workload not in workloads:
                continue
            if r.processes not in processes:
                continue
            cells.append(Cell(s, r))
    return cells


def peers_status() -> dict[str, str]:
    """Each peer: 'ok' when its module imports under the peers' interpreter, else why not."""
    if not PEERS_PYTHON.exists():
        return {
            p: f"not installed ({PEERS_VENV.relative_to(ROOT)} is missing)" for p in PEER_MODULES
        }
    code = (
        "import importlib, json\n"
        "out = {}\n"
        f"for name, mod in {PEER_MODULES!r}.items():\n"
        "    try:\n"
        "        importlib.import_module(mod)\n"
        "        out[name] = 'ok'\n"
        "    except Exception as exc:\n"
        "        out[name] = f'does not import: {type(exc).__name__}: {exc}'\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(PEERS_PYTHON), "-c", code], capture_output=True, text=True, timeout=120, cwd=WORKLOADS
    )
    if proc.returncode != 0:
        why = f"peers' interpreter failed: {proc.stderr.strip()[-200:]}"
        return dict.fromkeys(PEER_MODULES, why)
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def install_peers() -> tuple[bool, float]:
    print(
        f"peers: {PEERS_VENV.relative_to(ROOT)} is missing; running bench/install_peers.py",
        flush=True,
    )
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(HERE / "install_peers.py")])
    took = time.monotonic() - start
    print(
        f"peers: install_peers.py {'finished' if proc.returncode == 0 else 'FAILED'}"
        f" in {took:.0f} s",
        flush=True,
    )
    return proc.returncode == 0, took


# -- the rounds -------------------------------------------------------------------


class Suite:
    def __init__(self, args: argparse.Namespace, cells: list[Cell], runner: Runner) -> None:
        self.args = args
        self.cells = cells
        self.runner = runner
        self.runs: list[dict[str, Any]] = []
        self.settled: dict[str, str] = {}  # cell key -> why it is not repeated
        self.rng = random.Random(args.seed)
        self.done = 0
        self.total = 0

    def rate_for_latency(self, cell: Cell) -> tuple[float, str]:
        """``--latency-fraction`` of the system's maximum for this workload: the
        median ``process`` rate so far, or the median ``enqueue-single`` rate when
        that is lower (the latency workload enqueues one job at a time while its
        worker runs, so a rate above either only measures a growing backlog)."""
        if self.args.rate:
            return self.args.rate, "--rate"
        medians = {}
        for row in ("process", "enqueue-single"):
            rates = [
                rate_of(r)
                for r in self.runs
                if r["status"] == "ok"
                and r["engine"] == cell.system.engine
                and r["system"] == cell.system.label
                and r["row"] == row
            ]
            if rates:
                medians[row] = statistics.median(rates)
        if not medians:
            return self.args.fallback_rate, "fixed fallback rate: no process figure"
        row = min(medians, key=lambda k: medians[k])
        return self.args.latency_fraction * medians[
            row
        ], f"{self.args.latency_fraction:.0%} of {row}"

    def latency_jobs(self, rate: float) -> int:
        jobs = self.args.jobs
        return max(min(jobs, 200), min(jobs, round(rate * self.args.latency_seconds)))

    def one(self, cell: Cell, round_no: int) -> dict[str, Any]:
        jobs, rate, why = self.args.jobs, 0.0, ""
        if cell.row.workload == "idle":
            jobs = 0
        elif cell.row.workload == "memory":
            jobs = self.args.memory_jobs
        elif cell.row.workload == "latency":
            rate, why = self.rate_for_latency(cell)
            jobs = self.latency_jobs(rate)
        run = self.runner.run(cell, round_no, jobs, rate or self.args.fallback_rate)
        if cell.row.workload == "latency":
            run["rate_from"] = why
        self.runs.append(run)
        if run["status"] in ("skipped", "timeout"):
            self.settled[cell.key] = run["status"]
        self.done += 1
        print(
            f"[round {round_no} {self.done}/{self.total}] {cell.name():50} {describe(run)}",
            flush=True,
        )
        return run

    def run(self, rounds: int, parallel: int) -> None:
        for round_no in range(1, rounds + 1):
            todo = [c for c in self.cells if c.key not in self.settled]
            first = [c for c in todo if c.row.workload != "latency"]
            last = [c for c in todo if c.row.workload == "latency"]
            self.rng.shuffle(first)
            self.rng.shuffle(last)
            self.total = self.done + len(todo)
            for batch in (first, last):
                if parallel <= 1:
                    for cell in batch:
                        self.one(cell, round_no)
                else:
                    with ThreadPoolExecutor(parallel) as pool:
                        futures = [pool.submit(self.one, c, round_no) for c in batch]
                        try:
                            for f in futures:
                                f.result()
                        except BaseException:
                            for f in futures:
                                f.cancel()
                            self.runner.stop_all()
                            raise


def describe(run: dict[str, Any]) -> str:
    status = run["status"]
    if status == "ok":
        r = run["result"]
        if run["workload"] == "idle":
            text = f"{r['cpu_pct']:.3f}% of a core over {r['seconds']:.1f} s"
        elif run["workload"] == "memory":
            text = (
                f"RSS {r['rss_start_mb']:.1f} -> {r['rss_end_mb']:.1f} MB"
                f" (x{r['rss_growth']:.3f}) at {rate_of(run):,.0f} jobs/s"
            )
        elif run["workload"] == "latency":
            text = f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms at {run['rate']:,.0f}/s"
        else:
            text = f"{rate_of(run):>10,.0f} jobs/s"
        return f"{text}  ({run['wall_s']:.1f} s)"
    if status == "skipped":
        return f"skipped: {run['reason']}"
    return f"{status.upper()}: {run.get('reason', '')} ({run.get('wall_s', 0):.1f} s)"


# -- summaries --------------------------------------------------------------------


def summarize(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (engine, system, row, metric): median/min/max over the ok runs."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["engine"], run["system"], run["row"]), []).append(run)
    cells = []
    for (engine, system, row), group in groups.items():
        ok = [r for r in group if r["status"] == "ok"]
        metrics: dict[str, list[float]] = {}
        if row == "latency":
            for field in ("p50_ms", "p99_ms"):
                metrics[field] = [float(r["result"][field]) for r in ok]
            metrics["rate"] = [float(r["rate"]) for r in ok]
            metrics["achieved"] = [rate_of(r) for r in ok]
        elif row in ("idle", "memory"):
            fields = ("cpu_pct",) if row == "idle" else MEMORY_METRICS
            for field in fields:
                metrics[field] = [float(r["result"][field]) for r in ok]
        else:
            metrics["rate"] = [rate_of(r) for r in ok]
        notes = sorted(
            {f"{r['status']}: {r.get('reason', '')}" for r in group if r["status"] != "ok"}
        )
        status = "ok" if ok else group[-1]["status"]
        for metric, values in metrics.items():
            cells.append(
                {
                    "engine": engine,
                    "system": system,
                    "row": row,
                    "metric": metric,
                    "n": len(values),
                    "runs": len(group),
                    "status": status,
                    "notes": notes,
                    "median": statistics.median(values) if values else None,
                    "min": min(values) if values else None,
                    "max": max(values) if values else None,
                }
            )
    return cells


MEMORY_METRICS = ("rss_start_mb", "rss_end_mb", "rss_growth")
# Row label and metric of the rows that are not a plain rate, in table order.
METRIC_ROWS = {
    "latency": (
        ("p50_ms", "latency p50 (ms)"),
        ("p99_ms", "latency p99 (ms)"),
        ("rate", "latency: offered (jobs/s)"),
        ("achieved", "latency: achieved (jobs/s)"),
    ),
    "idle": (("cpu_pct", "idle: CPU, % of a core"),),
    "memory": (
        ("rss_end_mb", "memory: RSS after all jobs (MB)"),
        ("rss_growth", "memory: RSS growth (all / first 10%)"),
    ),
}
# Not worth a ratio between systems (the latency row's rates, a ratio already).
NO_RATIO = {("latency", "rate"), ("latency", "achieved"), ("memory", "rss_growth")}


def index(cells: Iterable[dict[str, Any]]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    return {(c["engine"], c["system"], c["row"], c["metric"]): c for c in cells}


def fmt(v: float | None, metric: str) -> str:
    if v is None:
        return ""
    if metric.endswith("_ms"):
        return f"{v:.2f}" if v < 100 else f"{v:,.0f}"
    if metric == "cpu_pct":
        return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}"
    if metric.endswith("_mb"):
        return f"{v:.1f}"
    if metric == "rss_growth":
        return f"{v:.3f}"
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def cell_text(c: dict[str, Any] | None) -> str:
    if c is None:
        return ""
    if c["median"] is None:
        return {"skipped": "n/o", "timeout": "**timeout**"}.get(c["status"], "**failed**")
    text = fmt(c["median"], c["metric"])
    if c["n"] > 1:
        text += f" ({fmt(c['min'], c['metric'])}-{fmt(c['max'], c['metric'])})"
    if c["n"] < c["runs"]:
        text += f" [{c['runs'] - c['n']} of {c['runs']} failed]"
    return text


def table_rows(
    engine: str, cells: dict[tuple[str, str, str, str], dict[str, Any]]
) -> list[tuple[str, str, str]]:
    """(row label, row key, metric) in table order, for rows some system has."""
    present = {(k[2], k[3]) for k in cells if k[0] == engine}
    out = []
    for key in ROW_KEYS:
        if key in METRIC_ROWS:
            for metric, label in METRIC_ROWS[key]:
                if (key, metric) in present:
                    out.append((label, key, metric))
        elif (key, "rate") in present:
            out.append((key, key, "rate"))
    return out


def columns(engine: str, cells: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    order = [s.label for s in all_systems() if s.engine == engine]
    have = {k[1] for k in cells if k[0] == engine}
    return [label for label in order if label in have]


def markdown_tables(summary: list[dict[str, Any]]) -> list[str]:
    cells = index(summary)
    out: list[str] = []
    for engine in ENGINES:
        cols = columns(engine, cells)
        if not cols:
            continue
        out += [
            f"## {ENGINE_TITLES[engine]}",
            "",
            "| workload | " + " | ".join(cols) + " |",
            "|---|" + "---:|" * len(cols),
        ]
        for label, row, metric in table_rows(engine, cells):
            texts = [cell_text(cells.get((engine, col, row, metric))) for col in cols]
            out.append(f"| {label} | " + " | ".join(texts) + " |")
        out.append("")
        ratios = ratio_table(engine, cells)
        if ratios:
            out += [f"### {ENGINE_TITLES[engine]}: ratios", "", *ratios, ""]
    return out


def reference(
    engine: str,
    ref: str,
    row: str,
    metric: str,
    cells: dict[tuple[str, str, str, str], dict[str, Any]],
) -> dict[str, Any] | None:
    c = cells.get((engine, ref, row, metric))
    if ref == "floor" and (c is None or c["median"] is None) and row.startswith("process"):
        # The floor is one connection with a batched claim: the engine's best
        # for every processing row (x4, batch loop) alike.
        c = cells.get((engine, ref, "process", metric))
    return c


def ratio(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"


def ratio_table(engine: str, cells: dict[tuple[str, str, str, str], dict[str, Any]]) -> list[str]:
    cols = columns(engine, cells)
    mine = [c for c in cols if c.startswith("alkstore")]
    refs = [c for c in cols if not c.startswith("alkstore")]
    pairs = [(m, r) for m in mine for r in refs]
    if not pairs:
        return []
    lines = [
        "alkstore's median divided by the other's, same engine and workload: above 1"
        " is faster for throughput, but *lower* is better for the latency, idle and"
        " memory rows (CPU, resident set). The"
        " floor's figure for every processing row is its one-connection batched claim"
        " (`process`).",
        "",
        "| workload | " + " | ".join(f"{m.split()[1]} / {r}" for m, r in pairs) + " |",
        "|---|" + "---:|" * len(pairs),
    ]
    any_value = False
    for label, row, metric in table_rows(engine, cells):
        if (row, metric) in NO_RATIO:
            continue
        texts = []
        for m, r in pairs:
            a = cells.get((engine, m, row, metric))
            b = reference(engine, r, row, metric, cells)
            if a and b and a["median"] and b["median"]:
                texts.append(ratio(a["median"] / b["median"]))
                any_value = True
            else:
                texts.append("")
        lines.append(f"| {label} | " + " | ".join(texts) + " |")
    return lines if any_value else []


def notes_section(summary: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    out = []
    skipped = sorted(
        {
            (c["engine"], c["system"], c["row"], n)
            for c in summary
            for n in c["notes"]
            if n.startswith("skipped")
        }
    )
    if skipped:
        out += ["## Not offered (n/o)", ""]
        out += [
            f"- {ENGINE_TITLES[e]}, {s}, {row}: {n.split(': ', 1)[1]}" for e, s, row, n in skipped
        ]
        out.append("")
    bad = [r for r in runs if r["status"] in ("failed", "timeout")]
    if bad:
        out += ["## Failures", ""]
        for r in bad:
            out.append(
                f"- round {r['round']}, {ENGINE_TITLES[r['engine']]}, {r['system']},"
                f" {r['row']}: {r['status']} ({r.get('reason', '')})"
            )
            tail = (r.get("stderr") or "").strip().splitlines()[-3:]
            if tail:
                out.append("  ```")
                out += [f"  {line}" for line in tail]
                out.append("  ```")
        out.append("")
    return out


# -- comparing runs ------------------------------------------------------------------


def load_summary(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = json.loads(path.read_text())
    # Summarised afresh from the raw runs (the summary's rules may have changed since).
    summary = summarize(data["runs"]) if data.get("runs") else data.get("cells", [])
    return data.get("meta", {}), summary


def compare_lines(old: list[dict[str, Any]], new: list[dict[str, Any]], old_name: str) -> list[str]:
    a, b = index(old), index(new)
    lines = [
        f"Change against `{old_name}` (medians; throughput: + is faster; latency: + is slower;"
        " idle CPU and memory: + is more):",
        "",
        "| engine | system | workload | before | now | change |",
        "|---|---|---|---:|---:|---:|",
    ]
    labels = [s.label for s in all_systems()]
    order = {label: labels.index(label) for label in labels}
    keys = sorted(
        set(a) & set(b),
        key=lambda k: (
            ENGINES.index(k[0]),
            order.get(k[1], 99),
            ROW_KEYS.index(k[2]) if k[2] in ROW_KEYS else 99,
            k[3],
        ),
    )
    shown = 0
    for k in keys:
        engine, system, row, metric = k
        if (row == "latency" and metric in ("rate", "achieved")) or metric == "rss_start_mb":
            continue
        before, now = a[k]["median"], b[k]["median"]
        label = dict(METRIC_ROWS.get(row, ())).get(metric, row) if metric != "rate" else row
        if before is None and now is None:
            continue
        change = f"{(now / before - 1) * 100:+.0f}%" if before and now else ""
        lines.append(
            f"| {ENGINE_TITLES[engine]} | {system} | {label} |"
            f" {cell_text(a[k])} | {cell_text(b[k])} | {change} |"
        )
        shown += 1
    only_old = sorted({k[:3] for k in set(a) - set(b)})
    only_new = sorted({k[:3] for k in set(b) - set(a)})
    if not shown:
        lines.append("| | | no cell in common | | | |")
    for cells, where in ((only_old, "the earlier run"), (only_new, "this run")):
        if len(cells) > 12:
            lines += ["", f"{len(cells)} cells only in {where} (not compared)."]
        elif cells:
            lines += ["", f"Only in {where}: " + "; ".join(" ".join(k) for k in cells) + "."]
    return lines


# -- the machine, the commit -----------------------------------------------------------


def git(*argv: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), *argv], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def memory_gb() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1024 / 1024:.0f} GB"
    return "?"


def postgres_settings(dsn: str) -> dict[str, str]:
    """The server's version and the settings its durability depends on ({"error": ..} if none)."""
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT current_setting('server_version'), current_setting('synchronous_commit'),"
                " current_setting('fsync')"
            ).fetchone()
            assert row is not None
        return {"server_version": row[0], "synchronous_commit": row[1], "fsync": row[2]}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def postgres_info(pg: dict[str, str]) -> str:
    if "error" in pg:
        return f"PostgreSQL unreachable ({pg['error']})"
    return (
        f"PostgreSQL {pg['server_version']} (synchronous_commit={pg['synchronous_commit']},"
        f" fsync={pg['fsync']})"
    )


def pg_schemas(dsn: str) -> set[str]:
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=5) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace").fetchall()
        return {r[0] for r in rows if r[0].startswith(PG_PREFIXES)}
    except Exception:
        return set()


def peer_versions() -> dict[str, str]:
    if not PEERS_PYTHON.exists():
        return {}
    code = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        f"for d in {PEER_DISTRIBUTIONS!r}:\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [str(PEERS_PYTHON), "-c", code], capture_output=True, text=True, timeout=60
    )
    try:
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (json.JSONDecodeError, IndexError):
        return {}


def honker_sqlite_version() -> str:
    """The SQLite honker's native client runs on, as it reports it, and the
    library file it loaded (not the interpreter's sqlite3: honker links a
    libsqlite3 of its own, see honker_sqlite.py)."""
    if not PEERS_PYTHON.exists():
        return "?"
    code = (
        "import os, shutil, tempfile, honker\n"
        "d = tempfile.mkdtemp()\n"
        "db = honker.open(os.path.join(d, 'v.db'))\n"
        "libs = sorted({os.path.realpath(line.split()[-1]) for line in open('/proc/self/maps')\n"
        "               if 'libsqlite3' in line.split()[-1]})\n"
        "print(db.query('SELECT sqlite_version() AS v')[0]['v'], ' '.join(libs))\n"
        "db.close()\n"
        "shutil.rmtree(d)\n"
    )
    try:
        proc = subprocess.run(
            [str(PEERS_PYTHON), "-c", code], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return "?"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return "?"
    version, _, libs = lines[-1].partition(" ")
    return f"SQLite {version}" + (f", {libs}" if libs else "")


def alkstore_location(args: argparse.Namespace) -> str:
    """Where the alkstore the suite measures is imported from (a check, and a header line)."""
    system = all_systems()[0]
    proc = subprocess.run(
        [
            interpreter(system, args),
            "-c",
            "import alkstore, trio, sys;"
            " print(alkstore.__file__, trio.__version__, sys.version.split()[0])",
        ],
        capture_output=True,
        text=True,
        env=environment(system),
        cwd=WORKLOADS,
        timeout=60,
    )
    return proc.stdout.strip() if proc.returncode == 0 else f"import failed: {proc.stderr[-300:]}"


def machine(args: argparse.Namespace) -> dict[str, Any]:
    status = git("status", "--porcelain", "--untracked-files=no")
    alk = alkstore_location(args).split()
    pg = postgres_settings(args.dsn)
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD") or "unknown",
        "branch": git("branch", "--show-current"),
        "uncommitted_files": len(status.splitlines()) if status else 0,
        "command": "python " + shlex.join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "memory": memory_gb(),
        "kernel": f"{platform.system()} {platform.release()}",
        "load_start": os.getloadavg(),
        "python": alk[2] if len(alk) == 3 else platform.python_version(),
        "alkstore_from": alk[0] if len(alk) == 3 else " ".join(alk),
        "trio": alk[1] if len(alk) == 3 else "?",
        "sqlite": sqlite3.sqlite_version,
        "postgres": postgres_info(pg),
        "postgres_settings": pg,
        "peers": peer_versions(),
        "honker_sqlite": honker_sqlite_version(),
    }


def header(meta: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    dirty = (
        f" + uncommitted changes in {meta['uncommitted_files']} files"
        if meta["uncommitted_files"]
        else ""
    )
    peers = ", ".join(f"{k} {v}" for k, v in meta["peers"].items()) or "not installed"
    load = " / ".join(
        " ".join(f"{x:.1f}" for x in triple)
        for triple in (meta["load_start"], meta.get("load_end"))
        if triple
    )
    s = settings
    return [
        f"# alkstore benchmarks: {meta['date'][:10]}, {meta['commit']}{dirty}",
        "",
        f"- Command: `{meta['command']}`",
        f"- Commit: {meta['commit']} (branch {meta['branch'] or '?'}){dirty}",
        f"- Machine: {meta['host']}, {meta['cpu']}, {meta['cpus']} CPUs, {meta['memory']},"
        f" {meta['kernel']}; load average (1/5/15 min) at start / end: {load}",
        f"- Python {meta['python']}, trio {meta['trio']}, SQLite {meta['sqlite']},"
        f" {meta['postgres']}",
        f"- Peers (bench/.peers): {peers}",
        f"- Started {meta['date']}, took {meta.get('took_s', 0) / 60:.1f} min;"
        f" {s['rounds']} round(s), interleaved in shuffled order (seed {s['seed']}),"
        f" {s['timeout']:.0f} s limit per run"
        + (f" ({s['memory_timeout']:.0f} s for memory)" if "memory_timeout" in s else ""),
        f"- Each run: {s['jobs']:,} jobs of 100-byte payloads; `--concurrency {s['concurrency']}`"
        f" (process, latency, memory; pgqueuer runs its default batch of 10 and"
        f" max(concurrency, 20) slots, the fewest its run() accepts with that batch);"
        f" enqueue-concurrent: {s['enqueue_concurrency']} tasks on SQLite,"
        f" {s['concurrency']} on PostgreSQL (the peers open a connection per task);"
        f" enqueue-batch: {s['batch']} per transaction; process-sleep: handler sleeps"
        f" {s['sleep_ms']:g} ms, concurrency {s['sleep_concurrency']};"
        " x4, x8: 4 and 8 worker processes;"
        f" latency: one job at a time, offered at {s['latency_fraction']:.0%} of the lower of"
        " the system's median `process` and `enqueue-single` rates"
        + (f" (fixed: {s['rate']:g}/s)" if s["rate"] else "")
        + f", for up to {s['latency_seconds']:g} s (at least 200 jobs);"
        f" idle: the worker runtime with its defaults on an empty queue, CPU over"
        f" {s.get('idle_seconds', 5.0):g} s after 1 s of settling;"
        f" memory: {s.get('memory_jobs', s['jobs']):,} jobs through one worker process"
        " (`process`'s concurrency), its RSS after the first 10% and after all",
        "",
        "Throughput rows: jobs per second, median of the rounds with the range"
        " (min-max) in brackets. Latency rows: enqueue returning to handler start, ms;"
        " where the achieved rate falls short of the offered one the system could not keep"
        " up, and its latency is that of a growing backlog. Idle: the worker process's CPU"
        " time (every thread) over the window, % of one core. Memory: the worker process's"
        " resident set (VmRSS), MiB, and its growth from 10% of the jobs to all of them"
        " (1.000 is flat)."
        " n/o: not offered by that system (why: below). What each workload does:"
        " `bench/workloads/common.py`; how each system does it: the docstring of its script.",
        "",
    ]


def pg_survives(pg: dict[str, str]) -> str:
    """What a commit survives on the server of ``pg`` (``postgres_settings``)."""
    if "error" in pg:
        return "unknown (PostgreSQL unreachable when the run started)"
    sc, fsync = pg["synchronous_commit"], pg["fsync"]
    if fsync != "on":
        return (
            f"a process crash; an OS crash or power loss may corrupt the database (fsync={fsync})"
        )
    if sc == "off":
        return (
            "a process crash; a server or OS crash or power loss may lose the last commits"
            " (synchronous_commit=off)"
        )
    return "a process crash, an OS crash and power loss (WAL flushed at each commit)"


def systems_table(systems: Sequence[System], meta: dict[str, Any]) -> list[str]:
    """The header's table of what each column runs and what its commits survive."""
    pg = meta.get("postgres_settings", {})
    fill = {
        "sqlite": f"{meta.get('sqlite', '?')}",
        "honker_sqlite": meta.get("honker_sqlite", "?"),
        "synchronous_commit": pg.get("synchronous_commit", "?"),
    }
    out = [
        "## Systems",
        "",
        "What each column runs and what a committed job survives (its durability);"
        " the details are in the docstring of its script (`bench/workloads/`).",
        "",
        "| engine | system | configuration | a committed job survives |",
        "|---|---|---|---|",
    ]
    seen = set()
    for s in all_systems():
        if s.key not in {x.key for x in systems} or s.key in seen:
            continue
        seen.add(s.key)
        survives = pg_survives(pg) if s.durability == "postgres" else SURVIVES[s.durability]
        out.append(
            f"| {ENGINE_TITLES[s.engine]} | {s.label} | {s.config.format(**fill)} | {survives} |"
        )
    return [*out, ""]


# -- the entry point ---------------------------------------------------------------


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=20_000, help="jobs per run (default 20000)")
    p.add_argument("--systems", help=f"comma-separated, of {','.join(SYSTEM_NAMES)}")
    p.add_argument("--workloads", help=f"comma-separated workloads or rows ({','.join(ROW_KEYS)})")
    p.add_argument("--engines", help="comma-separated, of sqlite,postgres")
    p.add_argument("--drivers", help="alkstore's drivers, of trio,asyncio")
    p.add_argument("--processes", help="which process counts to run, of 1,4,8 (default all)")
    p.add_argument("--smoke", action="store_true", help="every cell once, tiny; no files")
    p.add_argument("--smoke-jobs", type=int, default=50)
    p.add_argument(
        "--compare",
        type=Path,
        metavar="OLD.json",
        help="print the change per cell against an earlier run's .json",
    )
    p.add_argument(
        "--against",
        type=Path,
        metavar="NEW.json",
        help="with --compare: compare these two files, run nothing",
    )
    p.add_argument("--timeout", type=float, help="seconds per run (default 180; smoke 60)")
    p.add_argument(
        "--parallel",
        type=int,
        help="runs at once (default 1; smoke 3): timings only mean anything at 1",
    )
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument(
        "--enqueue-concurrency",
        type=int,
        default=100,
        help="tasks of enqueue-concurrent on SQLite (default 100)",
    )
    p.add_argument("--sleep-concurrency", type=int, default=100)
    p.add_argument("--sleep-ms", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--latency-fraction", type=float, default=0.5)
    p.add_argument("--latency-seconds", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=0.0, help="fixed latency rate instead")
    p.add_argument(
        "--idle-seconds", type=float, help="idle: the measured window (default 5; smoke 0.5)"
    )
    p.add_argument(
        "--memory-jobs", type=int, help="memory: jobs per run (default 100000; smoke 300)"
    )
    p.add_argument(
        "--memory-timeout", type=float, help="memory: seconds per run (default 600; smoke 60)"
    )
    p.add_argument("--fallback-rate", type=float, default=100.0, help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int)
    p.add_argument("--no-install", action="store_true", help="never install the peers")
    p.add_argument("--dsn", default=DEFAULT_DSN)
    p.add_argument("--dir", help="scratch directory for SQLite files (default bench/.scratch)")
    p.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    p.add_argument("--alkstore-python", help="interpreter for alkstore and the floor")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    if args.timeout is None:
        args.timeout = 60.0 if args.smoke else 180.0
    if args.parallel is None:
        args.parallel = 3 if args.smoke else 1
    if args.idle_seconds is None:
        args.idle_seconds = 0.5 if args.smoke else 5.0
    if args.memory_jobs is None:
        args.memory_jobs = 300 if args.smoke else 100_000
    if args.memory_timeout is None:
        args.memory_timeout = args.timeout if args.smoke else max(600.0, args.timeout)
    if args.smoke:
        args.rounds, args.jobs = 1, args.smoke_jobs
    if args.against and not args.compare:
        p.error("--against needs --compare")
    return args


def result_paths(out: Path, meta: dict[str, Any]) -> Path:
    stem = f"{meta['date'][:10]}-{meta['commit']}"
    n = 1
    while True:
        base = out / (stem if n == 1 else f"{stem}-{n}")
        if not any(base.with_suffix(s).exists() for s in (".md", ".json", ".png")):
            return base
        n += 1


def draw_chart(json_path: Path, png_path: Path) -> str:
    """Render the chart under the peers' interpreter (matplotlib lives there)."""
    if not PEERS_PYTHON.exists():
        return "no chart: the peers' environment (which has matplotlib) is not installed"
    proc = subprocess.run(
        [str(PEERS_PYTHON), str(HERE / "chart.py"), str(json_path), str(png_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0 or not png_path.exists():
        return f"no chart: chart.py failed: {proc.stderr.strip()[-300:]}"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    args = options(argv)
    if args.compare and args.against:
        _, old = load_summary(args.compare)
        _, new = load_summary(args.against)
        print("\n".join(compare_lines(old, new, str(args.compare))))
        return 0

    cells = plan(args)
    if not cells:
        raise SystemExit("nothing to run: check --systems/--engines/--workloads")
    wanted_peers = sorted({c.system.name for c in cells if c.system.peer})
    installed: dict[str, str] = {}
    install_s = None
    if wanted_peers:
        if not PEERS_PYTHON.exists() and not args.smoke and not args.no_install:
            _, install_s = install_peers()
        installed = peers_status()
    missing = {p: installed[p] for p in wanted_peers if installed.get(p) != "ok"}
    for peer, why in missing.items():
        print(
            f"peers: {peer} NOT RUN: {why}"
            + ("" if PEERS_PYTHON.exists() else " (python bench/install_peers.py)"),
            flush=True,
        )
    cells = [c for c in cells if c.system.name not in missing]

    base_dir = Path(args.dir) if args.dir else SCRATCH
    base_dir.mkdir(parents=True, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="run-", dir=base_dir)
    meta = None if args.smoke else machine(args)
    if meta and not meta["alkstore_from"].startswith(str(ROOT)):
        print(f"warning: alkstore imports from {meta['alkstore_from']}, not this tree", flush=True)
    schemas_before = pg_schemas(args.dsn)
    runner = Runner(args, run_dir)
    suite = Suite(args, cells, runner)
    started = time.monotonic()
    try:
        suite.run(args.rounds, args.parallel)
    except KeyboardInterrupt:
        print("interrupted: stopping the runs", file=sys.stderr, flush=True)
        runner.stop_all()
        raise
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        if not args.dir:
            with contextlib.suppress(OSError):
                base_dir.rmdir()  # only when no other run is using it
    took = time.monotonic() - started
    stray = sorted(pg_schemas(args.dsn) - schemas_before)
    if stray:
        print(
            f"warning: Postgres schemas left behind by runs (drop them by hand): {stray}",
            flush=True,
        )

    if args.smoke:
        return smoke_report(suite, cells, missing, took)

    assert meta is not None
    meta["took_s"] = round(took, 1)
    meta["load_end"] = os.getloadavg()
    if install_s is not None:
        meta["peers_install_s"] = round(install_s, 1)
    meta["peers_not_run"] = missing
    settings = {
        k: getattr(args, k)
        for k in (
            "rounds",
            "jobs",
            "seed",
            "timeout",
            "concurrency",
            "enqueue_concurrency",
            "sleep_concurrency",
            "sleep_ms",
            "batch",
            "latency_fraction",
            "latency_seconds",
            "rate",
            "idle_seconds",
            "memory_jobs",
            "memory_timeout",
        )
    }
    summary = summarize(suite.runs)
    args.out.mkdir(parents=True, exist_ok=True)
    base = result_paths(args.out, meta)
    json_path, md_path, png_path = (base.with_suffix(s) for s in (".json", ".md", ".png"))
    json_path.write_text(
        json.dumps(
            {
                "version": 1,
                "meta": meta,
                "settings": settings,
                "runs": suite.runs,
                "cells": summary,
            },
            indent=1,
        )
        + "\n"
    )
    no_chart = draw_chart(json_path, png_path)
    lines = header(meta, settings)
    lines += systems_table([c.system for c in cells], meta)
    if missing:
        lines += [f"**Not run** (not installed): {', '.join(missing)}.", ""]
    lines += markdown_tables(summary)
    lines += [f"![chart]({png_path.name})" if not no_chart else f"({no_chart})", ""]
    if args.compare:
        _, old = load_summary(args.compare)
        comparison = compare_lines(old, summary, args.compare.name)
        lines += ["## Change", "", *comparison, ""]
        print("\n".join(comparison))
    lines += notes_section(summary, suite.runs)
    lines.append(f"Raw runs: `{json_path.name}`.")
    md_path.write_text("\n".join(lines) + "\n")
    latest = args.out / "latest.md"
    latest.write_text(f"<!-- a copy of {md_path.name} -->\n" + md_path.read_text())
    print(
        f"\nwrote {md_path.relative_to(ROOT) if md_path.is_relative_to(ROOT) else md_path}"
        f" (and .json{'' if no_chart else ', .png'}), latest.md",
        flush=True,
    )
    if no_chart:
        print(no_chart, flush=True)
    failed = [r for r in suite.runs if r["status"] in ("failed", "timeout")]
    return 1 if failed else 0


def smoke_report(suite: Suite, cells: list[Cell], missing: dict[str, str], took: float) -> int:
    by_key = {f"{r['engine']}/{r['system']}/{r['row']}": r for r in suite.runs}
    report = []
    for c in cells:
        r = by_key.get(c.key)
        report.append(
            {
                "engine": c.system.engine,
                "system": c.system.label,
                "row": c.row.key,
                "status": r["status"] if r else "not-run",
                "detail": describe(r).strip() if r else "",
            }
        )
    for peer, why in missing.items():
        report.append(
            {"engine": "", "system": peer, "row": "*", "status": "not-run", "detail": why}
        )
    bad = [x for x in report if x["status"] in ("failed", "timeout")]
    ok = sum(1 for x in report if x["status"] == "ok")
    skipped = sum(1 for x in report if x["status"] == "skipped")
    print(f"\nsmoke: {ok} ran, {skipped} not offered, {len(bad)} failed, in {took:.1f} s")
    # Failures go to stderr too: CI keeps stderr and discards the rest.
    for x in bad:
        r = by_key[f"{x['engine']}/{x['system']}/{x['row']}"]
        for out in (sys.stdout, sys.stderr):
            print(f"FAILED {x['engine']} {x['system']} {x['row']}: {x['detail']}", file=out)
            for line in (r.get("stderr") or "").splitlines()[-8:]:
                print(f"    {line}", file=out)
    if missing:
        print(
            f"smoke: NOT RUN, so NOT CHECKED: {', '.join(missing)} (peers not installed:"
            " python bench/install_peers.py)"
        )
    status = "failed" if bad else ("incomplete" if missing else "passed")
    print(json.dumps({"smoke": status, "seconds": round(took, 1), "cells": report}))
    return 1 if bad else (2 if missing else 0)


if __name__ == "__main__":
    sys.exit(main())
