"""``bench/housekeeping.py`` still runs: a few seconds of steady traffic on
SQLite with a short retention, reporting table sizes that housekeeping keeps
bounded (a check that the script works, not a measurement)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_bench_housekeeping_runs_and_reports() -> None:
    args = ["--seconds", "4", "--report", "1", "--retention", "1", "--interval", "0.2"]
    proc = subprocess.run(
        [sys.executable, "bench/housekeeping.py", *args, "--rate", "100"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    reports = re.findall(r"^t=\s*\d+s .*history=(\d+) .*events=(\d+) ", proc.stdout, re.M)
    assert len(reports) >= 3, out
    # A second's worth of 100 jobs/s is kept, give or take a pass: never the run's 400.
    assert all(int(h) < 300 and int(e) < 300 for h, e in reports[1:]), out
    assert "after warm-up" in proc.stdout, out
