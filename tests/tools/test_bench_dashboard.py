"""``bench/dashboard_pages.py`` still runs: a small queue on both engines,
every row printed (a check that the script works, not a measurement)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_bench_dashboard_pages_runs_and_reports() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/dashboard_pages.py", "--jobs", "3000", "--samples", "1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    rows = re.findall(r"^  (?:page|live|read): .*?\s(\d+\.\d)\s+(\d+\.\d)$", proc.stdout, re.M)
    assert len(rows) == 2 * 11, out  # every row, on each engine
    assert "sqlite: 3,000 ready jobs" in proc.stdout and "postgres: 3,000" in proc.stdout
