"""``alkstore worker``: the real command, as a subprocess, on a real SQLite
file and on the real Postgres server, under both drivers.

The child is ``python -m alkstore worker tasks:handlers ...`` run with the
interpreter running the tests, this tree first on ``PYTHONPATH``, in a
temporary directory holding the handler module below. The test and the child
synchronise through files the handlers write (and one the test writes to let
a handler finish), the database's state and the child's log file; every wait
is bounded, and every child is killed and reaped when its test ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from alkstore import Store
from tests.backends import BACKENDS, PG_DSN, PG_TEST_SCHEMA_PREFIX, selected_backends

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# Starting a Python process that imports alkstore can take seconds on a
# loaded machine: every bound that includes a process start is generous.
STARTUP = 30.0
SOON = 15.0

HANDLERS = '''
"""The handlers the tests run: what each does is in the job's payload."""

import os
import pathlib

import sniffio

MARKS = pathlib.Path(os.environ["WORKER_TEST_MARKS"])


async def sleep(seconds):
    if sniffio.current_async_library() == "trio":
        import trio
        await trio.sleep(seconds)
    else:
        import asyncio
        await asyncio.sleep(seconds)


def mark(name):
    (MARKS / name).touch()


async def handle(job):
    kind = job.payload["kind"]
    if kind == "slow":  # runs until the test creates the file "release"
        mark(f"started-{job.id}")
        while not (MARKS / "release").exists():
            await sleep(0.01)
    elif kind == "exit":  # a handler that ends the process its own way
        raise SystemExit("the handler gave up")
    elif kind == "stuck":  # runs until cancelled
        mark(f"started-{job.id}")
        try:
            await sleep(3600)
        finally:
            mark(f"stopped-{job.id}")
    mark(f"done-{job.id}")


handlers = {"jobs": handle, "ticks": {"handler": handle, "concurrency": 2}}


def not_async(job):
    pass


class Holder:
    handlers = {"jobs": handle}


empty = {}
number = 42
bad_setting = {"jobs": {"handler": handle, "retries": 3}}
reserved = {"__alkstore_x": handle}
'''


# -- where the child works ---------------------------------------------------------
@dataclass
class Database:
    engine: str
    location: str  # a SQLite file, or a Postgres schema
    args: list[str]  # the command's --db / --dsn --schema

    @asynccontextmanager
    async def store(self) -> AsyncIterator[Store]:
        """A store of the test's own on the same database (trio driver)."""
        backend = BACKENDS[f"{self.engine}-trio"]
        async with backend.open(self.location, clock=None) as store:
            yield store


# The child's engine and driver: one per selected backend (ALKSTORE_BACKENDS).
COMBOS = [(BACKENDS[n].engine, BACKENDS[n].driver) for n in selected_backends()]


@pytest.fixture(params=COMBOS, ids=[f"{e}-{d}" for e, d in COMBOS])
def combo(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def driver(combo: tuple[str, str]) -> str:
    return combo[1]


@pytest.fixture
def database(combo: tuple[str, str], tmp_path: Path) -> Iterator[Database]:
    """A fresh SQLite file, or a fresh Postgres schema dropped afterwards."""
    if combo[0] == "sqlite":
        path = str(tmp_path / "app.db")
        yield Database("sqlite", path, ["--db", path])
        return
    schema = f"{PG_TEST_SCHEMA_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    try:
        yield Database("postgres", schema, ["--dsn", PG_DSN, "--schema", schema])
    finally:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The directory the command runs in: a handler module, and the marks."""
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "tasks.py").write_text(HANDLERS)
    (directory / "marks").mkdir()
    return directory


# -- the child -------------------------------------------------------------------------
@dataclass
class Child:
    process: trio.Process
    project: Path
    stdout: Path
    stderr: Path

    @property
    def marks(self) -> Path:
        return self.project / "marks"

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def exit_code(self, timeout: float = SOON) -> int:
        with trio.fail_after(timeout):
            return await self.process.wait()

    def report(self) -> dict[str, Any]:
        """The --json document it printed."""
        lines = self.stdout.read_text().splitlines()
        assert len(lines) == 1, f"stdout: {lines!r}\nstderr: {self.log()}"
        doc: dict[str, Any] = orjson.loads(lines[0])
        return doc

    def log(self) -> str:
        return self.stderr.read_text()


def child_env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ALKSTORE_DSN"}
    env["PYTHONPATH"] = str(ROOT)  # the tree under test, not whichever copy is installed
    env["WORKER_TEST_MARKS"] = str(project / "marks")
    return env


@asynccontextmanager
async def worker(project: Path, *args: str) -> AsyncIterator[Child]:
    """``alkstore worker ARGS`` in ``project``, killed and reaped when the block ends."""
    out, err = project / "stdout.txt", project / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "alkstore", "worker", *args],
            cwd=project, env=child_env(project), stdin=subprocess.DEVNULL,
            stdout=stdout, stderr=stderr,
        )  # fmt: skip
    try:
        yield Child(process, project, out, err)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


def run_command(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alkstore", "worker", *args],
        cwd=project, env=child_env(project), capture_output=True, text=True, timeout=STARTUP,
    )  # fmt: skip


async def until(check: Callable[[], Awaitable[bool] | bool], timeout: float, what: str) -> None:
    """Wait (real time) until ``check()`` holds, looking every 20 ms."""
    with trio.move_on_after(timeout) as scope:
        while True:
            result = check()
            if not isinstance(result, bool):
                result = await result
            if result:
                return
            await trio.sleep(0.02)
    if scope.cancelled_caught:
        raise AssertionError(f"not within {timeout} s: {what}")


def marked(child: Child, name: str) -> Callable[[], bool]:
    return lambda: (child.marks / name).exists()


# -- the tests --------------------------------------------------------------------------
async def test_runs_the_jobs_acks_them_and_exits_0_on_a_signal(
    project: Path, database: Database, driver: str
) -> None:
    async with database.store() as store:
        q = store.queue("jobs")
        ids = await q.enqueue_batch([{"kind": "quick"}] * 5)
        async with worker(project, "tasks:handlers", "--queue", "jobs", "--driver", driver,
                          "--json", *database.args) as child:  # fmt: skip

            async def all_acked() -> bool:
                return all([await q.get_job(i) is None for i in ids])

            await until(all_acked, STARTUP, "the five jobs acked")
            child.signal(signal.SIGINT)
            assert await child.exit_code() == 0, child.log()
        assert all((project / "marks" / f"done-{i}").exists() for i in ids)
    doc = child.report()
    assert set(doc) == {"exit_code", "reason", "drained_cleanly", "signal", "drain_timeout",
                        "seconds", "jobs", "queues", "error"}  # fmt: skip
    assert (doc["exit_code"], doc["reason"], doc["drained_cleanly"]) == (0, "drained", True)
    assert doc["signal"] == "SIGINT" and doc["error"] is None
    counts = {"started", "acked", "retried", "dead", "handed_back", "lost", "cancelled",
              "cancelled_by_request"}  # fmt: skip
    assert set(doc["jobs"]) == counts
    assert doc["jobs"]["started"] == doc["jobs"]["acked"] == 5
    (queue,) = doc["queues"]
    assert queue["queue"] == "jobs" and set(queue) == {"queue", "worker_id", *counts}
    assert "SIGINT: draining" in child.log()


async def test_a_signal_lets_the_running_handler_finish_and_hands_back_the_rest_at_once(
    project: Path, database: Database, driver: str
) -> None:
    async with database.store() as store:
        q = store.queue("jobs")
        # Quick jobs first, so the worker learns its rate and claims ahead:
        # when the slow one runs, jobs claimed after it wait in memory.
        await q.enqueue_batch([{"kind": "quick"}] * 300)
        slow = await q.enqueue({"kind": "slow"})
        after = await q.enqueue_batch([{"kind": "quick"}] * 20)
        async with worker(project, "tasks:handlers", "-q", "jobs", "--driver", driver,
                          "--json", *database.args) as child:  # fmt: skip
            await until(marked(child, f"started-{slow}"), STARTUP, "the slow job started")

            async def claimed_ahead() -> bool:
                return (await q.stats()).processing >= 2

            await until(claimed_ahead, SOON, "jobs claimed ahead of the slow one")
            child.signal(signal.SIGTERM)

            async def handed_back() -> bool:
                return (await q.stats()).processing == 1  # the slow one alone

            # Back at once, while the slow handler still runs: anyone may take them.
            await until(handed_back, SOON, "the jobs claimed ahead handed back")
            assert child.process.returncode is None
            assert not (child.marks / f"done-{slow}").exists()
            (child.marks / "release").touch()
            assert await child.exit_code() == 0, child.log()
        assert await q.get_job(slow) is None  # finished and acked, not handed back
        for job_id in after:
            info = await q.get_job(job_id)
            assert info is not None and info.state == "pending" and info.attempts == 0
    doc = child.report()
    assert (doc["exit_code"], doc["reason"]) == (0, "drained")
    jobs = doc["jobs"]
    assert jobs["acked"] == 301 and jobs["handed_back"] >= 1 and jobs["cancelled"] == 0


async def test_a_handler_past_the_drain_timeout_is_cancelled_its_job_returns_and_exit_is_4(
    project: Path, database: Database, driver: str
) -> None:
    async with database.store() as store:
        q = store.queue("jobs")
        stuck = await q.enqueue({"kind": "stuck"})
        async with worker(project, "tasks:handlers", "-q", "jobs", "--driver", driver,
                          "--drain-timeout", "0.5", "--json", *database.args) as child:  # fmt: skip
            await until(marked(child, f"started-{stuck}"), STARTUP, "the stuck job started")
            child.signal(signal.SIGTERM)
            assert await child.exit_code() == 4, child.log()
        assert (child.marks / f"stopped-{stuck}").exists()  # cancelled, not killed
        info = await q.get_job(stuck)
        assert info is not None and info.state == "pending"
        assert info.attempts == 0 and info.claimed_by is None  # attempt refunded
        job = await q.claim_one("next")
        assert job is not None and job.id == stuck  # claimable at once
    doc = child.report()
    assert (doc["exit_code"], doc["reason"], doc["drained_cleanly"]) == (4, "drain_timeout", False)
    assert (doc["jobs"]["cancelled"], doc["jobs"]["handed_back"]) == (1, 1)


async def test_alkstore_cancel_from_another_process_cancels_the_running_handler(
    project: Path, database: Database, driver: str
) -> None:
    # Live cancellation across processes: the cancel command's commit wakes
    # the worker process (the SQLite watcher, Postgres LISTEN), long before
    # its first heartbeat (75 s away), and it counts a cancellation.
    async with database.store() as store:
        q = store.queue("jobs")
        job_id = await q.enqueue({"kind": "stuck"})
        async with worker(project, "tasks:handlers", "-q", "jobs", "--driver", driver,
                          "--json", *database.args) as child:  # fmt: skip
            await until(marked(child, f"started-{job_id}"), STARTUP, "the stuck job started")
            with trio.fail_after(STARTUP):
                done = await trio.run_process(
                    [sys.executable, "-m", "alkstore", "cancel", str(job_id), *database.args],
                    cwd=project, env=child_env(project), capture_stdout=True,
                    capture_stderr=True, check=False,
                )  # fmt: skip
            assert done.returncode == 0, done.stderr
            await until(marked(child, f"stopped-{job_id}"), SOON, "the handler cancelled")
            assert await q.get_job(job_id) is None
            child.signal(signal.SIGTERM)
            assert await child.exit_code() == 0, child.log()
        assert not (child.marks / f"done-{job_id}").exists()
    doc = child.report()
    assert doc["jobs"]["cancelled_by_request"] == 1
    assert (doc["jobs"]["lost"], doc["jobs"]["acked"], doc["jobs"]["cancelled"]) == (0, 0, 0)


async def test_a_second_signal_stops_at_once_with_exit_5(
    project: Path, database: Database, driver: str
) -> None:
    async with database.store() as store:
        q = store.queue("jobs")
        stuck = await q.enqueue({"kind": "stuck"})
        async with worker(project, "tasks:handlers", "-q", "jobs", "--driver", driver,
                          "--drain-timeout", "600", "--json", *database.args) as child:  # fmt: skip
            await until(marked(child, f"started-{stuck}"), STARTUP, "the stuck job started")
            child.signal(signal.SIGTERM)
            await until(lambda: "draining" in child.log(), SOON, "the drain logged")
            child.signal(signal.SIGTERM)
            assert await child.exit_code() == 5, child.log()  # not 600 s later
        info = await q.get_job(stuck)
        assert info is not None and info.state == "pending" and info.attempts == 0
    doc = child.report()
    assert (doc["exit_code"], doc["reason"]) == (5, "forced")
    assert doc["jobs"]["cancelled"] == 1
    assert "again: stopping at once" in child.log()


async def test_an_error_that_ends_the_workers_exits_3_and_hands_their_jobs_back(
    project: Path, database: Database, driver: str
) -> None:
    async with database.store() as store:
        q = store.queue("jobs")
        fatal = await q.enqueue({"kind": "exit"})
        async with worker(project, "tasks:handlers", "-q", "jobs", "--driver", driver,
                          "--json", *database.args) as child:  # fmt: skip
            assert await child.exit_code(STARTUP) == 3, child.log()
        info = await q.get_job(fatal)
        assert info is not None and info.state == "pending" and info.attempts == 0
    doc = child.report()
    assert (doc["exit_code"], doc["reason"], doc["drained_cleanly"]) == (3, "error", False)
    assert doc["error"] == "SystemExit: the handler gave up"
    assert doc["signal"] is None
    assert "worker stopped on an error" in child.log()


async def test_the_scheduler_runs_beside_the_workers(
    project: Path, database: Database, driver: str
) -> None:
    async with database.store() as store:
        await store.schedule("tick", "ticks", "@every 1s", {"kind": "quick"})
        async with worker(project, "tasks:handlers", "-q", "ticks", "--scheduler",
                          "--driver", driver, "--json", *database.args) as child:  # fmt: skip
            await until(lambda: any(child.marks.glob("done-*")), STARTUP, "a scheduled job ran")
            child.signal(signal.SIGTERM)
            assert await child.exit_code() == 0, child.log()
    doc = child.report()
    assert doc["jobs"]["acked"] >= 1
    assert [q["queue"] for q in doc["queues"]] == ["ticks"]


@pytest.mark.parametrize("driver", ["trio", "asyncio"])
async def test_a_signal_while_the_store_is_still_opening_ends_it_at_once(
    project: Path, driver: str
) -> None:
    """A server that accepts the connection and never answers: the worker is
    stuck opening the store (for its 10 s connect timeout) when the signal
    comes, and leaves at once with nothing to drain."""
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    with listener:
        dsn = f"postgresql://postgres@127.0.0.1:{port}/test"
        async with worker(project, "tasks:handlers", "--driver", driver, "--json",
                          "--dsn", dsn) as child:  # fmt: skip
            with trio.fail_after(STARTUP):
                connection, _ = await listener.accept()
            with connection:
                child.signal(signal.SIGTERM)
                assert await child.exit_code(5.0) == 0, child.log()
    doc = child.report()
    assert (doc["reason"], doc["signal"], doc["queues"]) == ("drained", "SIGTERM", [])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere:handlers"], "no module named 'nowhere'"),
        (["tasks:missing"], "tasks has no attribute 'missing'"),
        (["tasks"], "expected MODULE:ATTR"),
        (["tasks:Holder.nothing"], "tasks:Holder has no attribute 'nothing'"),
        (["tasks:not_async", "-q", "jobs"], "must be an async function"),
        (["tasks:handle"], "name its queues with --queue"),
        (["tasks:handlers", "-q", "other"], "--queue other: not in tasks:handlers"),
        (["tasks:number"], "must be an async handler or a mapping"),
        (["tasks:empty"], "empty mapping"),
        (["tasks:bad_setting"], "unknown setting(s) retries"),
        (["tasks:reserved"], "reserved"),
        (["tasks:handlers", "--worker-id", ""], "worker id"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_a_bad_module_attr_exits_2_before_opening_the_database(
    project: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    db = tmp_path / "never.db"
    done = run_command(project, *args, "--db", str(db))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == ""
    assert not db.exists()  # refused before anything was opened


def test_an_import_error_in_the_module_is_shown_with_its_traceback(project: Path) -> None:
    (project / "broken.py").write_text("import nonexistent_dependency_xyz\n")
    done = run_command(project, "broken:handlers", "--db", str(project / "x.db"))
    assert done.returncode == 2
    assert "importing broken failed" in done.stderr
    assert "nonexistent_dependency_xyz" in done.stderr and "Traceback" in done.stderr
    # The first frame shown is the user's line, not alkstore's or importlib's.
    frames = [line for line in done.stderr.splitlines() if line.startswith("  File ")]
    assert frames and all("broken.py" in line for line in frames), done.stderr


def test_a_nested_attribute_and_a_dict_queue_are_found(project: Path, tmp_path: Path) -> None:
    """``tasks:Holder.handlers`` resolves; the command then gets as far as the
    database (a directory that does not exist: exit 2 from the open)."""
    db = tmp_path / "missing-dir" / "x.db"
    done = run_command(project, "tasks:Holder.handlers", "--db", str(db), "--create")
    assert done.returncode == 2
    assert "cannot open" in done.stderr


def test_a_missing_database_file_is_refused_not_created(project: Path, tmp_path: Path) -> None:
    """A typo in --db exits 2 with the inspection commands' message instead
    of making a new, empty database and idling on it."""
    db = tmp_path / "nope.db"
    done = run_command(project, "tasks:handlers", "--db", str(db))
    assert done.returncode == 2, done.stderr
    assert f"no such database file: {db}" in done.stderr
    assert "alkstore migrate" in done.stderr
    assert not db.exists()


async def test_create_makes_the_database_and_runs(project: Path, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    async with worker(project, "tasks:handlers", "--db", str(db), "--create") as child:
        await until(lambda: "running" in child.log(), STARTUP, "the worker started")
        assert db.exists()
        child.signal(signal.SIGTERM)
        assert await child.exit_code() == 0, child.log()


async def test_metrics_port_serves_the_workers_metrics_while_it_runs(
    project: Path, database: Database, driver: str
) -> None:
    import re
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    async with database.store() as store:
        q = store.queue("jobs")
        ids = await q.enqueue_batch([{"kind": "quick"}] * 3)
        async with worker(project, "tasks:handlers", "-q", "jobs", "--driver", driver,
                          "--metrics-port", "0", *database.args) as child:  # fmt: skip

            async def all_acked() -> bool:
                return all([await q.get_job(i) is None for i in ids])

            await until(all_acked, STARTUP, "the three jobs acked")
            await until(lambda: "metrics at http" in child.log(), SOON, "the metrics URL logged")
            match = re.search(r"metrics at (http://\S+)", child.log())
            assert match is not None
            url = match.group(1)

            def scrape() -> str:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return str(response.read().decode())

            text = await trio.to_thread.run_sync(scrape)
            acked = {
                s.labels.get("messaging_destination_name"): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
                if s.name == "alkstore_jobs_acked_total"
            }
            assert acked.get("jobs") == 3, text
            child.signal(signal.SIGTERM)
            assert await child.exit_code() == 0, child.log()

        def refused() -> bool:
            try:
                urllib.request.urlopen(url, timeout=1)
            except OSError:
                return True
            return False

        assert await trio.to_thread.run_sync(refused)  # the server went with the worker


def test_metrics_port_taken_exits_2(project: Path, tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_command(project, "tasks:handlers", "-q", "jobs", "--metrics-port", str(port),
                           "--db", str(tmp_path / "app.db"), "--create")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot serve metrics" in done.stderr
