"""The event logs that chaos worker processes append to: one line per event,
fields separated by spaces, the event's name first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio


class Lines:
    def __init__(self, rows: list[list[str]]) -> None:
        self.rows = rows

    def of(self, kind: str) -> list[list[str]]:
        return [row for row in self.rows if row[0] == kind]


def read_log(path: str) -> Lines:
    p = Path(path)
    if not p.exists():
        return Lines([])
    text = p.read_text()
    # A line being written has no newline yet: leave it for the next read.
    complete = text[: text.rfind("\n") + 1]
    return Lines([line.split(" ") for line in complete.splitlines() if line])


async def wait_for_lines(path: str, done: Callable[[Lines], bool], timeout: float) -> Lines:
    """The log once ``done(lines)`` holds; ``trio.TooSlowError`` after ``timeout``."""
    with trio.fail_after(timeout):
        while True:
            lines = read_log(path)
            if done(lines):
                return lines
            await trio.sleep(0.05)
