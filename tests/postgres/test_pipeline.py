"""Rule: the pool's connections pipeline what nobody waits for (BEGIN with the
first statement, a ``Fetch.NONE`` statement with the next one, COMMIT
included) without changing what commits: the same statements run in the same
order in one transaction, a failure anywhere rolls all of it back, the caller
gets the error of the statement that failed (never ``CommitUnknown``), and
the connection goes back to the pool clean."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from alkstore import DatabaseError
from alkstore.protocol.plan import Fetch, Plan, Statement
from alkstore.runner.postgres.conn import PgConnection

from .pg import open_pg, table


def _conns(store) -> list[PgConnection]:  # type: ignore[no-untyped-def]
    """The pool's idle connections (the tests run one operation at a time)."""
    return list(store._core.executor._pool._pool._idle)


def _roundtrips(store) -> int:  # type: ignore[no-untyped-def]
    return sum(c.roundtrips for c in _conns(store))


async def test_an_enqueue_is_two_round_trips(schema: str) -> None:
    """BEGIN rides with the INSERT, the pg_notify with the COMMIT."""
    async with open_pg(schema, pool_size=1) as store:
        q = store.queue("q")
        await q.enqueue("warm")  # the pool's connection exists now
        before = _roundtrips(store)
        await q.enqueue("x")
        assert _roundtrips(store) - before == 2
        assert (await q.stats()).ready == 2


def _plan(sqls: list[tuple[str, Fetch]]) -> Plan[list[object]]:
    out: list[object] = []
    for sql, fetch in sqls:
        out.append((yield Statement(sql, (), fetch)))
    return out


@pytest.mark.parametrize(
    "middle",
    [
        # The failing statement is deferred, then a statement that waits
        # for its result carries it (and is skipped by the server).
        [("SELECT 1/0", Fetch.NONE), ("SELECT 1", Fetch.ONE)],
        # The failing statement is deferred and goes out with the COMMIT.
        [("SELECT 1/0", Fetch.NONE)],
        # Two deferred, the second failing.
        [("SELECT 1", Fetch.NONE), ("SELECT 1/0", Fetch.NONE)],
    ],
    ids=["before-a-statement", "with-the-commit", "second-of-two"],
)
async def test_a_failing_deferred_statement_rolls_back_everything(
    schema: str, middle: list[tuple[str, Fetch]]
) -> None:
    """An INSERT, then the statements above: ``DatabaseError`` naming the
    division by zero, the INSERT is not there, and the one pooled connection
    serves the next operation (not left in an aborted transaction)."""
    async with open_pg(schema, pool_size=1) as store:
        t = table(store, "t")
        async with store.transaction() as tx:
            await tx.execute(f"CREATE TABLE {t} (v int)")
        sqls = [(f"INSERT INTO {t} VALUES (1)", Fetch.NONE), *middle]
        with pytest.raises(DatabaseError, match="division by zero") as info:
            await store._core.run(_plan(sqls))
        assert type(info.value) is DatabaseError  # not CommitUnknown
        (conn,) = _conns(store)
        assert not conn.in_transaction and not conn.broken
        async with store.transaction() as tx:
            assert await tx.execute(f"SELECT count(*) FROM {t}", []) == [(0,)]
        await store.queue("q").enqueue("after")
        assert (await store.queue("q").stats()).ready == 1


def _raises_before_any_statement() -> Iterator[Statement]:
    raise ValueError("refused before any statement")
    yield Statement("SELECT 1")  # pragma: no cover


async def test_a_plan_that_fails_before_its_first_statement_costs_no_round_trip(
    schema: str,
) -> None:
    """BEGIN never went out, so there is nothing to roll back."""
    async with open_pg(schema, pool_size=1) as store:
        await store.queue("q").enqueue("warm")
        before = _roundtrips(store)
        with pytest.raises(ValueError, match="refused"):
            await store._core.run(_raises_before_any_statement())
        assert _roundtrips(store) == before
        await store.queue("q").enqueue("after")
        assert (await store.queue("q").stats()).ready == 2
