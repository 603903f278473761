"""Rule: housekeeping's vacuum and the schema's autovacuum settings use one
threshold, and a table is due exactly when autovacuum would call it due."""

from __future__ import annotations

from alkstore.engines.postgres import PostgresDialect
from alkstore.engines.postgres.schema import CHURN_STORAGE
from alkstore.engines.postgres.vacuum import CHURN_TABLES, VACUUM_SCALE, VACUUM_THRESHOLD
from alkstore.protocol.plan import run_sync
from alkstore.protocol.plans.housekeeping import due_for_vacuum, vacuum_due


def test_the_schema_settings_are_the_vacuum_figures() -> None:
    assert f"autovacuum_vacuum_scale_factor = {VACUUM_SCALE}" in CHURN_STORAGE
    assert f"autovacuum_vacuum_threshold = {VACUUM_THRESHOLD}" in CHURN_STORAGE


def test_due_means_more_dead_rows_than_threshold_plus_scale_times_live() -> None:
    assert not due_for_vacuum(0, 1000, 1000, 0.01)
    assert due_for_vacuum(0, 1001, 1000, 0.01)
    assert not due_for_vacuum(100_000, 2000, 1000, 0.01)
    assert due_for_vacuum(100_000, 2001, 1000, 0.01)


def test_the_plan_names_the_due_tables_and_the_commands_skip_locked() -> None:
    d = PostgresDialect("alk_t_vac")
    rows = [("dead", 0, 10), ("history", 50_000, 5000), ("jobs", 10, 1200)]
    assert run_sync(vacuum_due(d), lambda statement: rows) == ["history", "jobs"]
    assert d.vacuum("jobs") == 'VACUUM (SKIP_LOCKED) "alk_t_vac"."jobs"'
    assert set(CHURN_TABLES) == {
        "jobs", "claim_log", "locks", "history", "dead", "waiting", "deps", "attempts",
    }  # fmt: skip
