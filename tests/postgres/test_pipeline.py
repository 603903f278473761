"""Rule: the pool's connections pipeline what nobody waits for (BEGIN with the
first statement, a ``Fetch.NONE`` statement with the next one, COMMIT
included, and COMMIT with a plan's ``last`` statement) without changing what
commits: the same statements run in the same order in one transaction, a
failure anywhere rolls all of it back, the caller gets the error of the
statement that failed (never ``CommitUnknown``), and the connection goes
back to the pool clean."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from alkstore import DatabaseError, Store
from alkstore.protocol.plan import Fetch, FinalStatementError, Plan, Statement, last
from alkstore.runner.postgres.conn import PgConnection

from .pg import open_pg, table


def _conns(store) -> list[PgConnection]:  # type: ignore[no-untyped-def]
    """The pool's idle connections (the tests run one operation at a time)."""
    return list(store._core.executor._pool._pool._idle)


def _roundtrips(store) -> int:  # type: ignore[no-untyped-def]
    return sum(c.roundtrips for c in _conns(store))


async def test_an_enqueue_is_one_round_trip(schema: str) -> None:
    """The INSERT carrying its pg_notify, alone (no BEGIN or COMMIT): one trip."""
    async with open_pg(schema, pool_size=1) as store:
        q = store.queue("q")
        await q.enqueue("warm")  # the pool's connection exists now
        before = _roundtrips(store)
        await q.enqueue("x")
        assert _roundtrips(store) - before == 1
        assert (await q.stats()).ready == 2


def _plan(sqls: list[tuple[str, Fetch]], final: bool = False) -> Plan[list[object]]:
    out: list[object] = []
    for index, (sql, fetch) in enumerate(sqls):
        statement = Statement(sql, (), fetch)
        out.append((yield last(statement) if final and index == len(sqls) - 1 else statement))
    return out


@pytest.mark.parametrize(
    "sqls",
    [
        # The last statement fails: the server skips the COMMIT sent with it.
        [("SELECT 1/0", Fetch.ONE)],
        # A deferred statement fails: the last one and the COMMIT are skipped.
        [("SELECT 1/0", Fetch.NONE), ("SELECT 1", Fetch.ONE)],
    ],
    ids=["the-last-fails", "one-before-it-fails"],
)
async def test_a_failure_in_the_round_trip_that_carries_the_commit_rolls_back(
    schema: str, sqls: list[tuple[str, Fetch]]
) -> None:
    """An INSERT, then statements whose last carries the COMMIT: the error
    of the statement that failed (not ``CommitUnknown``), the INSERT is not
    there, and the connection is clean for the next operation."""
    async with open_pg(schema, pool_size=1) as store:
        t = table(store, "t")
        async with store.transaction() as tx:
            await tx.execute(f"CREATE TABLE {t} (v int)")
        plan = _plan([(f"INSERT INTO {t} VALUES (1)", Fetch.NONE), *sqls], final=True)
        with pytest.raises(DatabaseError, match="division by zero") as info:
            await store._core.run(plan)
        assert type(info.value) is DatabaseError
        await _rolled_back_and_clean(store, t)


async def _rolled_back_and_clean(store: Store, t: str) -> None:
    """No row of the failed plan committed, and its connection is ready."""
    (conn,) = _conns(store)
    assert not conn.in_transaction and not conn.broken
    async with store.transaction() as tx:
        assert await tx.execute(f"SELECT count(*) FROM {t}", []) == [(0,)]


async def test_a_commit_the_server_refuses_is_an_error_and_nothing_commits(schema: str) -> None:
    """A deferred constraint checked at COMMIT, sent with the last statement:
    ``DatabaseError`` (rolled back, not ``CommitUnknown``), no row."""
    async with open_pg(schema, pool_size=1) as store:
        t = table(store, "t")
        async with store.transaction() as tx:
            await tx.execute(
                f"CREATE TABLE {t} (v int UNIQUE DEFERRABLE INITIALLY DEFERRED)"
            )
        plan = _plan(
            [(f"INSERT INTO {t} VALUES (1)", Fetch.NONE),
             (f"INSERT INTO {t} VALUES (1) RETURNING v", Fetch.ONE)],
            final=True,
        )  # fmt: skip
        with pytest.raises(DatabaseError, match="duplicate key") as info:
            await store._core.run(plan)
        assert type(info.value) is DatabaseError
        await _rolled_back_and_clean(store, t)


def _yields_after_its_last() -> Plan[None]:
    yield last(Statement("SELECT 1", (), Fetch.ONE))
    yield Statement("SELECT 2", (), Fetch.ONE)


async def test_a_plan_that_yields_after_its_last_statement_fails(schema: str) -> None:
    """A bug in a plan is reported as one, not run as if nothing happened."""
    async with open_pg(schema, pool_size=1) as store:
        with pytest.raises(FinalStatementError):
            await store._core.run(_yields_after_its_last())


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
