"""docs/integrations.md quotes the example apps; it cannot drift from them.

Every fenced block on the page is an excerpt: marked ``<!-- excerpt: PATH -->`` on
the line before it, and found in PATH as a run of whole lines (indentation aside).
None is a ``python`` block (those are run as programs; an excerpt is not one), and
every link on the page reaches a file, and a heading where it names one.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "integrations.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
MARK = re.compile(r"<!-- excerpt: ([\w./-]+) -->\n$")


def _blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, the file it quotes or None) for each fenced block."""
    text = PAGE.read_text()
    found = []
    for match in FENCE.finditer(text):
        mark = MARK.search(text, 0, match.start())
        quoted = mark.group(1) if mark and mark.end() == match.start() else None
        found.append((match.group(1), match.group(2), quoted))
    return found


BLOCKS = _blocks()


def _quotes(path: Path, excerpt: str) -> bool:
    """``excerpt``'s lines are a run of ``path``'s lines, once both are dedented."""
    want = excerpt.splitlines()
    lines = path.read_text().splitlines()
    for start in range(len(lines) - len(want) + 1):
        window = "\n".join(lines[start : start + len(want)])
        if textwrap.dedent(window).splitlines() == want:
            return True
    return False


def test_the_page_has_excerpts_of_each_example() -> None:
    quoted = {Path(path).parts[1] for _, _, path in BLOCKS if path is not None}
    assert {"fastapi_app", "trio_app"} <= quoted


@pytest.mark.parametrize(("language", "code", "path"), BLOCKS, ids=[str(b[2]) for b in BLOCKS])
def test_each_block_is_an_excerpt_found_verbatim_in_its_file(
    language: str, code: str, path: str | None
) -> None:
    assert path is not None, f"a block with no <!-- excerpt: PATH --> above it:\n{code}"
    assert language != "python", f"{path}: an excerpt is not a program: fence it as text"
    assert (ROOT / path).is_file(), path
    assert _quotes(ROOT / path, code.rstrip("\n")), f"not found in {path}:\n{code}"


def _slug(heading: str) -> str:
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_links_reach_a_file_and_heading() -> None:
    links = re.findall(r"\]\(([\w./-]+?)(?:#([\w-]+))?\)", PAGE.read_text())
    assert links
    for target, anchor in links:
        path = (PAGE.parent / target).resolve()
        assert path.exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{target}#{anchor}"
