"""Rule: a statement alkstore has sent ``prepare_threshold`` times on a pooled
connection runs prepared from then on, with the same results; a connection
keeps at most ``CAPACITY`` of them (the least recently used closed first);
a prepare that fails is forgotten and reported as the statement's error;
``prepare_threshold=None`` prepares nothing. And a plan of one ``last``
statement (a single enqueue) is a transaction of its own: no BEGIN, no
COMMIT, all or nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from alkstore import DatabaseError, Store
from alkstore.io_trio import PostgresOptions, open_postgres
from alkstore.protocol.plan import Fetch, Plan, Statement, last
from alkstore.runner.postgres import prepared as prepared_module
from alkstore.runner.postgres.conn import PgConnection
from alkstore.runner.postgres.prepared import Prepared, Use
from tests.backends import PG_DSN

from .pg import table


@asynccontextmanager
async def one_connection(schema: str, threshold: int | None = 5) -> AsyncIterator[Store]:
    options = PostgresOptions(schema=schema, pool_size=1, prepare_threshold=threshold)
    async with open_postgres(PG_DSN, options=options) as store:
        yield store


def _conn(store: Store) -> PgConnection:
    (conn,) = store._core.executor._pool._pool._idle  # type: ignore[attr-defined]
    return conn  # type: ignore[no-any-return]


async def prepared_on_server(store: Store) -> list[str]:
    """The statements the store's one connection has prepared (its own view)."""
    async with store.transaction() as tx:
        rows = await tx.execute("SELECT statement FROM pg_prepared_statements ORDER BY name", [])
    return [str(sql) for (sql,) in rows]


def test_a_statement_is_prepared_once_it_was_sent_threshold_times() -> None:
    p = Prepared(3, capacity=10, can_close=True)
    key = ("SELECT $1", (20,))
    assert [p.use(key) for _ in range(2)] == [Use(), Use()]
    assert p.use(key) == Use(b"alk_1", b"alk_1")  # the third: prepare, then run
    assert p.use(key) == Use(b"alk_1")  # then by name
    assert p.use(("SELECT $1", (23,))) == Use()  # other parameter types: another statement


def test_the_least_recently_used_statement_is_closed_to_make_room() -> None:
    p = Prepared(1, capacity=2, can_close=True)
    a, b, c = (("a", None), ("b", None), ("c", None))
    assert p.use(a).prepare == b"alk_1" and p.use(b).prepare == b"alk_2"
    assert p.use(a) == Use(b"alk_1")  # a is used again: b is the oldest now
    assert p.use(c) == Use(b"alk_3", b"alk_3", close=b"alk_2")
    assert p.use(b) == Use(b"alk_4", b"alk_4", close=b"alk_1") and len(p) == 2


def test_without_close_no_more_are_prepared_once_full() -> None:
    p = Prepared(1, capacity=1, can_close=False)
    assert p.use(("a", None)).prepare == b"alk_1"
    assert p.use(("b", None)) == Use() and p.use(("a", None)) == Use(b"alk_1")


def test_a_lost_prepare_is_sent_unprepared_until_the_threshold_again() -> None:
    p = Prepared(2, capacity=5, can_close=True)
    key = ("SELECT", None)
    p.use(key)
    assert p.use(key).prepare == b"alk_1"
    p.lost(b"alk_1")
    assert len(p) == 0 and p.use(key) == Use() and p.use(key).prepare == b"alk_2"


async def test_enqueues_run_prepared_with_the_same_results(schema: str) -> None:
    async with one_connection(schema) as store:
        q = store.queue("q")
        ids = [await q.enqueue({"i": i}) for i in range(12)]
        statements = await prepared_on_server(store)
        assert any("INSERT INTO" in sql and "pg_notify" in sql for sql in statements), statements
        assert ids == sorted(ids) and len(set(ids)) == 12
        jobs = await q.claim_batch("w", 20)
        assert [j.payload for j in jobs] == [{"i": i} for i in range(12)]


async def test_prepare_threshold_none_prepares_nothing(schema: str) -> None:
    async with one_connection(schema, threshold=None) as store:
        q = store.queue("q")
        for i in range(12):
            await q.enqueue(i)
        assert await prepared_on_server(store) == []
        assert (await q.stats()).ready == 12


async def test_a_connection_keeps_at_most_capacity_prepared(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three statements used in turn on a connection that keeps two: every
    result right, never more than two prepared on the server."""
    monkeypatch.setattr(prepared_module, "CAPACITY", 2)
    async with one_connection(schema, threshold=1) as store:
        q = store.queue("q")
        for i in range(6):
            await q.enqueue(i)
            assert (await q.get_job(i + 1)) is not None
            assert (await q.stats()).ready == i + 1
            assert len(await prepared_on_server(store)) <= 2
        assert len(_conn(store)._prepared or ()) == 2  # type: ignore[arg-type]


def _one(sql: str, fetch: Fetch = Fetch.ONE) -> Plan[object]:
    return (yield last(Statement(sql, (), fetch)))


async def test_a_prepare_that_fails_is_the_statements_error_and_is_forgotten(
    schema: str,
) -> None:
    async with one_connection(schema, threshold=2) as store:
        missing = "SELECT v FROM alk_no_such_table"  # a prepare of it fails
        for _ in range(4):
            with pytest.raises(DatabaseError, match="does not exist") as info:
                await store._core.run(_one(missing))
            assert type(info.value) is DatabaseError
            conn = _conn(store)
            assert not conn.broken and not conn.in_transaction
        assert missing not in await prepared_on_server(store)
        for _ in range(3):
            assert await store._core.run(_one("SELECT 7")) == (7,)
        assert "SELECT 7" in await prepared_on_server(store)


async def test_a_plan_of_one_last_statement_is_a_transaction_of_its_own(schema: str) -> None:
    """No BEGIN or COMMIT goes out; what it wrote commits, and when it fails
    nothing of it does and the connection is clean."""
    async with one_connection(schema) as store:
        t = table(store, "t")
        async with store.transaction() as tx:
            await tx.execute(f"CREATE TABLE {t} (v int CHECK (v > 0))")
        conn = _conn(store)
        sent: list[str] = []
        send_command = conn._send_command

        def spy(sql: str) -> object:
            sent.append(sql)
            return send_command(sql)

        conn._send_command = spy  # type: ignore[method-assign,assignment]
        assert await store._core.run(_one(f"INSERT INTO {t} VALUES (1), (2) RETURNING v")) == (1,)
        with pytest.raises(DatabaseError, match="check constraint"):
            await store._core.run(_one(f"INSERT INTO {t} VALUES (3), (-1) RETURNING v"))
        assert sent == []
        assert not conn.broken and not conn.in_transaction
        async with store.transaction() as tx:
            assert await tx.execute(f"SELECT v FROM {t} ORDER BY v", []) == [(1,), (2,)]
