"""Run every fuzz target in ``fuzz/`` for a bounded time, as CI does.

Each target runs in its own subprocess (atheris takes over the process and
exits on the first crash), all of them at once, for ``ALKSTORE_FUZZ_SECONDS``
(default 10) each. A target that exits non-zero fails its test; the message
carries the libFuzzer seed, the crash file and the command that replays it.
Longer runs: see fuzz/README.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
TARGETS = ["names", "codec", "options", "schedule", "rows", "api"]
SECONDS = int(os.environ.get("ALKSTORE_FUZZ_SECONDS", "10"))
# Imports and instrumentation come on top of the fuzzing time.
GRACE = 120


class Run:
    def __init__(self, target: str, workdir: Path) -> None:
        self.target = target
        self.workdir = workdir
        self.log = workdir / "fuzz.log"
        self.command = [
            sys.executable,
            str(FUZZ_DIR / f"fuzz_{target}.py"),
            f"-max_total_time={SECONDS}",
            "-rss_limit_mb=2048",
            "-timeout=30",  # one input running this long is a failure too
            f"-artifact_prefix={workdir}{os.sep}",
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.command, cwd=workdir, stdout=out, stderr=subprocess.STDOUT
            )

    def report(self, returncode: int | None) -> str:
        text = self.log.read_text(errors="replace")
        # Drop instrumentation notes and per-input progress lines.
        lines = [
            line
            for line in text.splitlines()
            if "Instrumenting" not in line and not line.startswith("#")
        ]
        # The exception and the crash input come after this marker.
        starts = [i for i, line in enumerate(lines) if "Uncaught Python exception" in line]
        shown = lines[starts[0] - 1 :][:120] if starts else lines[-60:]
        crashes = sorted(
            str(p)
            for kind in ("crash", "timeout", "oom", "leak", "slow-unit")
            for p in self.workdir.glob(f"{kind}-*")
        )
        replay = [f"{sys.executable} {FUZZ_DIR / f'fuzz_{self.target}.py'} {c}" for c in crashes]
        return "\n".join(
            [
                f"fuzz_{self.target} exited with {returncode}",
                "command: " + " ".join(self.command),
                *(line for line in lines if "Seed:" in line),
                *(f"replay: {r}" for r in replay),
                "--- output ---",
                *shown,
            ]
        )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    started = {t: Run(t, tmp_path_factory.mktemp(f"fuzz_{t}")) for t in TARGETS}
    try:
        yield started
    finally:
        for run in started.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_finds_nothing(target: str, runs: dict[str, Run]) -> None:
    run = runs[target]
    try:
        returncode: int | None = run.proc.wait(timeout=SECONDS + GRACE)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        returncode = None
    if returncode != 0:
        pytest.fail(run.report(returncode), pytrace=False)
    assert "Done" in run.log.read_text(errors="replace"), run.report(returncode)
