"""The fenced code blocks of README.md and docs/*.md, and the rules that say
how the suite runs them (tests/docs/test_examples.py, test_commands.py).

The rules, for anyone writing a page:

- Every ```` ```python ```` block is a complete program, run as a script
  (``__main__``) in a fresh temporary directory, and must finish without
  raising; its own ``assert``s are the checks. A block that is not a
  program (a signature listing, an excerpt) is fenced ```` ```text ````.
- ``<!-- continues -->`` on the line before a python block makes it the
  next part of the program begun by the page's previous python block: the
  parts run together, once, as one script.
- A python block whose first line is ``# test_NAME.py`` is that test file
  of the reader's: it is run by ``pytest`` in a subprocess, in a directory
  holding the page's other such files and its config blocks (a block of
  any language whose first line is ``# pyproject.toml``, ``# pytest.ini``
  or ``# conftest.py``), with nothing else of this repository's config.
- A program that opens Postgres (``open_postgres``, ``psycopg``,
  ``PostgresSimBackend``, ``ALKSTORE_DSN``) runs with ``$ALKSTORE_DSN``
  naming a database of this test session's own (created empty, emptied
  after each program, dropped at the end), so it may create tables and
  use alkstore's default schema: write the DSN as a user would,
  ``open_postgres()`` (which reads ``$ALKSTORE_DSN``) or
  ``os.environ.get("ALKSTORE_DSN", "postgresql://...")``.
- ``<!-- example: NAME -->`` on the line before a block only names it (the
  test id); every block runs whether named or not.
- ``sh``/``console``/``shell``/``bash`` blocks: every ``alkstore ...``
  command line in them must parse against the real command line (options,
  arguments, their types). ``alkstore ...`` in inline code and in ``text``
  blocks (synopses, with placeholders) must name real commands and options.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGS = frozenset({"sh", "console", "shell", "bash"})
# Info strings that would highlight as Python but escape the collector.
PYTHON_ALIASES = frozenset({"py", "python3", "py3", "pycon", "ipython", "python-repl"})

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<info>[^`\s]*)[^`]*$")
NAME_MARK = re.compile(r"<!-- example: ([\w.-]+) -->")
CONTINUES_MARK = "<!-- continues -->"
FILE_LINE = re.compile(r"^# ((?:test_\w+|conftest)\.py|pyproject\.toml|pytest\.ini)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # "README.md", "docs/queues.md"
    line: int  # the opening fence's line, 1-based
    lang: str  # the info string's first word ("" if none)
    code: str  # the body, dedented by the fence's indentation
    name: str | None  # <!-- example: NAME -->
    continues: bool  # <!-- continues -->

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def file_name(self) -> str | None:
        """The file the block is, when its first line names one."""
        first = self.code.split("\n", 1)[0]
        match = FILE_LINE.match(first)
        return match.group(1) if match else None


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, in order (indented ones included)."""
    lines = path.read_text().split("\n")
    page = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        end = i + 1
        while end < len(lines):
            closing = lines[end].strip()
            if closing.startswith(fence) and set(closing) == {fence[0]}:
                break
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page}:{i + 1}: a fence that is never closed")
        body = "\n".join(ln[indent:] if ln[:indent].isspace() else ln for ln in lines[i + 1 : end])
        marks = []
        j = i - 1
        while j >= 0 and lines[j].strip().startswith("<!--"):
            marks.append(lines[j].strip())
            j -= 1
        named = [m.group(1) for m in map(NAME_MARK.fullmatch, marks) if m]
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=opening["info"].lower(),
                code=textwrap.dedent(body).strip("\n") + "\n",
                name=named[0] if named else None,
                continues=CONTINUES_MARK in marks,
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for path in pages() for b in blocks(path)]


@dataclass(frozen=True)
class Program:
    """One script: a python block and the blocks that continue it."""

    parts: tuple[Block, ...]

    @property
    def id(self) -> str:
        first = self.parts[0]
        base = first.page.removeprefix("docs/")
        return f"{base}:{first.name}" if first.name else f"{base}:{first.line}"

    @property
    def code(self) -> str:
        return "\n".join(b.code for b in self.parts)

    @property
    def uses_postgres(self) -> bool:
        return re.search(r"open_postgres|PG_DSN|PostgresSimBackend|psycopg", self.code) is not None


def programs(found: list[Block]) -> list[Program]:
    """The python blocks that are scripts, continuations joined."""
    out: list[list[Block]] = []
    last_page = None
    for block in found:
        if block.lang != "python" or block.file_name is not None:
            continue
        if block.continues:
            if not out or last_page != block.page:
                raise AssertionError(f"{block.where}: continues, but nothing on the page before")
            out[-1].append(block)
        else:
            out.append([block])
        last_page = block.page
    return [Program(tuple(parts)) for parts in out]


def file_blocks(found: list[Block]) -> dict[str, list[Block]]:
    """Per page, its blocks that are files of a pytest run (tests and config)."""
    out: dict[str, list[Block]] = {}
    for block in found:
        if block.file_name is not None:
            if block.continues:
                raise AssertionError(f"{block.where}: a file block cannot continue a program")
            out.setdefault(block.page, []).append(block)
    return out
