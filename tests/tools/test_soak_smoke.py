"""The soak still runs: ``bench/soak.py --smoke`` on both engines, a few
seconds each, with every job finished once (or dead after its attempts),
samples taken and a verdict computed; a check that it runs, not a
measurement (the real run is minutes long: docs/benchmarks.md, "Soak")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_bench_soak_smoke() -> None:
    proc = subprocess.run(
        [sys.executable, "bench/soak.py", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert {line["engine"] for line in lines} == {"sqlite", "postgres"}, out
    for line in lines:
        # 3,000 jobs, one in 1,000 dead after its attempts (0, 1000, 2000).
        assert line["finished"] == 2997, out
        assert line["samples"] >= 3, out
