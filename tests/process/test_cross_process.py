"""Two processes, one database: wakes cross, crashed workers lose nothing.

The other process is ``tests/process/helper.py``, run with the interpreter
running the tests. Every subprocess is killed and reaped in ``finally`` (or by
``trio.run_process`` on cancellation): nothing outlives a test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from alkstore import Job, Wake
from tests.backends import BACKENDS, Backend, selected_backends

from .helper import logging_ack, make_handler, read_log

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# Starting a Python process that imports trio and alkstore can take seconds
# on a loaded machine: bounds that include a process start are generous.
STARTUP = 30.0
NEVER = 60.0  # a poll interval no test may rely on


def helper_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "tests.process.helper", *args]


def helper_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


async def run_helper(*args: str) -> str:
    """Run the helper to completion; its stdout. Cancellation kills it."""
    done = await trio.run_process(
        helper_argv(*args), cwd=ROOT, env=helper_env(), capture_stdout=True, capture_stderr=True
    )
    return done.stdout.decode()


@asynccontextmanager
async def helper_process(*args: str) -> AsyncIterator[trio.Process]:
    """A long-running helper, killed and reaped when the block ends."""
    proc = await trio.lowlevel.open_process(
        helper_argv(*args), cwd=ROOT, env=helper_env(), stdin=subprocess.DEVNULL
    )
    try:
        yield proc
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


# These tests (and the helper process) drive the store with trio itself: they
# run on the trio backends, one per engine.
@pytest.fixture(params=selected_backends(driver="trio"))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


# Each engine's wake sources: SQLite's watcher on inotify and on pure
# polling; Postgres's LISTEN. Generated per engine, so nothing is skipped.
WAKE_SOURCES = [
    (name, mode)
    for name in selected_backends(driver="trio")
    for mode in (("inotify", "polling") if BACKENDS[name].engine == "sqlite" else ("listen",))
]


@dataclass
class WakeSource:
    backend: Backend
    location: str
    options: dict[str, Any]


@pytest.fixture(params=WAKE_SOURCES, ids=[f"{b}-{m}" for b, m in WAKE_SOURCES])
def wake_source(request: pytest.FixtureRequest, tmp_path: Path) -> WakeSource:
    """A fresh database and the open options for one wake source."""
    name, mode = request.param
    backend = BACKENDS[name]
    options: dict[str, Any] = {}
    if backend.engine == "sqlite":
        from alkstore.io_trio import SqliteOptions, WatcherOptions

        watcher = WatcherOptions(use_inotify=mode == "inotify")
        options = {"options": SqliteOptions(watcher=watcher)}
    return WakeSource(backend, backend.new_location(tmp_path), options)


async def wait_for(predicate: Any, timeout: float) -> None:
    """Wait (real time) until ``predicate()`` holds."""
    with trio.fail_after(timeout):
        while True:
            if predicate():
                return
            await trio.sleep(0.005)


async def start_worker(nursery: trio.Nursery, q: Any, handler: Any, **options: Any) -> Any:
    scope = trio.CancelScope()

    async def run(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with scope:
            await q.work(handler, task_status=task_status, **options)

    await nursery.start(run)
    return scope


# -- (a) wakes cross processes ---------------------------------------------------------
async def test_an_enqueue_in_another_process_wakes_an_idle_worker(wake_source: WakeSource) -> None:
    """``wake_source``: the engine's wake source under test."""
    backend, location, wake_options = wake_source.backend, wake_source.location, wake_source.options
    async with backend.open(location, clock=None, **wake_options) as store:
        q = store.queue("xp")
        handled: list[tuple[int, float]] = []

        async def handler(job: Job) -> None:
            handled.append((job.id, time.monotonic()))

        async with trio.open_nursery() as nursery:
            # poll_interval 60 s: only a wake can make it claim in time.
            scope = await start_worker(nursery, q, handler, poll_interval=NEVER)
            await trio.sleep(0.2)  # idle, asleep on the wake receiver
            for round_ in range(2):
                payload = f'{{"r": {round_}}}'
                with trio.fail_after(STARTUP):
                    out = await run_helper("enqueue", backend.id, location, "xp", payload)
                job_id, committed_at = int(out.split()[0]), float(out.split()[1])
                await wait_for(lambda i=job_id: any(h[0] == i for h in handled), 5.0)
                (seen_at,) = [t for i, t in handled if i == job_id]
                assert seen_at - committed_at < 2.0, "woken by a poll, not by the wake"
            scope.cancel()
        assert len(handled) == 2
        assert (await q.stats()).ready == 0


async def test_a_notify_in_another_process_wakes_a_listener(wake_source: WakeSource) -> None:
    """``wake_source``: the engine's wake source under test."""
    backend, location, wake_options = wake_source.backend, wake_source.location, wake_source.options
    async with (
        backend.open(location, clock=None, **wake_options) as store,
        store.listen("xp-ch") as wakes,
        store.listen("other") as others,
    ):
        for _ in range(2):
            with trio.fail_after(STARTUP):
                out = await run_helper("notify", backend.id, location, "xp-ch")
            committed_at = float(out.split()[0])
            with trio.fail_after(5.0):
                wake = await wakes.recv()
            assert wake == Wake("xp-ch")
            assert time.monotonic() - committed_at < 2.0
            assert others.try_recv() is None  # only the notified channel


@pytest.fixture
def sqlite_path(tmp_path: Path) -> str:
    """The SQLite watcher's own test: once, not per backend."""
    return str(tmp_path / "own.db")


async def test_own_notifications_are_not_delivered_twice(sqlite_path: str) -> None:
    """The watcher sees this store's own commits too, and skips its rows:
    they woke local receivers at commit already."""
    from alkstore.io_trio import open_sqlite

    async with open_sqlite(sqlite_path) as store, store.listen("self") as wakes:
        watcher = store._core.executor.watcher  # type: ignore[attr-defined]
        changes = watcher.changes
        await store.notify("self")
        assert wakes.try_recv() == Wake("self")
        await wait_for(lambda: watcher.changes > changes, 5.0)  # the watcher saw it ...
        await trio.sleep(0.1)
        assert wakes.try_recv() is None  # ... and did not wake us again


# -- (b) a worker process killed mid-job --------------------------------------------------
async def test_a_killed_worker_process_loses_nothing(
    backend: Backend, location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = str(tmp_path / "work.log")
    vt = 1.0
    async with backend.open(location, clock=None) as store:
        q = store.queue("crash", visibility_timeout=vt)
        blocked = await q.enqueue({"block": True})

        async with helper_process("worker", backend.id, location, "crash", log, str(vt)) as proc:
            with trio.fail_after(STARTUP):
                while not any(e[:2] == ["start", str(blocked)] for e in read_log(log)):
                    assert proc.returncode is None, "worker process died on its own"
                    await trio.sleep(0.02)
            info = await q.get_job(blocked)
            assert info is not None and info.state == "processing"
            assert info.claimed_by == f"proc-{proc.pid}"
            os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
        assert proc.returncode == -signal.SIGKILL
        # Its claim is still live (it heartbeat until it died): nobody may
        # take the job before the claim lapses.
        info = await q.get_job(blocked)
        assert info is not None and info.state == "processing" and info.claim_expires_at
        lapses_at = info.claim_expires_at.timestamp()

        others = [await q.enqueue({"n": i}) for i in range(3)]
        everything = [blocked, *others]
        import alkstore.services.worker.settler as worker_module

        monkeypatch.setattr(
            worker_module.Settler, "_ack", logging_ack(log, worker_module.Settler._ack)
        )

        async with trio.open_nursery() as nursery:
            # poll_interval 60 s: the worker wakes when the claim lapses.
            scope = await start_worker(
                nursery, q, make_handler(log), worker_id="survivor", poll_interval=NEVER
            )
            await wait_for(
                lambda: {int(e[1]) for e in read_log(log) if e[0] == "ack"} == set(everything),
                vt + 5.0,
            )
            await trio.sleep(0.3)  # nothing more happens
            scope.cancel()

    entries = read_log(log)
    starts = [e for e in entries if e[0] == "start"]
    dones = [e for e in entries if e[0] == "done"]
    acks = [e for e in entries if e[0] == "ack"]
    # Nothing lost: every job finished and was acked exactly once.
    assert Counter(int(e[1]) for e in dones) == Counter(everything)
    assert Counter(int(e[1]) for e in acks) == Counter(everything)
    # The blocked job ran twice: in the killed process, then again (attempt
    # 2) in the survivor, and not before its claim lapsed.
    blocked_starts = [e for e in starts if int(e[1]) == blocked]
    assert [(e[2], e[3]) for e in blocked_starts] == [(str(proc.pid), "1"), (str(os.getpid()), "2")]
    assert float(blocked_starts[1][4]) >= lapses_at - 0.01
    assert all(e[2] == str(os.getpid()) for e in acks)
    async with backend.open(location, clock=None) as store:
        q = store.queue("crash")
        assert [await q.get_job(i) for i in everything] == [None] * len(everything)
        assert await q.dead_letters() == []
