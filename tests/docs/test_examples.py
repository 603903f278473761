"""Code examples in README.md and docs/ run as written.

Each example marked ``<!-- example: NAME -->`` on the line before its
fenced ``python`` block is executed as a script, in a temporary directory,
and must finish without raising (its own asserts included).
"""

from __future__ import annotations

import os
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"<!-- example: ([\w.-]+) -->\n```python\n(.*?)\n```", re.S)


def _examples() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in MARK.finditer(path.read_text()):
            found.append((f"{path.name}:{match.group(1)}", match.group(2)))
    return found


EXAMPLES = _examples()


def test_examples_are_found() -> None:
    assert EXAMPLES, "no marked examples: the collector's pattern no longer matches the docs"


@pytest.mark.parametrize(("name", "code"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_example_runs(name: str, code: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(code + "\n")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        os.chdir(cwd)
