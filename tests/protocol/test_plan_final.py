"""Rule: a plan yields nothing after a statement marked ``last``; every
driver fails a plan that does (``FinalStatementError``), before running it."""

from __future__ import annotations

import sqlite3

import pytest

from alkstore.protocol.plan import Fetch, FinalStatementError, Plan, Statement, last, run_sync
from alkstore.runner.sqlite import conn as sqlite_conn


def _after_last() -> Plan[None]:
    yield last(Statement("SELECT 1", (), Fetch.ONE))
    yield Statement("SELECT 2", (), Fetch.ONE)


def _ends_at_last() -> Plan[int]:
    yield Statement("SELECT 1", (), Fetch.ONE)
    row = yield last(Statement("SELECT 2", (), Fetch.ONE))
    return int(row[0])


def test_last_marks_a_copy() -> None:
    statement = Statement("SELECT 1", (7,), Fetch.ONE, ("ch",))
    marked = last(statement)
    assert marked.final and not statement.final
    same = ("SELECT 1", (7,), Fetch.ONE, ("ch",))
    assert (marked.sql, marked.params, marked.fetch, marked.wakes) == same


def test_run_sync_refuses_a_statement_after_the_last() -> None:
    ran: list[str] = []

    def execute(statement: Statement) -> object:
        ran.append(statement.sql)
        return (1,)

    with pytest.raises(FinalStatementError, match="SELECT 2"):
        run_sync(_after_last(), execute)
    assert ran == ["SELECT 1"]
    assert run_sync(_ends_at_last(), lambda s: (2,)) == 2


def test_the_sqlite_driver_refuses_a_statement_after_the_last() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    with pytest.raises(FinalStatementError):
        sqlite_conn.drive(conn, _after_last(), [])
    assert sqlite_conn.drive(conn, _ends_at_last(), []) == 2
