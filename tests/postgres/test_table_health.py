"""Rule: the tables whose rows churn carry the autovacuum settings of
schema version 5 (docs/engines.md, "Table health"), so vacuum keeps up with
a queue instead of waiting for a fifth of the table to be dead."""

from __future__ import annotations

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
