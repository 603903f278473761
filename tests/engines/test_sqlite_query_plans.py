"""The claim path stays proportional to live work (SQLite query plans).

Checked on the plans SQLite chooses, not on timings: the claim walks the
partial claim index in order (no sort, no table scan), the queries that
wake and sweep use their own indexes, and so do the inspection's listings.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alkstore.engines.sqlite import SqliteDialect, migrate
from alkstore.protocol.dialect import CLAIM_COLUMNS, LIVE_FILTERS
from alkstore.protocol.plan import Statement, run_sync
from alkstore.protocol.values.generation import CLAIM_GENERATION
from alkstore.protocol.values.types import NewJob
from alkstore.runner.sqlite import conn as sqlite_conn

D = SqliteDialect()


def plan_of(conn: sqlite3.Connection, statement: Statement) -> str:
    rows = conn.execute("EXPLAIN QUERY PLAN " + statement.sql, statement.params).fetchall()
    return "\n".join(str(r[-1]) for r in rows)


def fresh(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite_conn.connect(str(tmp_path / "q.db"), busy_timeout=1, pragmas={})
    run_sync(migrate(), lambda s: sqlite_conn.execute(conn, s))
    # Some history so the planner has statistics to be tempted by.
    for i in range(200):
        job = NewJob("q", "{}", i % 3, i, 3, None)
        sqlite_conn.execute(conn, D.enqueue(job, 0))
    conn.execute("ANALYZE")
    return conn


def test_claim_walks_the_claim_index_without_sorting(tmp_path: Path) -> None:
    conn = fresh(tmp_path)
    text = plan_of(conn, D.claim("q", "w", 10, 1_000, 2_000, 1))
    assert "__alkstore_jobs_claim" in text
    assert "TEMP B-TREE" not in text.upper()
    assert "SCAN __alkstore_jobs\n" not in text + "\n"


def test_next_due_and_sweep_use_their_indexes(tmp_path: Path) -> None:
    conn = fresh(tmp_path)
    # The next due time and the oldest ready job: a skip-scan of the claim
    # index, priority by priority, each the first entry of its priority in
    # visible_at order: seeks only, no scan of the table and no sort.
    for text in (plan_of(conn, D.next_due("q")), plan_of(conn, D.oldest_ready("q", 1_000))):
        assert "USING INDEX __alkstore_jobs_claim (queue=? AND priority<?)" in text, text
        assert "USING INDEX __alkstore_jobs_claim (queue=? AND priority=?" in text, text
        assert "TEMP B-TREE" not in text.upper() and "SCAN __alkstore_jobs" not in text, text
    # No due index is left to write (schema 7 dropped it: one page fewer a write).
    assert not conn.execute(
        "SELECT name FROM sqlite_master WHERE name = '__alkstore_jobs_due'"
    ).fetchall()
    sweep = plan_of(conn, D.sweep_candidates("q", 1_000, 100))
    assert "__alkstore_jobs_expiry" in sweep and "__alkstore_jobs_exhausted" in sweep


def test_settling_a_job_is_a_primary_key_lookup(tmp_path: Path) -> None:
    conn = fresh(tmp_path)
    for statement in (D.ack(1, "w", 1, 0), D.extend_claim(1, "w", 1, 0, 5), D.owned(1, "w", 1, 0)):
        assert "INTEGER PRIMARY KEY" in plan_of(conn, statement)


def test_the_cancel_check_is_a_primary_key_lookup_per_held_job(tmp_path: Path) -> None:
    """Every id a worker holds, in one statement: a rowid probe in each of
    the live, dead and history tables, no scan and no sort."""
    conn = fresh(tmp_path)
    text = plan_of(conn, D.cancelled_among("q", [1, 2, 500]))
    for table in ("jobs", "dead", "history"):
        assert f"SEARCH __alkstore_{table} USING INTEGER PRIMARY KEY (rowid=?)" in text, text
        assert f"SCAN __alkstore_{table}" not in text, text
    assert "TEMP B-TREE" not in text.upper(), text


def test_a_page_of_jobs_walks_its_list_index_in_id_order(tmp_path: Path) -> None:
    """A page costs its size, however many jobs the queue holds: one range
    of the list index per table, from ``after``, no sort."""
    conn = fresh(tmp_path)
    for which in LIVE_FILTERS:
        text = plan_of(conn, D.job_page("q", which, 50, 100, 1_000))
        assert "USING INDEX __alkstore_jobs_list (queue=? AND state=? AND id>?)" in text, text
        assert "TEMP B-TREE" not in text.upper()
    text = plan_of(conn, D.dead_page("q", 50, 100))
    assert "USING INDEX __alkstore_dead_list (queue=? AND id>?)" in text, text
    text = plan_of(conn, D.history_page("q", "acked", 50, 100))
    assert "USING INDEX __alkstore_history_list (queue=? AND outcome=? AND id>?)" in text, text
    assert "TEMP B-TREE" not in text.upper()


def test_a_page_of_events_walks_the_primary_key_backwards(tmp_path: Path) -> None:
    conn = fresh(tmp_path)
    text = plan_of(conn, D.events_before("s", 50, 100))
    assert "USING PRIMARY KEY (stream=? AND offset<?)" in text, text
    assert "TEMP B-TREE" not in text.upper()


def test_throughput_counts_a_range_of_the_time_indexes(tmp_path: Path) -> None:
    """Only the window's index entries are read, and nothing else: the
    (queue, time) indexes hold every column the counts need."""
    conn = fresh(tmp_path)
    text = plan_of(conn, D.finished_per_bucket("q", 0, 60_000_000, 1_000_000))
    assert (
        "USING COVERING INDEX __alkstore_history_queue (queue=? AND finished_at>? AND "
        "finished_at<?)" in text
    ), text
    # Deaths are the attempt rows that are not retries: the partial index
    # holds only those.
    text = plan_of(conn, D.dead_per_bucket("q", 0, 60_000_000, 1_000_000))
    assert (
        "USING COVERING INDEX __alkstore_attempts_deaths (queue=? AND finished_at>? AND "
        "finished_at<?)" in text
    ), text
    text = plan_of(conn, D.job_attempts(1))
    assert "USING INDEX __alkstore_attempts_by_job (buried=? AND job_id=?)" in text, text


def test_names_are_found_by_stepping_through_the_indexes(tmp_path: Path) -> None:
    """Queue and stream names come one index seek each (a skip-scan), never
    from reading the jobs, dead letters, history or events whole."""
    conn = fresh(tmp_path)
    text = plan_of(conn, D.queue_names())
    for table, index in (("jobs", "jobs_list"), ("dead", "dead_list"), ("history", "history")):
        assert f"SEARCH __alkstore_{table} USING COVERING INDEX __alkstore_{index}" in text, text
        assert f"SCAN __alkstore_{table}\n" not in text + "\n"
    text = plan_of(conn, D.stream_names())
    for table in ("events", "offsets"):
        assert f"SEARCH __alkstore_{table} USING PRIMARY KEY (stream>?)" in text, text
    summary = plan_of(conn, D.queue_summary("q", 1_000))
    assert "SCAN __alkstore_jobs\n" not in summary + "\n"
    assert "__alkstore_jobs_list (queue=?)" in summary


def test_housekeeping_deletes_walk_their_indexes(tmp_path: Path) -> None:
    """Each prune batch finds its rows on an index, oldest first, without a
    sort or a scan of the table (a pass stays cheap however large the tables)."""
    conn = fresh(tmp_path)
    for statement, index in (
        (D.prune_history(1_000, 100), "__alkstore_history_prune"),
        (D.prune_dead(1_000, 100), "__alkstore_dead_prune"),
        (D.prune_notifications(1_000, 100), "INTEGER PRIMARY KEY"),
        (D.prune_locks(1_000, 100), "__alkstore_locks_expiry"),
        (D.stale_lock(1_000), "__alkstore_locks_expiry"),
    ):
        text = plan_of(conn, statement)
        assert index in text, text
        assert "TEMP B-TREE" not in text.upper(), text
    # A stream's events: the primary key, from the oldest.
    for statement in (D.prune_events("s", 10, 100), D.first_young_event("s", 1_000)):
        text = plan_of(conn, statement)
        assert "PRIMARY KEY" in text and "TEMP B-TREE" not in text.upper(), text


def test_a_claim_from_a_queue_that_keeps_history_acks_into_history(tmp_path: Path) -> None:
    """The claim's rows carry the queue's history retention, and the moves
    select their rows by primary key."""
    conn = fresh(tmp_path)
    sqlite_conn.execute(conn, D.set_retention("q", 5_000_000, None, None))
    rows = sqlite_conn.execute(conn, D.claim("q", "w", 2, 1_000, 2_000, CLAIM_GENERATION))
    history_us = CLAIM_COLUMNS.index("history_us")
    assert [r[history_us] for r in rows] == [5_000_000, 5_000_000]
    first, delete = D.ack_history(1, "w", 1, 0, 5)
    assert "INTEGER PRIMARY KEY" in plan_of(conn, first)
    assert "INTEGER PRIMARY KEY" in plan_of(conn, delete)


def test_a_watcher_finds_new_jobs_with_two_index_probes(tmp_path: Path) -> None:
    """What a look costs for the queue wakes an enqueue writes no row for:
    the newest id from the primary key, and per waited queue one range of
    the list index above the last id seen, however many jobs there are."""
    conn = fresh(tmp_path)
    newest = plan_of(conn, D.last_job_id())
    assert "SEARCH __alkstore_jobs" in newest and "SCAN" not in newest, newest  # max(rowid)
    probe = plan_of(conn, D.pending_job_after("q", 150))
    index = "USING COVERING INDEX __alkstore_jobs_list (queue=? AND state=? AND id>?)"
    assert index in probe, probe
