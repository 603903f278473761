"""Rule: the tables whose rows churn carry the autovacuum settings of
schema version 5 (docs/engines.md, "Table health"), so vacuum keeps up with
a queue instead of waiting for a fifth of the table to be dead."""

from __future__ import annotations

import time

from .pg import open_pg, sql


async def test_the_churning_tables_vacuum_early_and_without_pauses(schema: str) -> None:
    async with open_pg(schema) as store:
        await store.queue("q").enqueue("x")
    rows = sql(
        "SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (schema,),
    )
    options = {name: set(opts or ()) for name, opts in rows}
    for table in ("jobs", "claim_log", "locks", "history", "dead"):
        assert {
            "autovacuum_vacuum_scale_factor=0.01",
            "autovacuum_vacuum_cost_delay=0",
        } <= options[table], (table, options[table])
    # A table that barely churns keeps Postgres's defaults.
    assert "autovacuum_vacuum_scale_factor=0.01" not in options["streams"]


ROUNDS = 12
PER_ROUND = 600


def vacuum_once_unseen(table: str) -> None:
    """VACUUM ``table`` once no other session holds a snapshot older than
    now (up to 30 s). Tests run side by side on one database: what a
    snapshot can still see, vacuum keeps, and the pages that pins would
    count here as growth."""
    ((marker,),) = sql("SELECT pg_current_xact_id()::text")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sql(
        "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
        "AND backend_xmin IS NOT NULL AND age(backend_xmin) > age(%s::text::xid)",
        (marker,),
    )[0][0]:
        time.sleep(0.05)
    sql(f"VACUUM {table}")


async def test_dead_letters_attempts_leave_the_retried_jobs_index_pages_free(schema: str) -> None:
    """Rule: the attempts' indexes stay the size their live rows need while
    dead letters, whose rows stay until they are purged, pile up among the
    rows of retried jobs that come and go (a B-tree frees only pages that
    empty completely; schema 8 keeps the two apart)."""
    sizes: list[int] = []
    async with open_pg(schema) as store:
        q = store.queue("q")
        for _ in range(ROUNDS):
            await q.enqueue_batch(list(range(PER_ROUND)))
            jobs = await q.claim_batch("w", PER_ROUND)
            # One death in the middle of the round's ids; every other job is
            # retried once (a row each), then acked (its rows go with it).
            for i, job in enumerate(jobs):
                assert await (job.fail("dead") if i == PER_ROUND // 2 else job.retry(delay=0))
            again = await q.claim_batch("w", PER_ROUND)
            assert len(again) == PER_ROUND - 1
            assert await q.ack_batch([job.id for job in again], "w") == PER_ROUND - 1
            vacuum_once_unseen(f'"{schema}".attempts')
            ((size,),) = sql(f"SELECT pg_indexes_size('\"{schema}\".attempts')")
            sizes.append(size)
        assert len(await q.dead_letters(100)) == ROUNDS
    # Past the first rounds the indexes reuse what vacuum freed: flat, where
    # each round used to keep a page or more of every index.
    assert sizes[-1] <= sizes[3] + 16_384, sizes


async def test_a_dead_letters_attempts_move_apart_and_back_with_its_requeue(schema: str) -> None:
    """Rule: a job's attempt rows are placed among the dead letters' while it
    is one (its burial), and among the live jobs' again once it is requeued."""
    async with open_pg(schema) as store:
        q = store.queue("q")
        job_id = await q.enqueue("x")
        (job,) = await q.claim_batch("w", 1)
        assert await job.retry(delay=0, error="first")
        (job,) = await q.claim_batch("w", 1)
        assert await job.fail("second")
        placed = f'SELECT buried FROM "{schema}".attempts WHERE job_id = %s'
        assert sql(placed, (job_id,)) == [(True,), (True,)]
        assert await q.requeue_dead(job_id)
        assert sql(placed, (job_id,)) == [(False,), (False,)]
        info = await q.get_job(job_id)
        assert info is not None and len(info.attempt_history) == 2
