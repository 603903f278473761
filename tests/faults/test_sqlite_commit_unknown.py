"""A SQLite COMMIT whose fsync fails (a real I/O error, injected under the
real SQLite library with an LD_PRELOAD shim) raises ``CommitUnknown``, not
a plain ``DatabaseError``: SQLite rolls the transaction back in memory, but
its frames may already be in the WAL, and after a crash recovery finds them
committed. This test shows both: the error, then the job after the crash.

Both drivers: the test takes the contract suite's ``backend`` fixture
(SQLite backends only); the child process that meets the failing disk opens
its store with the same backend (``tests.backends``), so the auto-commit
path, a transaction block, an explicit ``tx.commit()`` and a group commit of
concurrent operations are each seen on trio and on asyncio."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.backends import BACKENDS, Backend, selected_backends
from tests.contract import aio

from .procs import ROOT, STARTUP, env

pytestmark = pytest.mark.slow

CHILD = """
import asyncio, importlib, json, os, sys, trio
from alkstore import CommitUnknown
from tests.backends import BACKENDS
from tests.contract import aio

def outcome(exc):
    if exc is None:
        return "returned"
    if isinstance(exc, CommitUnknown):
        return "CommitUnknown"
    return f"{type(exc).__name__}: {exc}"

async def main(backend, path, flag):
    out = {}
    driver = importlib.import_module(f"alkstore.io_{backend.driver}")
    options = driver.SqliteOptions(pragmas={"synchronous": "FULL"})  # fsync at every commit
    async with backend.open(path, options=options) as store:
        q = store.queue("q")
        out["before"] = await q.enqueue("before")
        open(flag, "w").close()  # the disk stops syncing
        for what in ("auto-commit", "transaction", "tx.commit()"):
            try:
                if what == "auto-commit":
                    await q.enqueue("during")
                elif what == "transaction":
                    async with store.transaction() as tx:
                        await tx.enqueue(q, "during-tx")
                else:
                    async with store.transaction() as tx:
                        await tx.enqueue(q, "during-explicit")
                        await tx.commit()
                out[what] = outcome(None)
            except Exception as exc:
                out[what] = outcome(exc)
        # Concurrent operations committed together by the writer slot.
        group = []
        async def enqueue(i):
            try:
                await q.enqueue(f"during-group-{i}")
                group.append(outcome(None))
            except Exception as exc:
                group.append(outcome(exc))
        async with aio.open_task_group() as tasks:
            for i in range(5):
                tasks.start_soon(enqueue, i)
        out["group"] = group
        print(json.dumps(out), flush=True)
        os._exit(0)  # a crash: no checkpoint, the WAL stays as it is

backend = BACKENDS[sys.argv[1]]
if backend.driver == "trio":
    trio.run(main, backend, sys.argv[2], sys.argv[3])
else:
    asyncio.run(main(backend, sys.argv[2], sys.argv[3]))
"""


@pytest.fixture(params=[b for b in selected_backends() if BACKENDS[b].engine == "sqlite"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


def _shim(tmp: Path) -> Path:
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "the fault test needs a C compiler (gcc) to build its fsync shim"
    out = tmp / "failfsync.so"
    source = Path(__file__).with_name("failfsync.c")
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(source), "-ldl"],
                   check=True)  # fmt: skip
    return out


def _run_child(backend: Backend, path: Path, tmp: Path) -> dict[str, Any]:
    """The child, to its crash; what it printed. (Blocking: the test has
    nothing else to do meanwhile, on either driver.)"""
    flag = tmp / "fail-fsync"
    child_env = env() | {"LD_PRELOAD": str(_shim(tmp)), "FAILFSYNC_FLAG": str(flag)}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, backend.id, str(path), str(flag)],
        cwd=ROOT, env=child_env, capture_output=True, check=False, timeout=STARTUP,
    )  # fmt: skip
    lines = result.stdout.decode().strip().splitlines()
    assert lines, f"the child printed nothing: {result.stderr.decode()}"
    out: dict[str, Any] = json.loads(lines[-1])
    return out


async def test_a_commit_whose_fsync_fails_is_unknown_and_may_reappear(
    backend: Backend, tmp_path: Path
) -> None:
    path = tmp_path / "app.db"
    out = _run_child(backend, path, tmp_path)
    assert out["auto-commit"] == "CommitUnknown", out
    assert out["transaction"] == "CommitUnknown", out
    assert out["tx.commit()"] == "CommitUnknown", out
    assert out["group"] == ["CommitUnknown"] * 5, out
    # Why "unknown" and not "rolled back": after the crash, recovery replays
    # the WAL, and the commit SQLite reported as failed is there.
    async with aio.fail_after(STARTUP), backend.open(str(path)) as store:
        jobs = await store.queue("q").claim_batch("w", 10)
    payloads = sorted(j.payload for j in jobs)
    assert payloads[0] == "before"
    during = {"during", "during-tx", "during-explicit"} | {f"during-group-{i}" for i in range(5)}
    assert set(payloads[1:]) <= during, payloads
    assert len(payloads) > 1, "no commit reappeared: then 'unknown' was too cautious here"
