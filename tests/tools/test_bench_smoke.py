"""The benchmark suite still runs: ``bench/suite.py --smoke`` for alkstore and the floor.

Every workload once, tiny (50 jobs; memory 300, idle 0.5 s), on SQLite and
PostgreSQL, both drivers; a check that each prints a valid result line, not a
measurement. The peers (bench/.peers) are not needed here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "enqueue-single",
    "enqueue-concurrent",
    "enqueue-batch",
    "process",
    "process x4",
    "process x8",
    "process-batch",
    "process-batch x4",
    "process-sleep",
    "latency",
    "idle",
    "memory",
)
# What the floor (plain sqlite3/psycopg) offers; it says "skipped" for the rest.
FLOOR_ROWS = {"enqueue-single", "enqueue-batch", "process", "process-batch"}


def test_bench_suite_smoke() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/suite.py", "--smoke", "--systems", "alkstore,floor"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["smoke"] == "passed", out
    got = {(c["engine"], c["system"], c["row"]): c for c in summary["cells"]}
    expected = {
        (engine, system, row)
        for engine in ("sqlite", "postgres")
        for system in ("alkstore trio", "alkstore asyncio", "floor")
        for row in ROWS
    }
    assert set(got) == expected, out
    for (_, system, row), cell in got.items():
        if system.startswith("alkstore") or row in FLOOR_ROWS:
            assert cell["status"] == "ok", cell
        else:
            assert cell["status"] == "skipped", cell
