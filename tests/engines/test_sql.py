"""Statements written with named parameters (``alkstore/engines/sql.py``).

A statement's ``Sql`` is rendered once per engine into numbered
placeholders and a binder that takes the values by name; these tests check
the rendering, the binding, and that both dialects bind every statement
they hold (none is left unused, none binds a name it lacks).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from alkstore.engines.postgres import PostgresDialect
from alkstore.engines.postgres.spelling import SPELLING as PG
from alkstore.engines.sql import SCHEMA, Rendered, Sql, Variants, render_statements
from alkstore.engines.sqlite import SqliteDialect
from alkstore.engines.sqlite.spelling import SPELLING as LITE
from alkstore.protocol.dialect import LIVE_FILTERS, Dialect
from alkstore.protocol.plan import Fetch, Statement

from .test_postgres_dialect import SAMPLE_CALLS, T0, US, new_job


def test_parameters_are_numbered_by_first_use_and_bound_by_name() -> None:
    sql = Sql(
        f"SELECT :b::bigint, x::text FROM {SCHEMA}.t "
        "WHERE a = :a AND b > :b AND c = ':a' AND \"d:a\" = :c",
        Fetch.ALL,
    )
    pg = sql.render(PG, '"s"')
    assert pg.sql == (
        'SELECT $1::bigint, x::text FROM "s".t WHERE a = $2 AND b > $1 AND c = \':a\' '
        'AND "d:a" = $3'
    )
    assert pg.names == ("b", "a", "c")
    statement = pg.bind(c=3, a=1, b=2)
    assert statement == Statement(pg.sql, (2, 1, 3), Fetch.ALL)
    lite = Sql("SELECT :b, :a, :b").render(LITE)
    assert lite.sql == "SELECT ?1, ?2, ?1"
    assert lite.bind(a="x", b="y").params == ("y", "x")
    for wrong in ({"a": 1}, {"a": 1, "b": 2, "c": 3, "d": 4}):
        with pytest.raises(TypeError):
            pg.bind(**wrong)
    with pytest.raises(TypeError):
        pg.bind(1, 2, 3)  # by name only


def test_a_statement_written_in_an_engines_placeholders_or_a_reserved_name_is_refused() -> None:
    for text in ("SELECT ?", "SELECT $1", "SELECT :in", "SELECT :wakes", f"SELECT {SCHEMA}.t"):
        with pytest.raises(ValueError):
            Sql(text).render(LITE)


def test_variants_take_every_name_and_bind_what_each_uses() -> None:
    both = Variants({False: Sql("SELECT :a"), True: Sql("SELECT :a, :b", Fetch.ONE)})
    rendered = both.render(PG)
    assert rendered[False].bind(a=1, b=2) == Statement("SELECT $1", (1,))
    assert rendered[True].bind(a=1, b=2) == Statement("SELECT $1, $2", (1, 2), Fetch.ONE)
    edited = both.replace("SELECT", "VALUES").render(LITE)
    assert [r.sql for r in edited.values()] == ["VALUES ?1", "VALUES ?1, ?2"]


def test_a_statement_without_parameters_is_built_once_and_wakes_are_passed_on() -> None:
    rendered = Sql("SELECT 1", Fetch.ONE).render(LITE)
    assert rendered.bind() is rendered.bind()
    assert rendered.bind(wakes=("c",)) == Statement("SELECT 1", (), Fetch.ONE, ("c",))
    assert Sql("SELECT :a").render(LITE).bind(a=1, wakes=("c",)).wakes == ("c",)


class _Base:
    _one = Sql("SELECT :a")
    _two = Variants({1: Sql("SELECT :b")})


class _Edited(_Base):
    _one = _Base._one.replace("SELECT", "VALUES")


def test_a_class_renders_its_statements_and_its_subclass_its_edits() -> None:
    assert isinstance(_Base._one, Sql)  # on the class: the statement as written
    with pytest.raises(AttributeError, match="never rendered"):
        _ = _Base()._one
    assert render_statements(_Edited, LITE).keys() == {"_one", "_two"}
    one = render_statements(_Edited, LITE)["_one"]
    assert isinstance(one, Rendered) and one.sql == "VALUES ?1"


# SQLite's wakes are rows its watchers read back (protocol.dialect.NotificationLog).
NOTIFICATION_LOG_CALLS = {
    "notifications_since": (0, 10), "last_notification_id": (), "prune_notifications": (T0, 10),
    "last_job_id": (), "pending_job_after": ("q", 0),
}  # fmt: skip


def sample_calls(dialect: Dialect) -> list[tuple[str, tuple[Any, ...]]]:
    """A call of every method of ``dialect``'s protocols, and of every
    variant of one."""
    calls = list(SAMPLE_CALLS.items())
    if isinstance(dialect, SqliteDialect):
        calls += NOTIFICATION_LOG_CALLS.items()
    if isinstance(dialect, PostgresDialect):
        calls += [("churn_stats", ())]
    tagged = new_job()._replace(headers='{"k":"v"}')
    calls += [("enqueue", (tagged, T0)), ("enqueue_many", ([new_job(), tagged], T0))]
    calls += [("enqueue", (job._replace(concurrency_key="k"), T0)) for job in (new_job(), tagged)]
    calls += [("enqueue_many", ([new_job(), job._replace(concurrency_key="k")], T0))
              for job in (new_job(), tagged)]  # fmt: skip
    calls += [("enqueue_waking", (job, "chan", "origin", T0))
              for job in (tagged, new_job()._replace(concurrency_key="k"),
                          tagged._replace(concurrency_key="k"))]  # fmt: skip
    calls += [("sweep_candidates", (None, T0, 10)), ("purge_dead", ("q", None))]
    calls += [("job_page", ("q", which, 0, 10, T0)) for which in LIVE_FILTERS]
    calls += [(f, (None, 1)) for f in ("get_job", "get_dead", "get_history")]
    calls += [("lock_guard", (False,)), ("place_attempts", (1, False))]
    calls += [("get_waiting", (None, 1)), ("ack_kept", ("w", [(1, None, None, None)], T0, "q"))]
    calls += [
        ("claim_limited", ("q", "w", T0, T0 + US, concurrency, key_rate, 1))
        for concurrency in (None, 2)
        for key_rate in (None, (3, T0 - US))
    ]
    return calls


@pytest.mark.parametrize("dialect", [SqliteDialect(), PostgresDialect("alk_t_sql")])
def test_every_statement_a_dialect_holds_is_bound_by_its_methods(dialect: Dialect) -> None:
    """Each statement sits above the method that binds it: calling every
    method (every variant) binds every statement, each with all its names."""
    sent: set[str] = set()
    for name, args in sample_calls(dialect):
        result = getattr(dialect, name)(*args)
        if result is None:  # (``notify_new_jobs`` on SQLite: no statement)
            continue
        for statement in result if isinstance(result, tuple) else (result,):
            sent.add(statement.sql)
            numbers = {int(n) for n in re.findall(r"[?$](\d+)", statement.sql)}
            assert numbers == set(range(1, len(numbers) + 1)), statement.sql
    held: set[str] = set()
    for value in vars(dialect).values():
        if isinstance(value, Rendered):
            held.add(value.sql)
        elif isinstance(value, dict):
            held.update(r.sql for r in value.values() if isinstance(r, Rendered))
    assert len(held) > 90
    assert held <= sent, held - sent
