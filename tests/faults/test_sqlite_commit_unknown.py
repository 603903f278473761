"""A SQLite COMMIT whose fsync fails (a real I/O error, injected under the
real SQLite library with an LD_PRELOAD shim) raises ``CommitUnknown``, not
a plain ``DatabaseError``: SQLite rolls the transaction back in memory, but
its frames may already be in the WAL, and after a crash recovery finds them
committed. This test shows both: the error, then the job after the crash."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from alkstore.io_trio import open_sqlite

from .procs import ROOT, STARTUP, env

pytestmark = pytest.mark.slow

CHILD = """
import json, os, sys, trio
from alkstore import CommitUnknown
from alkstore.io_trio import SqliteOptions, open_sqlite

async def main(path, flag):
    out = {}
    options = SqliteOptions(pragmas={"synchronous": "FULL"})  # fsync at every commit
    async with open_sqlite(path, options=options) as store:
        q = store.queue("q")
        out["before"] = await q.enqueue("before")
        open(flag, "w").close()  # the disk stops syncing
        for what in ("auto-commit", "transaction"):
            try:
                if what == "auto-commit":
                    await q.enqueue("during")
                else:
                    async with store.transaction() as tx:
                        await tx.enqueue(q, "during-tx")
                out[what] = "returned"
            except CommitUnknown as exc:
                out[what] = "CommitUnknown"
            except Exception as exc:
                out[what] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out), flush=True)
        os._exit(0)  # a crash: no checkpoint, the WAL stays as it is

trio.run(main, sys.argv[1], sys.argv[2])
"""


def _shim(tmp: Path) -> Path:
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler, "the fault test needs a C compiler (gcc) to build its fsync shim"
    out = tmp / "failfsync.so"
    source = Path(__file__).with_name("failfsync.c")
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(source), "-ldl"],
                   check=True)  # fmt: skip
    return out


async def test_a_commit_whose_fsync_fails_is_unknown_and_may_reappear(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    flag = tmp_path / "fail-fsync"
    child_env = env() | {"LD_PRELOAD": str(_shim(tmp_path)), "FAILFSYNC_FLAG": str(flag)}
    result = await trio.run_process(
        [sys.executable, "-c", CHILD, str(path), str(flag)],
        cwd=ROOT, env=child_env, capture_stdout=True, check=False,
    )  # fmt: skip
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert out["auto-commit"] == "CommitUnknown", out
    assert out["transaction"] == "CommitUnknown", out
    # Why "unknown" and not "rolled back": after the crash, recovery replays
    # the WAL, and the commit SQLite reported as failed is there.
    with trio.fail_after(STARTUP):
        async with open_sqlite(str(path)) as store:
            jobs = await store.queue("q").claim_batch("w", 10)
    payloads = sorted(j.payload for j in jobs)
    assert payloads[0] == "before"
    assert set(payloads) <= {"before", "during", "during-tx"}
    assert len(payloads) > 1, "no commit reappeared: then 'unknown' was too cautious here"
