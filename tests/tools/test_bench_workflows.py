"""``bench/workflows.py`` still runs: every shape once, tiny, on both engines
and both drivers, its sums checked by the script itself; a check that it
reports a ratio for each, not a measurement. Celery is left out here (it
needs bench/.peers and Redis); `.ci/run` runs it beside them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("driver", ["trio", "asyncio"])
def test_the_workflow_bench_runs_every_shape(driver: str, tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    proc = subprocess.run(
        [sys.executable, "bench/workflows.py", "--jobs", "60", "--rounds", "1", "--no-celery",
         "--driver", driver, "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's alkstore
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figures = json.loads(out.read_text())
    for engine in ("sqlite", "postgres"):
        for kind in ("chord", "split"):
            for how in ("process", "total"):
                assert figures[engine][f"ratio_{kind}_{how}"] > 0
    assert figures["celery"] == "not asked for (--no-celery)"
