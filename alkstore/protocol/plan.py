"""Plans: operations as pure generators of statements.

A plan yields ``Statement`` values and receives each one's result; its return
value is the operation's result. Drivers run a whole plan inside one database
transaction (and, on SQLite, in one hop to the database thread). Plans never
read a clock or a random source: both are arguments.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")

Row = tuple[Any, ...]


class Fetch(enum.Enum):
    NONE = "none"  # result: None
    ONE = "one"  # result: Row | None
    ALL = "all"  # result: list[Row]
    ROWCOUNT = "rowcount"  # result: int, rows changed


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    params: Sequence[Any] = ()
    fetch: Fetch = Fetch.NONE
    # Channels to wake in this process once the enclosing transaction
    # commits. Set by the engine on statements that notify.
    wakes: tuple[str, ...] = field(default=())


Plan = Generator[Statement, Any, T]


def const(value: T) -> Plan[T]:
    """A plan that runs no statement (for example, a validated no-op)."""
    if False:  # pragma: no cover - the bare yield makes this a generator
        yield  # type: ignore[unreachable]
    return value


def run_sync(plan: Plan[T], execute: Callable[[Statement], Any]) -> T:
    """Drive a plan synchronously with ``execute``; used by drivers and tests."""
    try:
        statement = next(plan)
        while True:
            statement = plan.send(execute(statement))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def run_async(plan: Plan[T], execute: Callable[[Statement], Awaitable[Any]]) -> T:
    """``run_sync`` for drivers whose ``execute`` awaits (no IO happens here)."""
    try:
        statement = next(plan)
        while True:
            statement = plan.send(await execute(statement))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def noting_wakes(execute: Callable[[Statement], T], wakes: list[str]) -> Callable[[Statement], T]:
    """Wrap ``execute`` so the channels each statement notifies go to ``wakes``."""

    def run(statement: Statement) -> T:
        if statement.wakes:
            wakes.extend(statement.wakes)
        return execute(statement)

    return run
