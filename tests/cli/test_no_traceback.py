"""Every command, through its failure modes, fails in a line or two and an
exit code, never with a raw traceback.

Each command of ``alkstore --help`` (subcommands included, found by walking
the click group, so a new command is swept too) is run in-process against:
a missing SQLite file, a file that is not a database, a directory, an
unreachable Postgres server, and an option it does not have. Invariant: it
exits non-zero through ``SystemExit``, prints no ``Traceback`` (nor the
read-only URI alkstore makes of a path) and creates no missing file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from alkstore.cli import main

# What each command needs to get past its own usage checks to the database.
ARGUMENTS: dict[str, tuple[str, ...]] = {
    "dead requeue": ("--all",),
    "dead purge": ("--all", "--yes"),
    "cancel": ("--yes",),
    "worker": ("sweep_handlers:handle", "--queue", "jobs"),
}
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/test"


def commands(group: click.Group = main, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name)


def arguments(path: tuple[str, ...]) -> list[str]:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    given = list(ARGUMENTS.get(" ".join(path), ()))
    for param in command.params:
        if isinstance(param, click.Argument) and param.required and " ".join(path) != "worker":
            given.insert(0, "1" if isinstance(param.type, click.types.IntParamType) else "emails")
    return given


COMMANDS = [c for c in commands() if c != ("demo",)]  # the demo makes a database of its own


def test_the_sweep_sees_every_command() -> None:
    swept = {" ".join(c) for c in COMMANDS}
    assert {"queues", "jobs", "dead purge", "worker", "dashboard", "migrate", "watch"} <= swept
    assert len(swept) >= 19


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "sweep_handlers.py").write_text("async def handle(job):\n    pass\n")
    (tmp_path / "garbage.db").write_text("not a database\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ALKSTORE_DSN", raising=False)
    return tmp_path


MODES = {
    "missing-file": lambda d: ["--db", str(d / "nope.db")],
    "not-a-database": lambda d: ["--db", str(d / "garbage.db")],
    "a-directory": lambda d: ["--db", str(d)],
    "unreachable-server": lambda d: ["--dsn", UNREACHABLE],
    "unknown-option": lambda d: ["--db", str(d / "garbage.db"), "--no-such-option"],
}


# ``migrate`` creates a missing file: that is what it is for.
CREATES = (("migrate",), "missing-file")
CASES = [(c, m) for c in COMMANDS for m in sorted(MODES) if (c, m) != CREATES]


@pytest.mark.parametrize(("path", "mode"), CASES, ids=[f"{' '.join(c)}-{m}" for c, m in CASES])
def test_no_command_prints_a_traceback(project: Path, path: tuple[str, ...], mode: str) -> None:
    args = [*path, *arguments(path), *MODES[mode](project)]
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    shown = result.output + (result.stderr if result.stderr_bytes else "")
    assert isinstance(result.exception, SystemExit), (args, result.exception, shown)
    assert result.exit_code != 0, (args, shown)
    assert "Traceback" not in shown, (args, shown)
    assert "mode=ro" not in shown, (args, shown)  # the user's path, not alkstore's URI
    assert not (project / "nope.db").exists(), f"{args}: created the missing file"
