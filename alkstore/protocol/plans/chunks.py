"""How much one statement takes at most when a plan writes many rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

# Rows per INSERT (or per list of ids): well under SQLite's 32,766 bound
# parameters (nine a job) and a statement size Postgres parses quickly.
ENQUEUE_CHUNK = 1000


def chunks(items: Sequence[T], size: int = ENQUEUE_CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size``, in order."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
