"""The README opens with two commands, and CI runs exactly those two.

A contributor on a fresh machine types the README's lines; CI (``.ci/run``)
must run the same lines, or CI could pass while the README's promise fails
(it did: CI installed Chromium and the README's command did not).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The lines of the README's first shell block."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None, "README.md has no ```sh block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_opens_with_a_demo_and_a_test_command() -> None:
    demo, tests = readme_commands()
    assert demo.endswith("python -m alkstore demo")
    assert tests.endswith("python -m tests")


def test_ci_runs_the_readme_commands_word_for_word() -> None:
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in readme_commands():
        assert command in ci, f".ci/run does not run the README's {command!r}"
