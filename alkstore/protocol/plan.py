"""Plans: operations as pure generators of statements.

A plan yields ``Statement`` values and receives each one's result; its return
value is the operation's result. Drivers run a whole plan inside one database
transaction (and, on SQLite, in one hop to the database thread). Plans never
read a clock or a random source: both are arguments.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeGuard, TypeVar, cast

from .values.errors import DatabaseError

T = TypeVar("T")
P = ParamSpec("P")

Row = tuple[Any, ...]


class Fetch(enum.Enum):
    NONE = "none"  # result: None
    ONE = "one"  # result: Row | None
    ALL = "all"  # result: list[Row]
    ROWCOUNT = "rowcount"  # result: int, rows changed
    # result: int, the id of the one row an INSERT added. An engine either
    # returns it as the statement's one row (``RETURNING id``) or knows it
    # without a row (SQLite's last inserted rowid: a RETURNING clause cost
    # a single enqueue about 5 us of its SQL).
    INSERTED_ID = "inserted_id"

    @property
    def reads_rows(self) -> bool:
        """Whether the result is made of the statement's rows."""
        return self is Fetch.ONE or self is Fetch.ALL or self is Fetch.INSERTED_ID


def shape(
    fetch: Fetch, rows: Sequence[Row], rowcount: int, inserted_id: int | None = None
) -> Any:
    """A statement's result as its plan receives it, on every engine: the
    driver passes the rows it read (any, when ``fetch.reads_rows`` is false),
    the count of rows changed and, where the engine knows it, the id of the
    row an INSERT added."""
    if fetch is Fetch.NONE:
        return None
    if fetch is Fetch.ROWCOUNT:
        return rowcount
    if fetch is Fetch.ONE:
        return rows[0] if rows else None
    if fetch is Fetch.INSERTED_ID:
        if rows:
            return int(rows[0][0])
        if inserted_id is None or rowcount != 1:
            raise DatabaseError("an INSERT reported no inserted row")
        return inserted_id
    return list(rows)


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    params: Sequence[Any] = ()
    fetch: Fetch = Fetch.NONE
    # Channels to wake in this process once the enclosing transaction
    # commits. Set by the engine on statements that notify.
    wakes: tuple[str, ...] = field(default=())
    # Set by ``last``: the plan yields nothing after this statement.
    final: bool = False


def last(statement: Statement, *waking: str) -> Statement:
    """``statement`` marked as its plan's last: the plan returns once it has
    the result, yielding nothing more. A driver that runs the plan in a
    transaction of its own may then send the ``COMMIT`` with the statement
    (Postgres: one round trip for both); a plan that yields after it is a
    bug, and drivers fail it (``FinalStatementError``). ``waking``: as
    ``waking`` adds."""
    wakes = (*statement.wakes, *waking) if waking else statement.wakes
    return Statement(statement.sql, statement.params, statement.fetch, wakes, True)


def waking(statement: Statement, *channels: str) -> Statement:
    """``statement``, also waking ``channels`` in this process once its
    transaction commits (an engine whose other processes learn of the
    change from the rows themselves needs no wake statement of its own)."""
    if not channels:
        return statement
    return Statement(statement.sql, statement.params, statement.fetch,
                     (*statement.wakes, *channels), statement.final)  # fmt: skip


class FinalStatementError(RuntimeError):
    """A plan yielded a statement after its ``last`` one: a bug in the plan."""

    def __init__(self, after: Statement) -> None:
        super().__init__(f"a plan yielded a statement after its last one: {after.sql[:60]} ...")


Plan = Generator[Statement, Any, T]


# -- typed reads ------------------------------------------------------------------
# A bare ``yield statement`` evaluates to ``Any``, so a plan unpacking it is
# never type-checked. Plans read results through these instead (the way
# psycopg types its ``PQGen`` generators): ``row = yield from fetch_one(st)``
# is a ``Row | None`` to mypy, and a statement whose fetch kind does not match
# the read fails at once rather than handing the plan the wrong shape.
def fetch_one(statement: Statement) -> Plan[Row | None]:
    """The statement's first row (``Fetch.ONE``), or None."""
    _expect(statement, Fetch.ONE)
    row = yield statement
    return cast("Row | None", row)


def fetch_row(statement: Statement) -> Plan[Row]:
    """The one row a statement always returns (``Fetch.ONE``: an aggregate, an
    ``INSERT ... RETURNING``); none at all is a ``DatabaseError``."""
    row = yield from fetch_one(statement)
    if row is None:
        raise DatabaseError(f"no row came back from: {statement.sql.split()[0]} ...")
    return row


def fetch_inserted_id(statement: Statement) -> Plan[int]:
    """The id of the row an INSERT added (``Fetch.INSERTED_ID``)."""
    _expect(statement, Fetch.INSERTED_ID)
    new_id = yield statement
    return cast(int, new_id)


def fetch_all(statement: Statement) -> Plan[list[Row]]:
    """Every row of the statement (``Fetch.ALL``)."""
    _expect(statement, Fetch.ALL)
    rows = yield statement
    return cast("list[Row]", rows)


def fetch_count(statement: Statement) -> Plan[int]:
    """How many rows the statement changed (``Fetch.ROWCOUNT``)."""
    _expect(statement, Fetch.ROWCOUNT)
    count = yield statement
    return cast(int, count)


def _expect(statement: Statement, fetch: Fetch) -> None:
    if statement.fetch is not fetch:
        raise TypeError(f"a {statement.fetch.value} statement read as {fetch.value}")


class ReadPlan(Generator[Statement, Any, T]):
    """A plan that only reads, marked so by the core.

    Engines may run it apart from writers (SQLite: on a reader connection in
    a deferred transaction, never in the writer's group, so it never waits
    for the write lock), and may run it again from the start on a fresh
    connection after a connection failure, since it changes nothing.
    """

    __slots__ = ("_make", "_plan")

    def __init__(self, make: Callable[[], Plan[T]]) -> None:
        self._make = make
        self._plan = make()

    def again(self) -> ReadPlan[T]:
        """The same read, from the start."""
        return ReadPlan(self._make)

    def send(self, value: Any) -> Statement:
        return self._plan.send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Statement:
        return self._plan.throw(typ, val, tb)

    def close(self) -> None:
        self._plan.close()


def reads(fn: Callable[P, Plan[T]]) -> Callable[P, ReadPlan[T]]:
    """Mark a plan function as read-only (see ``ReadPlan``)."""

    @functools.wraps(fn)
    def plan(*args: P.args, **kwargs: P.kwargs) -> ReadPlan[T]:
        return ReadPlan(lambda: fn(*args, **kwargs))

    return plan


def is_read_only(plan: Plan[T]) -> TypeGuard[ReadPlan[T]]:
    # A type test, not isinstance: ReadPlan is a Generator, an ABC, whose
    # isinstance costs about 0.7 us, and this runs on every operation.
    return type(plan) is ReadPlan


def run_sync(plan: Plan[T], execute: Callable[[Statement], Any]) -> T:
    """Drive a plan synchronously with ``execute``; used by drivers and tests.
    A statement after a ``last`` one fails the plan (``FinalStatementError``)."""
    try:
        statement = next(plan)
        while True:
            final = statement.final
            statement = plan.send(execute(statement))
            if final:
                plan.close()
                raise FinalStatementError(statement)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def run_async(plan: Plan[T], execute: Callable[[Statement], Awaitable[Any]]) -> T:
    """``run_sync`` for drivers whose ``execute`` awaits (no IO happens here)."""
    try:
        statement = next(plan)
        while True:
            final = statement.final
            statement = plan.send(await execute(statement))
            if final:
                plan.close()
                raise FinalStatementError(statement)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def noting_wakes(execute: Callable[[Statement], T], wakes: list[str]) -> Callable[[Statement], T]:
    """Wrap ``execute`` so the channels each statement notifies go to ``wakes``."""

    def run(statement: Statement) -> T:
        if statement.wakes:
            wakes.extend(statement.wakes)
        return execute(statement)

    return run
