"""The ``alkstore demo`` command, run in-process and as a module, and the
inspection commands on the database it leaves."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from alkstore import demo as demo_module
from alkstore.cli import main

SUMMARY_ROWS = (
    "jobs done",
    "retries",
    "dead letters",
    "events consumed",
    "lock tokens",
    "outbox delivered",
    "elapsed",
)


def _demo(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["demo", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_demo_passes_and_prints_summary(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    code, out = _demo("--db", str(db), "--jobs", "60", "--seed", "3")
    assert code == 0, out
    assert "demo OK" in out
    assert "FAIL" not in out
    for row in SUMMARY_ROWS:
        assert row in out
    assert db.exists()  # --db is kept for inspection


def test_demo_can_reuse_its_database(tmp_path: Path) -> None:
    db = str(tmp_path / "again.db")
    for seed in ("1", "2"):
        code, out = _demo("--db", db, "--jobs", "30", "--seed", seed)
        assert code == 0, out


def test_demo_default_database_is_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    code, out = _demo("--jobs", "20")
    assert code == 0, out
    assert "a temporary database" in out
    assert list(tmp_path.iterdir()) == []  # deleted afterwards


def test_demo_exits_nonzero_when_a_check_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verify = demo_module.Demo.verify

    async def broken(self: demo_module.Demo, logs: demo_module.LogTally) -> list[demo_module.Check]:
        checks = await verify(self, logs)
        return [*checks, demo_module.Check("a deliberately failing check", False)]

    monkeypatch.setattr(demo_module.Demo, "verify", broken)
    code, out = _demo("--db", str(tmp_path / "bad.db"), "--jobs", "10")
    assert code == 1
    assert "demo FAILED" in out
    assert "a deliberately failing check" in out


def test_demo_exits_nonzero_when_it_crashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def explode(self: demo_module.Demo, producer: int, count: int) -> None:
        raise RuntimeError("producer exploded")

    monkeypatch.setattr(demo_module.Demo, "produce", explode)
    code, out = _demo("--db", str(tmp_path / "crash.db"), "--jobs", "10")
    assert code == 1
    assert "demo FAILED" in out
    assert "producer exploded" in out


def test_demo_exits_nonzero_when_it_times_out(tmp_path: Path) -> None:
    code, out = _demo("--db", str(tmp_path / "slow.db"), "--jobs", "5000", "--timeout", "0.2")
    assert code == 1
    assert "not finished within" in out


def test_the_inspection_commands_read_the_demo_database(tmp_path: Path) -> None:
    """The README's tour: run the demo on a kept file, then look inside."""
    db = str(tmp_path / "inspect.db")
    code, out = _demo("--db", db, "--jobs", "10")
    assert code == 0, out
    runner = CliRunner()
    result = runner.invoke(main, ["queues", "--db", db, "--json"])
    assert result.exit_code == 0, result.output
    queues = {q["display_name"]: q for q in orjson.loads(result.output)["queues"]}
    assert queues["demo.orders"]["dead"] >= 1  # the poison job
    result = runner.invoke(main, ["dead", "demo.orders", "--db", db])
    assert result.exit_code == 0, result.output
    assert "PoisonError" in result.output  # the poison job's last error
    result = runner.invoke(main, ["queues", "--db", str(tmp_path / "missing.db")])
    assert result.exit_code == 2


@pytest.mark.slow
def test_python_dash_m_alkstore_demo(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "alkstore", "demo", "--db", str(tmp_path / "m.db"), "--jobs", "50"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo OK" in proc.stdout
    assert proc.stderr == ""
