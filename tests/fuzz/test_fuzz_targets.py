"""Run every fuzz target in ``fuzz/`` for a bounded time, as CI does.

Each target runs in its own subprocess (atheris takes over the process and
exits on the first crash), all of them at once, for ``ALKSTORE_FUZZ_SECONDS``
(default 10) each. A target that exits non-zero fails its test; the message
carries the libFuzzer seed, the crash file and the command that replays it.
``fuzz_api.py`` starts from a seed corpus of one input per entry of its
table (its first byte picks the entry), so every entry runs on both engines
in every run, and the test checks that each did. Longer runs: see
fuzz/README.md.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _drop_test_schemas as drop_test_schemas

FUZZ_DIR = Path(__file__).resolve().parents[2] / "fuzz"
TARGETS = ["names", "codec", "options", "schedule", "rows", "api"]
SECONDS = int(os.environ.get("ALKSTORE_FUZZ_SECONDS", "10"))
# Imports and instrumentation come on top of the fuzzing time.
GRACE = 120


def _api_table() -> dict[str, Any]:
    """``METHODS``' entry names and the ``COVERS``/``NOT_FUZZED`` tables of
    fuzz_api.py, read from its source (importing it would instrument
    alkstore in this process)."""
    tree = ast.parse((FUZZ_DIR / "fuzz_api.py").read_text())
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id == "METHODS" and isinstance(node.value, ast.Dict):
                found["METHODS"] = [ast.literal_eval(k) for k in node.value.keys if k]
            elif node.target.id in ("COVERS", "NOT_FUZZED") and node.value is not None:
                found[node.target.id] = ast.literal_eval(node.value)
    return found


API = _api_table()


def _api_seeds(corpus: Path) -> None:
    """One input per fuzz_api entry: byte 0 picks it (``NAMES[data[0] % n]``
    over the sorted names), the rest are its arguments."""
    corpus.mkdir()
    for i in range(len(API["METHODS"])):
        (corpus / f"entry-{i:03d}").write_bytes(bytes([i]) + hashlib.sha256(bytes([i])).digest())


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
        if target == "api":
            _api_seeds(workdir / "corpus")
            self.command.append(str(workdir / "corpus"))
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
            # libFuzzer ends the process without running its atexit clean-up:
            # drop the Postgres schema it named for its pid here, not at the
            # next test session.
            drop_test_schemas(only_pid=run.proc.pid)


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
    text = run.log.read_text(errors="replace")
    assert "Done" in text, run.report(returncode)
    if target == "api":
        missed = [m for m in API["METHODS"] if f"fuzz_api: ran {m} on both engines" not in text]
        assert missed == [], f"fuzz_api entries that never ran on both engines: {missed}"


def _public_methods(*, with_parameters: bool) -> set[str]:
    from alkstore.api.core.wakes import WakeReceiver
    from alkstore.api.job import Job
    from alkstore.api.locks import Lock
    from alkstore.api.outbox import Outbox
    from alkstore.api.queue import Queue
    from alkstore.api.store import Store
    from alkstore.api.stream import EventReceiver, Stream
    from alkstore.api.tx import Transaction

    found = set()
    for cls in (Store, Queue, Job, Stream, EventReceiver, WakeReceiver, Lock, Outbox, Transaction):
        for name, member in inspect.getmembers(cls, callable):
            if name.startswith("_"):
                continue
            params = inspect.signature(member).parameters
            if not with_parameters or set(params) - {"self", "task_status"}:
                found.add(f"{cls.__name__}.{name}")
    return found


def test_fuzz_api_covers_every_public_method_with_parameters() -> None:
    """Every public method that takes arguments is fuzzed by an entry of
    fuzz_api.py (``COVERS``; a few without arguments are too) or listed, with
    the reason, in ``NOT_FUZZED``; every name there is a public method,
    every entry named exists, and every entry covers some method."""
    covers: dict[str, list[str]] = API["COVERS"]
    listed = set(covers) | set(API["NOT_FUZZED"])
    assert sorted(_public_methods(with_parameters=True) - listed) == []
    assert sorted(listed - _public_methods(with_parameters=False)) == []  # no stale names
    named = {entry for entries in covers.values() for entry in entries}
    assert sorted(named - set(API["METHODS"])) == []
    assert sorted(set(API["METHODS"]) - named) == []
