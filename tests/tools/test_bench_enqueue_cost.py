"""``bench/sqlite_enqueue_cost.py`` still runs: every row measured, tiny (a
check that the script works, not a measurement)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "alkstore (await queue.enqueue)", "alkstore's SQL on its schema", "without AUTOINCREMENT",
    "without the listing index", "without both", "floor (one partial index)",
    "the core's Python alone (no IO)",
)  # fmt: skip


def test_bench_sqlite_enqueue_cost_runs_every_row() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/sqlite_enqueue_cost.py", "--jobs", "200", "--rounds", "1"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for row in ROWS:
        (line,) = [x for x in lines if x.strip().startswith(row)]
        us, rate, ratio = line.split()[-3:]
        assert float(us) > 0 and int(rate.replace(",", "")) > 0 and float(ratio) > 0, line
    floor = next(x for x in lines if x.startswith("floor"))
    assert floor.split()[-1] == "1.00"
    # The budget line: twice the floor's time, less SQLite's own (its
    # figures are timings of a tiny run, so only their arithmetic is checked).
    (budget,) = [x for x in lines if x.startswith("0.5x the floor's rate allows")]
    allowed, sql, left, _spent = _numbers(budget)
    assert abs(allowed - sql - left) < 0.11, budget


def _numbers(line: str) -> list[float]:
    """The line's figures in microseconds (each followed by a space or a
    closing bracket; the leading "0.5x" is not one)."""
    return [float(x) for x in re.findall(r"(-?\d+\.\d+)(?=[ )])", line)]
