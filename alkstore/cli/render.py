"""Terminal output: rich tables on a terminal, plain columns in a pipe.

``--json`` output never comes through here (see :mod:`alkstore.shapes`):
tables are for people, and their layout may change between releases.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import orjson
from rich import box
from rich.console import Console
from rich.table import Table

from ..protocol.values.timeconv import human_duration


def console() -> Console:
    """A console for stdout: colours and boxes on a terminal; in a pipe,
    no colour and no wrapping (a line per row, for grep and cut)."""
    out = Console(highlight=False)
    if out.is_terminal:
        return out
    return Console(
        highlight=False, no_color=True, width=max(shutil.get_terminal_size().columns, 400)
    )


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    out: Console,
    right: Iterable[str] = (),
) -> Table:
    """A table of ``rows`` under ``columns`` (those in ``right`` right-aligned)."""
    aligned = set(right)
    t = Table(
        title=title if out.is_terminal else None,
        title_justify="left",
        box=box.SIMPLE_HEAD if out.is_terminal else None,
        show_edge=False,
        pad_edge=False,
    )
    for column in columns:
        t.add_column(column, justify="right" if column in aligned else "left", no_wrap=True)
    for row in rows:
        t.add_row(*(text(v) for v in row))
    return t


def text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        return when(value)
    return str(value)


def when(at: datetime | None) -> str:
    """An instant as operators read it: UTC, to the second."""
    if at is None:
        return "-"
    return at.strftime("%Y-%m-%d %H:%M:%SZ")


# Spans as ``3d 4h``, ``12m 5s``, ``0.4s``: one formatter for the CLI and the dashboard.
duration = human_duration


def one_line(value: str | None, limit: int = 100) -> str:
    """A message's first line, cut at ``limit`` characters ("-" for none)."""
    if value is None:
        return "-"
    first, _, rest = value.strip().partition("\n")
    cut = len(first) > limit or bool(rest)
    return f"{first[:limit]}..." if cut else first


def brief_json(value: Any, limit: int = 60) -> str:
    """A payload on one line, cut at ``limit`` characters."""
    shown = orjson.dumps(value).decode()
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
