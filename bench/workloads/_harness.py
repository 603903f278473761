"""Plumbing the peer workload scripts share (huey, honker, pgqueuer,
procrastinate); not a system of its own.

- ``bounded``: the run's hard time limit (exit 124) and its clean-up, also on
  failure.
- ``Workers`` / ``Control``: worker subprocesses (the script re-invoked with
  ``--worker``), each setting up, saying ``ready``, then starting on ``go`` and
  stopping on ``stop`` (or when its stdin closes); asked ``cpu`` meanwhile, a
  worker answers with its ``time.process_time()`` (every thread of it).
- ``idle`` / ``memory``: those two workloads of common.py, the same for every
  peer once its workers are ready.
- ``Board``: a file every process maps, where handlers record each job's
  time (``time.monotonic()``, one system-wide clock on Linux) and count what
  they ran, so the parent sees progress without a query per job.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import mmap
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from common import SETTLE_S, idle_fields, memory_fields, report, status_mb

# The suite sets a longer limit for its long runs (the memory workload).
HARD_LIMIT_S = float(os.environ.get("BENCH_TIME_LIMIT", "120"))
WORKER_FLAG = "--worker"
MAX_SLOTS = 64

_children: list[subprocess.Popen[bytes]] = []
_cleanups: list[Callable[[], None]] = []


class RunTimeout(Exception):
    pass


def on_cleanup(fn: Callable[[], None]) -> None:
    """Run ``fn`` when the run ends, however it ends (last registered, first run)."""
    _cleanups.append(fn)


def _run_cleanups() -> None:
    while _cleanups:
        try:
            fn = _cleanups.pop()
        except IndexError:  # the backstop thread got there first
            return
        try:
            fn()
        except Exception:
            traceback.print_exc()


def kill_children() -> None:
    for p in list(_children):
        if p.poll() is None:
            p.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(5)
        for f in (p.stdin, p.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass


def bounded(main: Callable[[], None], limit: float | None = None) -> NoReturn:
    """Run ``main`` under the hard limit, then the clean-ups; exit with its status."""
    limit = HARD_LIMIT_S if limit is None else limit

    def alarm(*_: object) -> None:
        raise RunTimeout(f"run exceeded {limit:.0f} s")

    def backstop() -> None:
        # The main thread is stuck where an exception cannot reach it.
        time.sleep(limit + 20)
        print("timeout: run did not unwind, killing it", file=sys.stderr, flush=True)
        kill_children()
        _run_cleanups()
        os._exit(124)

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    threading.Thread(target=backstop, daemon=True).start()
    code: Any = 0
    try:
        main()
    except RunTimeout as exc:
        print(f"timeout: {exc}", file=sys.stderr, flush=True)
        code = 124
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        kill_children()
        _run_cleanups()
    sys.stdout.flush()
    sys.exit(code)


def run_dir(base: str, prefix: str) -> str:
    """A fresh directory under ``base``, removed at the end of the run."""
    path = tempfile.mkdtemp(prefix=prefix, dir=base)
    on_cleanup(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


# -- worker processes ---------------------------------------------------------


def is_worker() -> bool:
    """True in a worker subprocess; strips the hidden flag from ``sys.argv``."""
    if WORKER_FLAG in sys.argv:
        sys.argv.remove(WORKER_FLAG)
        return True
    return False


def worker_env() -> tuple[int, str, str]:
    """(slot, target, board path) handed to this worker by ``Workers``."""
    return int(os.environ["BENCH_SLOT"]), os.environ["BENCH_TARGET"], os.environ["BENCH_BOARD"]


class Control:
    """The worker's side of the go/stop protocol (stdout ``ready``, stdin ``go``/``stop``)."""

    def __init__(self) -> None:
        # Die with the parent, and never outlive the hard limit.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:
            os._exit(3)
        signal.alarm(int(HARD_LIMIT_S) + 30)
        self._out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
        # Whatever the library prints goes to stderr, so stdout carries only the protocol.
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def ready(self) -> None:
        """Say ready, block until go."""
        self._out.write("ready\n")
        self._out.flush()
        line = sys.stdin.readline()
        if line.strip() != "go":
            os._exit(3)

    def wait_stop(self) -> None:
        """Block until the parent says stop, answering its ``cpu`` questions meanwhile."""
        while sys.stdin.readline().strip() == "cpu":
            self._out.write(f"cpu {time.process_time():.9f}\n")
            self._out.flush()

    def on_stop(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (from another thread) once the parent says stop."""

        def watch() -> None:
            self.wait_stop()
            fn()

        threading.Thread(target=watch, daemon=True).start()


class Workers:
    """N worker subprocesses of this script, started together on ``go``."""

    def __init__(self, n: int, target: str, board: str, argv: Sequence[str] | None = None) -> None:
        if not 1 <= n <= MAX_SLOTS:
            raise ValueError(f"--processes must be 1..{MAX_SLOTS}")
        script = os.path.abspath(sys.argv[0])
        argv = list(sys.argv[1:] if argv is None else argv)
        self.procs: list[subprocess.Popen[bytes]] = []
        for slot in range(n):
            env = dict(os.environ, BENCH_SLOT=str(slot), BENCH_TARGET=target, BENCH_BOARD=board)
            p = subprocess.Popen(
                [sys.executable, script, *argv, WORKER_FLAG],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            _children.append(p)
            self.procs.append(p)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            assert p.stdout
            left = deadline - time.monotonic()
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, left))
            line = p.stdout.readline() if ready else b""
            if line.strip() != b"ready":
                raise RuntimeError(f"worker {p.pid} did not get ready (exit {p.poll()})")

    def go(self) -> float:
        """Start every worker; the monotonic time the clock starts."""
        t0 = time.monotonic()
        for p in self.procs:
            assert p.stdin
            p.stdin.write(b"go\n")
            p.stdin.flush()
        return t0

    def dead(self) -> list[int]:
        return [p.pid for p in self.procs if p.poll() is not None]

    def cpu_seconds(self, timeout: float = 10.0) -> float:
        """The workers' CPU time so far (their own ``time.process_time()``, summed)."""
        total = 0.0
        for p in self.procs:
            assert p.stdin and p.stdout
            p.stdin.write(b"cpu\n")
            p.stdin.flush()
            ready, _, _ = select.select([p.stdout], [], [], timeout)
            words = (p.stdout.readline() if ready else b"").split()
            if len(words) != 2 or words[0] != b"cpu":
                raise RuntimeError(f"worker {p.pid} did not say its CPU time (exit {p.poll()})")
            total += float(words[1])
        return total

    def status_mb(self, field: str = "VmRSS") -> float:
        """The workers' ``field`` of ``/proc/<pid>/status``, summed, in MiB."""
        return sum(status_mb(p.pid, field) for p in self.procs)

    def stop(self, timeout: float = 20.0) -> None:
        """Ask every worker to stop, wait for it; kill on expiry. Raises if one failed."""
        for p in self.procs:
            try:
                assert p.stdin
                p.stdin.write(b"stop\n")
                p.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        deadline = time.monotonic() + timeout
        failed = []
        for p in self.procs:
            try:
                rc = p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = "killed (did not stop)"
            if p.stdout:
                p.stdout.close()
            if rc != 0:
                failed.append((p.pid, rc))
        if failed:
            raise RuntimeError(f"workers failed: {failed}")


def wait_done(
    board: Board,
    jobs: int,
    workers: Workers,
    remaining: Callable[[], int] | None = None,
    poll_s: float = 0.001,
) -> float:
    """Wait until every job's handler ran and (``remaining``) the database
    holds no unacknowledged job; the monotonic time that was first seen."""
    while True:
        if board.total() >= jobs:
            if remaining is None or remaining() == 0:
                return time.monotonic()
        elif workers.dead():
            raise RuntimeError(f"worker(s) {workers.dead()} exited before the jobs were done")
        time.sleep(poll_s)


def idle(workers: Workers, seconds: float) -> None:
    """The idle workload: start the (ready) workers on an empty queue, let
    them settle, report their CPU time over ``seconds``."""
    workers.go()
    time.sleep(SETTLE_S)
    cpu0, t0 = workers.cpu_seconds(), time.perf_counter()
    time.sleep(seconds)
    cpu1, t1 = workers.cpu_seconds(), time.perf_counter()
    if workers.dead():
        raise RuntimeError(f"worker(s) {workers.dead()} exited while idle")
    workers.stop()
    report(**idle_fields(cpu1 - cpu0, t1 - t0))


def memory(
    board: Board, jobs: int, workers: Workers, remaining: Callable[[], int] | None = None
) -> None:
    """The memory workload: the workers' resident set once 10% of the jobs
    have run, and once all have (as ``wait_done`` sees it)."""
    t0 = workers.go()
    while board.total() < max(1, jobs // 10):
        if workers.dead():
            raise RuntimeError(f"worker(s) {workers.dead()} exited before the jobs were done")
        time.sleep(0.001)
    start = workers.status_mb()
    t1 = wait_done(board, jobs, workers, remaining)
    end, peak = workers.status_mb(), workers.status_mb("VmHWM")
    workers.stop()
    board.check()
    report(**memory_fields(jobs, t1 - t0, start, end, peak))


# -- the board ----------------------------------------------------------------


class Board:
    """Per-slot run counts and one float per job, in a file every process maps."""

    def __init__(self, path: str, jobs: int, slot: int = 0, create: bool = False) -> None:
        self.jobs = jobs
        self.slot = slot
        self._times_at = 8 * MAX_SLOTS
        size = self._times_at + 8 * max(1, jobs)
        if create:
            with open(path, "wb") as f:
                f.truncate(size)
        with open(path, "r+b") as f:
            self._mm = mmap.mmap(f.fileno(), size)
        self._count = 0
        self._lock = threading.Lock()

    def hit(self, i: int) -> None:
        """Job ``i`` ran (or started): record the time and count it."""
        t = time.monotonic()
        with self._lock:
            struct.pack_into("d", self._mm, self._times_at + 8 * i, t)
            self._count += 1
            struct.pack_into("q", self._mm, 8 * self.slot, self._count)

    def total(self) -> int:
        return sum(struct.unpack_from(f"{MAX_SLOTS}q", self._mm, 0))

    def times(self) -> tuple[float, ...]:
        return struct.unpack_from(f"{self.jobs}d", self._mm, self._times_at)

    def check(self) -> tuple[float, ...]:
        """The recorded times; raises if a job never ran, warns on re-runs."""
        times = self.times()
        missing = sum(1 for t in times if t == 0.0)
        if missing:
            raise RuntimeError(f"{missing} of {self.jobs} jobs never ran")
        extra = self.total() - self.jobs
        if extra > 0:
            print(f"warning: {extra} job runs beyond one each", file=sys.stderr)
        return times

    def close(self) -> None:
        self._mm.close()


# -- small shared pieces ---------------------------------------------------------


def payload_bytes(p: dict[str, Any]) -> bytes:
    """``payload(i)`` as its 100 bytes of JSON."""
    return json.dumps(p, separators=(",", ":")).encode()


def paced(n: int, rate: float) -> Any:
    """Yield 0..n-1, the i-th at ``start + i / rate`` (open loop: late ones go at once)."""
    start = time.monotonic()
    for i in range(n):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        yield i


async def apaced(n: int, rate: float) -> Any:
    import asyncio

    start = time.monotonic()
    for i in range(n):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i


# -- Postgres (psycopg for the set-up; each library connects its own way) --------


def pg_conninfo(dsn: str, schema: str) -> str:
    """``dsn`` with every session confined to ``schema``; the application
    name tags the run's sessions so the clean-up can end strays."""
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, options=f"-c search_path={schema}", application_name=schema)


def pg_server_settings(schema: str) -> dict[str, str]:
    """The same for asyncpg."""
    return {"search_path": schema, "application_name": schema}


def pg_fresh_schema(dsn: str, schema: str) -> None:
    """Create ``schema`` now and drop it (and end the run's sessions) at the end."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    on_cleanup(lambda: pg_drop_schema(dsn, schema))


def pg_drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET statement_timeout = '30s'")
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (schema,),
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class PgCounter:
    """One sync connection in the run's schema, for set-up checks and ``remaining``."""

    def __init__(self, dsn: str, schema: str) -> None:
        import psycopg

        self.conn = psycopg.connect(pg_conninfo(dsn, schema), autocommit=True)
        on_cleanup(self.close)

    def scalar(self, sql: str) -> int:
        row = self.conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        self.conn.close()
