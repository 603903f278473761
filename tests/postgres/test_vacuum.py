"""Rule: a housekeeping pass vacuums a churning table whose dead rows have
passed autovacuum's threshold (1000 + 1% of the live rows), whether or not
the server's autovacuum is on; with ``vacuum=False`` it leaves them
(docs/engines.md, "Table health")."""

from __future__ import annotations

import trio

from alkstore import Store
from alkstore.io_trio import PostgresOptions, open_postgres
from tests.backends import PG_DSN

from .pg import asql

CHURN = 3000  # jobs enqueued and acked: 2 dead row versions each


async def dead_rows(schema: str, table: str = "jobs") -> int:
    rows = await asql(
        "SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
        (schema, table),
    )
    return int(rows[0][0]) if rows else 0


async def churn(store: Store) -> None:
    q = store.queue("q")
    await q.enqueue_batch(list(range(CHURN)))
    while jobs := await q.claim_batch("w", 500):
        assert await q.ack_batch([j.id for j in jobs], "w") == len(jobs)


async def settled_stats(schema: str) -> int:
    # A backend reports its counts within about a second of its commits.
    with trio.fail_after(15):
        while (dead := await dead_rows(schema)) < 1000:  # noqa: ASYNC110 (server counts)
            await trio.sleep(0.2)
    return dead


async def test_a_pass_vacuums_the_jobs_table_once_it_is_due(schema: str) -> None:
    options = PostgresOptions(schema=schema, housekeeping_interval=None)
    async with open_postgres(PG_DSN, options=options) as store:
        await churn(store)
        assert await settled_stats(schema) >= 1000
        report = await store.prune()
        assert report.vacuumed >= 1, report
        assert await dead_rows(schema) < 1000
        # Nothing is due any more: the next pass vacuums nothing.
        assert (await store.prune()).vacuumed == 0


async def test_vacuum_false_leaves_the_dead_rows_to_autovacuum(schema: str) -> None:
    options = PostgresOptions(schema=schema, housekeeping_interval=None, vacuum=False)
    async with open_postgres(PG_DSN, options=options) as store:
        await churn(store)
        before = await settled_stats(schema)
        assert (await store.prune()).vacuumed == 0
        assert await dead_rows(schema) >= min(before, 1000)
