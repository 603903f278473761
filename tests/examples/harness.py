"""Run an example app as its user would: real processes, real HTTP, bounded waits.

:func:`processes` starts commands in the example's directory (each in a process
group of its own, its output in a file) and, however the test ends, kills what
is still running and reaps it; when the test failed it prints every process's
output, which pytest shows with the failure. Every wait polls, and every wait is
bounded: :func:`until`, :func:`wait_for_http`, :meth:`Process.stop`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.backends import BACKENDS, PG_DSN, PG_TEST_SCHEMA_PREFIX, selected_backends

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
# Starting a Python process that imports a web framework and alkstore can take
# seconds on a loaded machine: every bound that includes a start is generous.
STARTUP = 60.0
SOON = 20.0
POLL = 0.02

# The engines the examples run on: those of the selected backends (ALKSTORE_BACKENDS).
ENGINES = sorted({BACKENDS[name].engine for name in selected_backends()})

# What the examples read, and what the tests set for them.
EXAMPLE_VARIABLES = ("ALKSTORE_DSN", "ALKSTORE_DB", "ALKSTORE_SCHEMA")


# -- the database ------------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    """A fresh database, as the examples' environment and the alkstore command name it."""

    engine: str
    env: dict[str, str]  # ALKSTORE_DSN / ALKSTORE_DB / ALKSTORE_SCHEMA
    cli: list[str]  # the command's options for the same database (the DSN comes from env)


@contextmanager
def database(engine: str, tmp_path: Path) -> Iterator[Database]:
    """A SQLite file in ``tmp_path``, or a fresh Postgres schema (named as the suite's,
    so the session's cleanup drops it too) that holds alkstore's tables and, through the
    DSN's ``search_path``, the app's own; dropped afterwards."""
    if engine == "sqlite":
        path = str(tmp_path / "app.db")
        yield Database("sqlite", {"ALKSTORE_DB": path}, ["--db", path])
        return
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = f"{PG_TEST_SCHEMA_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    dsn = make_conninfo(PG_DSN, options=f"-c search_path={schema}")
    try:
        yield Database(
            "postgres", {"ALKSTORE_DSN": dsn, "ALKSTORE_SCHEMA": schema}, ["--schema", schema]
        )
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- processes ---------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    stopped: bool = False  # the test stopped it: its exit is no surprise

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        return self.popen.poll() is None

    def wait(self, timeout: float = STARTUP) -> int:
        """Its exit code, once it exits by itself (at most ``timeout`` seconds)."""
        self.stopped = True
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} still running after {timeout} s") from None

    def stop(self, signum: int = signal.SIGTERM, timeout: float = SOON) -> int:
        """Send ``signum`` (to this process, not its group: as ``kill`` or systemd
        would) and return its exit code, waiting at most ``timeout`` seconds."""
        self.stopped = True
        if self.running():
            self.popen.send_signal(signum)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} still running {timeout} s after {signal.Signals(signum).name}"
                f"\n{self.describe()}"
            ) from None

    def describe(self) -> str:
        return f"--- {self.name} (exit code {self.popen.returncode}) ---\n{self.output()}"


@dataclass
class Launcher:
    tmp_path: Path
    started: list[Process] = field(default_factory=list)

    def start(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str]) -> Process:
        """``python ARGV`` (this interpreter) in ``cwd`` with the example variables
        ``env`` and this tree first on the import path."""
        log = self.tmp_path / f"{name}.log"
        child_env = {k: v for k, v in os.environ.items() if k not in EXAMPLE_VARIABLES}
        child_env |= {"PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", **env}
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, *argv],
                cwd=cwd,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own: its children go with it
            )
        process = Process(name, popen, log)
        self.started.append(process)
        return process

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.started)


@contextmanager
def processes(tmp_path: Path) -> Iterator[Launcher]:
    """A launcher whose processes are all gone when the block ends: each process
    group still there is killed and its leader reaped. On a failure, every
    process's output is printed (pytest shows it with the failure)."""
    launcher = Launcher(tmp_path)
    try:
        yield launcher
    except BaseException:
        print(launcher.describe())
        raise
    finally:
        for process in launcher.started:
            with suppress(ProcessLookupError):  # raised once the whole group has exited
                os.killpg(process.popen.pid, signal.SIGKILL)
            process.popen.wait()


# -- waiting and HTTP --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def until(check: Callable[[], bool], timeout: float, what: str, launcher: Launcher) -> None:
    """Poll ``check()`` every 20 ms until it holds; fail after ``timeout`` seconds, or
    as soon as a process the test started has exited."""
    deadline = time.monotonic() + timeout
    while not check():
        exited = [p for p in launcher.started if not (p.stopped or p.running())]
        if exited:
            raise AssertionError(
                f"{exited[0].name} exited while waiting for: {what}\n{launcher.describe()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}\n{launcher.describe()}")
        time.sleep(POLL)


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """One request (JSON in, JSON out): the status and the decoded body."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=SOON) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"null")


def wait_for_http(url: str, launcher: Launcher, timeout: float = STARTUP) -> None:
    """Wait until ``url`` answers 200."""

    def answers() -> bool:
        try:
            return http("GET", url)[0] == 200
        except (urllib.error.URLError, ConnectionError):
            return False  # not listening yet

    until(answers, timeout, f"{url} answering", launcher)


# -- the order flow every web example serves ---------------------------------------------


def check_order_flow(base: str, launcher: Launcher, worker: Process) -> None:
    """The examples' shared story, against an app at ``base`` and a worker process:
    an order is processed by the worker; with the worker stopped (a clean drain), a
    duplicate order fails with 409 and its job, enqueued before the failing INSERT,
    is rolled back with it, while a good order leaves exactly its own job."""
    status, body = http("POST", f"{base}/orders", {"id": "A-1", "item": "book"})
    assert status == 201, body

    def processed() -> bool:
        status, order = http("GET", f"{base}/orders/A-1")
        assert status == 200, order
        return bool(order["status"] == "processed")

    until(processed, STARTUP, "order A-1 processed by the worker", launcher)
    assert worker.stop(signal.SIGTERM) == 0, launcher.describe()  # drained cleanly

    # With no worker left, what the queue holds is what the requests enqueued.
    status, body = http("POST", f"{base}/orders", {"id": "A-1", "item": "lamp"})
    assert status == 409, body
    status, body = http("POST", f"{base}/orders", {"id": "B-2", "item": "lamp"})
    assert status == 201, body
    status, stats = http("GET", f"{base}/queue")
    assert status == 200 and (stats["ready"], stats["processing"]) == (1, 0), stats
    status, order = http("GET", f"{base}/orders/A-1")
    assert (order["item"], order["status"]) == ("book", "processed")
