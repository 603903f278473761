"""Open until closed: the one check every entry point makes first.

Stores, executors, transaction sessions and handles each hold a
``Lifecycle``; asking it is how an operation on something closed fails with
``Closed`` (and closes the plan it was handed, so the generator does not
linger), everywhere with the same words.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from ..values.errors import Closed


class Lifecycle:
    __slots__ = ("closed", "what")

    def __init__(self, what: str) -> None:
        self.what = what  # "store", "transaction", ...
        self.closed = False

    @property
    def open(self) -> bool:
        return not self.closed

    def check(self, plan: Generator[Any, Any, Any] | None = None) -> None:
        """Raise ``Closed`` once closed, closing ``plan`` first."""
        if self.closed:
            if plan is not None:
                plan.close()
            raise Closed(f"{self.what} is closed")

    def close(self) -> bool:
        """Close; whether it was open until now."""
        was_open = not self.closed
        self.closed = True
        return was_open


__all__ = ["Lifecycle"]
