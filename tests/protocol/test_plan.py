"""protocol/plan.py: plans read results through typed helpers.

Invariant: no plan in alkstore assigns the value of a bare ``yield`` (which
mypy sees as ``Any``); each reads through ``fetch_one``/``fetch_row``/
``fetch_all``/``fetch_count``, which check the statement's fetch kind.
Plans live in the core, the engines (migrations), the runners and the
facades; ``alkstore/testing``'s actor programs yield operations, not
statements, and are not plans.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from alkstore.protocol.plan import (
    Fetch,
    Statement,
    fetch_all,
    fetch_count,
    fetch_one,
    fetch_row,
    run_sync,
    shape,
)
from alkstore.protocol.values.errors import DatabaseError

ROOT = Path(__file__).resolve().parents[2] / "alkstore"
# The helpers themselves are where a bare yield is read.
HELPERS = {ROOT / "protocol" / "plan.py"}


def _bare_yield_reads(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    lines = []
    for node in ast.walk(tree):
        value = getattr(node, "value", None)
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(value, ast.Yield):
            lines.append(node.lineno)
    return lines


def test_no_plan_reads_a_bare_yield() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for layer in ("protocol", "engines", "runner", "api")
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path not in HELPERS and (lines := _bare_yield_reads(path))
    }
    assert found == {}, f"read results with the typed fetch helpers: {found}"


def _answer(value: object):  # type: ignore[no-untyped-def]
    return lambda statement: value


def test_each_helper_returns_what_its_fetch_kind_gives() -> None:
    one = Statement("SELECT 1", (), Fetch.ONE)
    assert run_sync(fetch_one(one), _answer((1,))) == (1,)
    assert run_sync(fetch_one(one), _answer(None)) is None
    assert run_sync(fetch_row(one), _answer((2,))) == (2,)
    assert run_sync(fetch_all(Statement("SELECT 1", (), Fetch.ALL)), _answer([(1,)])) == [(1,)]
    assert run_sync(fetch_count(Statement("DELETE", (), Fetch.ROWCOUNT)), _answer(3)) == 3


def test_a_row_that_must_come_back_and_does_not_is_a_database_error() -> None:
    with pytest.raises(DatabaseError, match="no row came back"):
        run_sync(fetch_row(Statement("INSERT INTO t", (), Fetch.ONE)), _answer(None))


@pytest.mark.parametrize(
    ("helper", "fetch"),
    [
        (fetch_one, Fetch.ALL),
        (fetch_row, Fetch.ROWCOUNT),
        (fetch_all, Fetch.ONE),
        (fetch_count, Fetch.NONE),
    ],
)
def test_a_statement_read_as_another_kind_is_refused(helper, fetch) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="read as"):
        run_sync(helper(Statement("SELECT 1", (), fetch)), _answer(None))


def test_shape_gives_each_fetch_kind_its_result() -> None:
    rows = [(1,), (2,)]
    assert shape(Fetch.NONE, rows, 2) is None
    assert shape(Fetch.ROWCOUNT, rows, 2) == 2
    assert shape(Fetch.ONE, rows, 2) == (1,)
    assert shape(Fetch.ONE, [], 0) is None
    assert shape(Fetch.ALL, rows, 2) == rows
