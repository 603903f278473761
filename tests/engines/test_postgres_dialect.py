"""The Postgres engine module against a real server, driven synchronously.

The engine only builds statements; these tests run them the way the driver
will: one plan per transaction, each statement sent with ``Wire.send``
(libpq's extended protocol, psycopg's dumpers) and its result read back with
``Wire.result``. Every test works in a schema of its own, dropped afterwards.
An unreachable server fails the tests; it never skips them.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import random
import re
import select
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from psycopg import pq

from alkstore.engines.postgres import (
    SCHEMA_VERSION,
    PostgresDialect,
    channel_identifier,
    check_schema,
    control,
    migrate,
    migration_lock_key,
    quote_ident,
)
from alkstore.engines.sqlite import SqliteDialect
from alkstore.protocol.dialect import LIVE_FILTERS, Dialect
from alkstore.protocol.plan import Fetch, Plan, Statement, run_sync
from alkstore.protocol.plans import claim as C
from alkstore.protocol.plans import housekeeping as HK
from alkstore.protocol.plans import locks as L
from alkstore.protocol.plans import queues as Q
from alkstore.protocol.plans import schedule as SCH
from alkstore.protocol.plans import streams as S
from alkstore.protocol.values import codec
from alkstore.protocol.values import schedules as SCHV
from alkstore.protocol.values.backoff import Backoff
from alkstore.protocol.values.errors import DatabaseError, InvalidArgument, InvalidName
from alkstore.protocol.values.outcomes import Outcome
from alkstore.protocol.values.types import JobRecord, NewJob, NewSchedule
from alkstore.runner.postgres.wire import Wire
from alkstore.runner.sqlite import conn as sqlite_conn
from tests.history import history_rows

T = TypeVar("T")

DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
US = 1_000_000
T0 = 1_700_000_000_000_000
ORIGIN = "test-origin"
BACKOFF = Backoff()


class Pg:
    """One libpq connection in blocking mode, running statements like the driver."""

    def __init__(self) -> None:
        self.pg = pq.PGconn.connect(DSN.encode())
        if self.pg.status != pq.ConnStatus.OK:
            message = self.pg.error_message.decode("utf-8", "replace")
            self.pg.finish()
            raise AssertionError(f"PostgreSQL is unreachable at {DSN}: {message}")
        self.wire = Wire(self.pg)
        self.sent: list[Statement] = []

    def execute(self, statement: Statement) -> Any:
        self.sent.append(statement)
        self.wire.send(statement)
        return self.wire.result(self.collect(), statement.fetch)

    def collect(self) -> pq.abc.PGresult:
        """Every result of the statement sent; the first one is its answer.

        Waits on the socket instead of in a blocking ``get_result``: psycopg's
        binary ``pq`` keeps the GIL inside a blocking libpq call, which would
        freeze every other thread of a test while one waits for a lock.
        """
        results = []
        while True:
            while self.pg.is_busy():
                select.select([self.pg.socket], [], [], 1.0)
                self.pg.consume_input()
            res = self.pg.get_result()
            if res is None:
                break
            results.append(res)
        assert results
        return results[0]

    def sql(self, text: str, *params: Any, fetch: Fetch = Fetch.ALL) -> Any:
        return self.execute(Statement(text, params, fetch))

    def run(self, plan: Plan[T]) -> T:
        """One plan, one transaction."""
        self.sql(control.BEGIN, fetch=Fetch.NONE)
        try:
            value = run_sync(plan, self.execute)
        except BaseException:
            self.sql(control.ROLLBACK, fetch=Fetch.NONE)
            raise
        self.sql(control.COMMIT, fetch=Fetch.NONE)
        return value

    def close(self) -> None:
        self.pg.finish()


def new_schema() -> str:
    # Same shape as tests/backends.py, so the session clean-up recognises it.
    return f"alk_t_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def drop_schema(name: str) -> None:
    c = Pg()
    try:
        c.sql(f"DROP SCHEMA IF EXISTS {quote_ident(name)} CASCADE", fetch=Fetch.NONE)
    finally:
        c.close()


@pytest.fixture
def schema() -> Iterator[str]:
    name = new_schema()
    yield name
    drop_schema(name)


@pytest.fixture
def pg(schema: str) -> Iterator[Pg]:
    c = Pg()
    assert c.run(migrate(schema)) == SCHEMA_VERSION
    yield c
    c.close()


@pytest.fixture
def d(schema: str) -> PostgresDialect:
    return PostgresDialect(schema)


def new_job(
    queue: str = "q",
    payload: Any = None,
    *,
    priority: int = 0,
    run_at: int = T0,
    max_attempts: int = 3,
    expires: int | None = None,
) -> NewJob:
    return NewJob(queue, codec.encode(payload), priority, run_at, max_attempts, expires)


# -- schema and migrations ---------------------------------------------------


def test_migrate_creates_the_schema_and_is_idempotent(schema: str) -> None:
    c = Pg()
    try:
        assert c.run(migrate(schema)) == SCHEMA_VERSION
        tables = c.sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 "
            "ORDER BY table_name",
            schema,
        )
        assert [t for (t,) in tables] == [
            "attempts", "claim_log", "dead", "deps", "events", "history", "jobs", "locks", "meta",
            "offsets", "queues", "schedules", "streams", "waiting", "workflow_steps",
            "workflows",
        ]  # fmt: skip
        indexes = dict(
            c.sql("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = $1", schema)
        )
        assert (
            "(queue, priority DESC, visible_at, id) WHERE (attempts < max_attempts)"
            in (indexes["jobs_claim"])
        )
        assert "WHERE (attempts < max_attempts)" in indexes["jobs_due"]
        assert "WHERE (expires_at IS NOT NULL)" in indexes["jobs_expiry"]
        assert "WHERE (attempts >= max_attempts)" in indexes["jobs_exhausted"]
        (options,) = c.sql(
            "SELECT reloptions FROM pg_class WHERE oid = $1::regclass",
            f"{quote_ident(schema)}.jobs",
            fetch=Fetch.ONE,
        )
        assert "fillfactor=70" in options
        (version,) = c.sql(
            f"SELECT value FROM {quote_ident(schema)}.meta WHERE key = 'schema_version'",
            fetch=Fetch.ONE,
        )
        assert version == str(SCHEMA_VERSION)

        # Again: same answer, and an up-to-date schema runs no DDL at all.
        c.sent.clear()
        assert c.run(migrate(schema)) == SCHEMA_VERSION
        assert c.run(migrate(schema)) == SCHEMA_VERSION
        texts = [s.sql for s in c.sent]
        assert not [t for t in texts if re.search(r"\b(CREATE|ALTER|DROP)\b", t)]
        # The advisory lock is the first statement inside the transaction.
        assert texts[1] == f"SELECT pg_advisory_xact_lock({migration_lock_key(schema)})"
    finally:
        c.close()


def test_migrate_refuses_a_newer_schema(pg: Pg, schema: str) -> None:
    pg.run(
        iter_statements(
            Statement(
                f"UPDATE {quote_ident(schema)}.meta SET value = '99' WHERE key = 'schema_version'"
            )
        )
    )
    with pytest.raises(DatabaseError, match="newer"):
        pg.run(migrate(schema))
    # The failed plan rolled back; the connection is usable.
    assert pg.sql("SELECT 1", fetch=Fetch.ONE) == (1,)


def iter_statements(*statements: Statement) -> Plan[list[Any]]:
    out = []
    for statement in statements:
        out.append((yield statement))
    return out


def test_migration_lock_key_is_stable_and_per_schema() -> None:
    assert migration_lock_key("alkstore") == migration_lock_key("alkstore")
    assert migration_lock_key("alkstore") != migration_lock_key("alkstore2")
    assert -(2**63) <= migration_lock_key("alkstore") < 2**63


def test_concurrent_migrations_are_serialised_by_the_advisory_lock(schema: str) -> None:
    key = migration_lock_key(schema)
    holder, watcher = Pg(), Pg()
    results: list[int] = []
    errors: list[BaseException] = []

    def migrate_in_thread() -> None:
        c = Pg()
        try:
            results.append(c.run(migrate(schema)))
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.close()

    try:
        # Hold the migration lock; both migrations must queue behind it.
        holder.sql(control.BEGIN, fetch=Fetch.NONE)
        holder.sql(f"SELECT pg_advisory_xact_lock({key})", fetch=Fetch.NONE)
        threads = [threading.Thread(target=migrate_in_thread) for _ in range(2)]
        for t in threads:
            t.start()
        waiting = 0
        deadline = time.monotonic() + 10
        while waiting < 2 and time.monotonic() < deadline:
            (waiting,) = watcher.sql(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                (key >> 32) & 0xFFFFFFFF,
                key & 0xFFFFFFFF,
                fetch=Fetch.ONE,
            )
            time.sleep(0.01)
        assert waiting == 2
        assert all(t.is_alive() for t in threads)
        assert not results
        # Nothing was created while they waited: the lock is their first step.
        assert watcher.sql(
            "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema, fetch=Fetch.ONE
        ) == (0,)
        holder.sql(control.COMMIT, fetch=Fetch.NONE)
        for t in threads:
            t.join(10)
        assert not errors
        assert results == [SCHEMA_VERSION, SCHEMA_VERSION]
    finally:
        holder.close()
        watcher.close()


def test_many_processes_migrating_a_fresh_schema_at_once_all_succeed() -> None:
    for _ in range(3):
        name = new_schema()
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def go(
            name: str = name,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            c = Pg()
            try:
                barrier.wait()
                c.run(migrate(name))
            except BaseException as exc:
                errors.append(exc)
            finally:
                c.close()

        threads = [threading.Thread(target=go) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not errors
        finally:
            drop_schema(name)


@pytest.mark.parametrize(
    "bad",
    ["", "Alkstore", "a-b", 'a"b', "a b", "1abc", "x" * 64, "pg_things", "abc\n", "é", None, 3],
)
def test_schema_names_are_validated(bad: Any) -> None:
    with pytest.raises(InvalidArgument):
        check_schema(bad)
    with pytest.raises(InvalidArgument):
        PostgresDialect(bad)
    with pytest.raises(InvalidArgument):
        next(migrate(bad))


def test_schema_names_that_pass() -> None:
    for good in ["alkstore", "_x", "a" * 63, "app_2"]:
        assert check_schema(good) == good
        assert PostgresDialect(good).jobs == f'"{good}"."jobs"'


# -- the dialect's shape -----------------------------------------------------


def test_every_protocol_method_is_implemented_with_the_same_parameters() -> None:
    members = [
        n for n, v in vars(Dialect).items() if inspect.isfunction(v) and not n.startswith("_")
    ]
    assert len(members) > 30
    for name in members:
        ours = inspect.signature(getattr(PostgresDialect, name))
        theirs = inspect.signature(getattr(Dialect, name))
        assert list(ours.parameters) == list(theirs.parameters), name
    assert PostgresDialect.name == "postgres"
    assert PostgresDialect.notify_payload_limit == 8000


SAMPLE_CALLS: dict[str, tuple[Any, ...]] = {
    "notify": ("chan", ORIGIN, T0),
    "notify_new_jobs": ("chan", ORIGIN, T0),
    "enqueue_waking": (new_job(expires=T0 + US), "chan", ORIGIN, T0),
    "enqueue": (new_job(expires=T0 + US), T0),
    "enqueue_many": ([new_job(expires=T0 + US), new_job()], T0),
    "enqueue_unique": (new_job(expires=T0 + US), "k", T0),
    "unique_holder": ("q", "k"),
    "take_unique_key": ("q", "k", 7),
    "unique_acked": ("q", "k", T0),
    "set_unique_processing": ("q", False),
    "claim_prelude": (),
    "claim": ("q", "w", 3, T0, T0 + US, 1),
    "claim_at_once": ("q", "w", 3, T0, T0 + US, 1),
    "ack": (1, "w", 1, T0),
    "ack_history": (1, "w", 1, T0, T0 + US),
    "ack_batch": ("q", [1, 2], "w", T0),
    "ack_batch_history": ("q", [1, 2], "w", T0, T0 + US),
    "ack_claims": ("w", [(1, 1), (2, 1)], T0),
    "ack_claims_history": ("w", [(1, 1), (2, 1)], T0, T0 + US),
    "owned": (1, "w", 1, T0),
    "next_due": ("q",),
    "release_claim": (1, "w", 1, T0, 1),
    "reschedule": (1, T0, "boom"),
    "extend_claim": (1, "w", 1, T0, T0 + US),
    "bury": (1, "failed", "boom", T0),
    "cancel_target": ("q", 1),
    "cancel": ("q", 1),
    "cancel_history": ("q", 1, T0, T0 + US),
    "get_job": ("q", 1),
    "get_dead": ("q", 1),
    "get_history": ("q", 1),
    "cancelled_among": ("q", [1, 2]),
    "sweep_candidates": ("q", T0, 10),
    "queue_counts": ("q", T0),
    "oldest_ready": ("q", T0),
    "claim_limit": ("q",),
    "claim_limited": ("q", "w", T0, T0 + US, 2, (3, T0 - US), 1),
    "claim_generation": (),
    "set_concurrency_keys": ([(1, "a"), (2, "b")],),
    "set_limits": ("q", 2, (5, US), None),
    "queue_limits": ("q",),
    "claims_in_window": ("q", T0),
    "window_opens": ("q", T0, 1),
    "first_key_claim": ("q", T0),
    "log_queue_claim": ("q", T0),
    "log_key_claim": (1, T0),
    "prune_claim_log": ("q", T0),
    "set_paused": ("q", True),
    "queue_paused": ("q",),
    "set_retention": ("q", US, None, None),
    "queue_retention": ("q",),
    "dead_count": ("q",),
    "dead_letters": ("q", 10),
    "requeue_dead": ("q", 1, T0),
    "purge_dead": ("q", T0),
    "purge_dead_ids": ("q", [1, 2]),
    "queue_names": (),
    "queue_summary": ("q", T0),
    "job_page": ("q", "ready", 0, 10, T0),
    "dead_page": ("q", 0, 10),
    "history_page": ("q", "acked", 0, 10),
    "finished_per_bucket": ("q", T0, T0 + 60 * US, US),
    "dead_per_bucket": ("q", T0, T0 + 60 * US, US),
    "prune_history": (T0, 10),
    "prune_dead": (T0, 10),
    "next_offset": ("s",),
    "head_offset": ("s",),
    "insert_event": ("s", 1, "k", "{}", T0),
    "read_since": ("s", 0, 10),
    "events_before": ("s", 10, 10),
    "save_offset": ("s", "c", 3),
    "get_offset": ("s", "c"),
    "trim": ("s", 3),
    "stream_names": (),
    "stream_summary": ("s",),
    "stream_consumers": ("s",),
    "set_stream_retention": ("s", US, 10),
    "protect_consumer": ("s", "c"),
    "unprotect_consumer": ("s", "c"),
    "retained_streams": ("", 10),
    "first_young_event": ("s", T0),
    "prune_events": ("s", 3, 10),
    "upsert_schedule": (NewSchedule("n", "q", "@every 1s", "{}", "{}", T0, T0),),
    "delete_schedule": ("n",),
    "due_schedules": (T0, 10),
    "advance_schedule": ("n", T0, T0 + US, T0),
    "next_schedule_time": (),
    "list_schedules": (),
    "schedule_state": ("n",),
    "pause_schedule": ("n",),
    "resume_schedule": ("n", T0, T0 + US),
    "lock_guard": (True,),
    "acquire_lock": ("l", "o", T0, T0 + US),
    "renew_lock": ("l", "o", 1, T0, T0 + US),
    "release_lock": ("l", "o", 1, T0),
    "list_locks": (T0,),
    "stale_lock": (T0,),
    "prune_locks": (T0, 10),
    "token_floor": (),
    "set_token_floor": (7,),
    "allocate_job_ids": (3,),
    "enqueue_waiting": ([new_job(), new_job()], [11, 12], 2, 0, T0),
    "keep_jobs": ([1, 2],),
    "hold_waiting": ([1, 2],),
    "dependency_states": ([1, 2],),
    "add_dependencies": ([(1, 2, False), (1, 3, True)],),
    "count_finished": ([1, 2],),
    "waiting_policies": ([1, 2],),
    "decrement_waiting": ([1, 2], 1),
    "release_waiting": ([1, 2], T0),
    "cancel_waiting": ([1, 2], "why", T0),
    "get_waiting": ("q", 1),
    "waiting_count": ("q",),
    "waiting_page": ("q", 0, 10),
    "ack_kept": ("w", [(1, 2, '"r"', None), (3, 4, None, '{}')], T0),
    "cancel_kept": ("q", 1, "why", T0),
    "job_outcome": (1,),
    "job_id_high": (),
    "dependency_results": (1,),
    "dependencies": (1,),
    "dependents": (1,),
    "forget_dependencies": ([1, 2],),
    "create_workflow": ("wf", T0),
    "add_workflow_steps": (1, [("a", 1, 0), ("b", 2, 1)]),
    "workflow": (1,),
    "workflow_steps": (1,),
    "workflow_edges": (1,),
    "workflow_open_steps": (1,),
    "uncounted_dependents": ([1, 2],),
    "workflow_of": (1,),
    "workflow_page": (10, 5),
    "stale_workflows": (T0, 10),
    "forget_workflows": ([1, 2],),
    "record_attempt": (1, "retried", T0, "ValueError: x", "Traceback ...", T0 + 1),
    "job_attempts": (1,),
    "forget_attempts": ([1, 2],),
    "place_attempts": (1, True),
}


def test_statements_match_sqlite_fetch_kinds_and_bind_every_parameter() -> None:
    members = {
        n for n, v in vars(Dialect).items() if inspect.isfunction(v) and not n.startswith("_")
    }
    assert members == set(SAMPLE_CALLS)
    ours, theirs = PostgresDialect(), SqliteDialect()
    for name, args in SAMPLE_CALLS.items():
        mine, other = getattr(ours, name)(*args), getattr(theirs, name)(*args)
        mine = mine if isinstance(mine, tuple) else (mine,)
        other = other if isinstance(other, tuple) else (other,)
        if name == "notify_new_jobs":
            # Postgres NOTIFYs as for any wake; SQLite's watchers read new
            # jobs from the jobs table, so it has no statement to run.
            assert other == (None,) and mine == (ours.notify(*args),)
            continue
        if name == "claim_at_once":
            # SQLite claims step by step (a statement costs it no round trip).
            assert other == (None,) and mine[0].fetch is Fetch.ALL
            other = (theirs.claim(*args),)
        if name == "enqueue_waking":
            # Both wake the channel here; Postgres's carries its pg_notify.
            assert mine[0].wakes == other[0].wakes == ("chan",)
            assert "pg_notify" in mine[0].sql and "notif" not in other[0].sql
        if name == "allocate_job_ids":
            # SQLite moves its sequence on, then reads the ids; Postgres
            # reads them from its identity: the last statement's rows.
            assert mine[-1].fetch is other[-1].fetch is Fetch.ALL
            continue
        if name in ("claim_prelude", "lock_guard"):
            # Engine-specific settings and locks, whose results nobody reads.
            assert all(st.fetch is Fetch.NONE for st in (*mine, *other))
            continue
        # The first statement's result is what the plans read.
        assert mine[0].fetch is other[0].fetch, name
        for statement in mine:
            assert "?" not in statement.sql, name
            used = {int(n) for n in re.findall(r"\$(\d+)", statement.sql)}
            assert used == set(range(1, len(statement.params) + 1)), name
    # The enqueues of jobs with headers are statements of their own.
    tagged = new_job()._replace(headers='{"k":"v"}')
    for name, args in (("enqueue", (tagged, T0)), ("enqueue_many", ([new_job(), tagged], T0)),
                       ("enqueue_waking", (tagged, "chan", ORIGIN, T0))):  # fmt: skip
        mine, other = getattr(ours, name)(*args), getattr(theirs, name)(*args)
        assert "headers" in mine.sql and "headers" in other.sql
        assert mine.fetch is other.fetch
        used = {int(n) for n in re.findall(r"\$(\d+)", mine.sql)}
        assert used == set(range(1, len(mine.params) + 1)), name
    variants = [ours.sweep_candidates(None, T0, 10), ours.sweep_candidates("q", T0, 10)]
    variants += [ours.job_page("q", which, 0, 10, T0) for which in LIVE_FILTERS]
    variants += [getattr(ours, f)(None, 1) for f in ("get_job", "get_dead", "get_history")]
    variants += [
        ours.claim_limited("q", "w", T0, T0 + US, concurrency, key_rate, 1)
        for concurrency in (None, 2)
        for key_rate in (None, (3, T0 - US))
    ]
    for statement in variants:
        used = {int(n) for n in re.findall(r"\$(\d+)", statement.sql)}
        assert used == set(range(1, len(statement.params) + 1)), statement.sql
    assert ours.purge_dead("q", None).params == ("q",)


# -- queues ------------------------------------------------------------------


def test_the_claim_walks_its_index_however_stale_the_statistics(
    pg: Pg, d: PostgresDialect
) -> None:
    """A new queue table filled with 20,000 jobs before autovacuum first
    analyzed it (the planner then prefers a bitmap scan of every due job and a
    sort, for every claim: O(n) per claim): after its prelude, in its
    transaction, the claim is an ordered scan of the claim index that stops
    at the LIMIT, with no sort and no bitmap scan."""
    for _ in range(20):
        pg.run(Q.enqueue_many(d, [new_job() for _ in range(1000)], ORIGIN, T0))
    claim = d.claim("q", "w", 100, T0 + US, T0 + 2 * US, 1)
    explain = Statement("EXPLAIN " + claim.sql, claim.params, Fetch.ALL)
    lines = pg.run(iter_statements(*d.claim_prelude(), explain))[-1]
    plan = "\n".join(line for (line,) in lines)
    assert "Index Scan using jobs_claim" in plan, plan
    assert "Sort" not in plan and "Bitmap" not in plan, plan


def test_the_cancel_check_looks_every_held_job_up_by_primary_key(
    pg: Pg, d: PostgresDialect
) -> None:
    """A worker's cancel check asks about every job it holds in one
    statement: a primary-key probe per id in each table, never a scan of a
    table or of the queue's range of it (as a hash or materialized anti-join
    would do), on tables autovacuum has not analyzed yet."""
    for _ in range(20):
        pg.run(Q.enqueue_many(d, [new_job() for _ in range(1000)], ORIGIN, T0))
    for table, extra, value in (
        (d.dead, "reason, died_at", "'failed', 0"),
        (d.history, "outcome, finished_at, prune_at", "'acked', 0, 0"),
    ):
        pg.sql(
            f"INSERT INTO {table} (id, queue, payload, priority, attempts, max_attempts, "
            f"run_at, created_at, {extra}) SELECT 100000 + n, 'q', '1', 0, 1, 3, 0, 0, {value} "
            "FROM generate_series(1, 5000) AS n",
            fetch=Fetch.NONE,
        )
    held = [5, 17, 19_999, 100_007, 40_000]
    check = d.cancelled_among("q", held)
    explain = Statement("EXPLAIN " + check.sql, check.params, Fetch.ALL)
    plan = "\n".join(line for (line,) in pg.run(iter_statements(explain))[0])
    for scan in ("Seq Scan", "Bitmap", "Hash", "Materialize", "Join"):
        assert scan not in plan, plan
    # One probe per id in each table: an index condition on the id.
    probe = r"Index (?:Only )?Scan using \w+ on (\w+)\s+\(.*\)\n\s+Index Cond: (.*)"
    probes = re.findall(probe, plan)
    assert sorted(table for table, _ in probes) == ["dead", "history", "jobs"], plan
    assert all("id = t.id" in cond for _, cond in probes), plan
    assert pg.run(Q.cancelled_among(d, "q", held)) == [40_000]


def test_the_worker_ack_never_matches_each_pair_against_every_processing_job(
    pg: Pg, d: PostgresDialect
) -> None:
    """A worker acks its (id, claim number) pairs in one statement. On a jobs
    table autovacuum has not analyzed yet (a backlog just enqueued) with
    3,000 jobs processing, its cost stays linear in the pairs: no join that
    compares every pair with every processing job (a nested loop whose join
    filter removed 1.5 million rows for an ack of 500, in 70 ms)."""
    for _ in range(20):
        pg.run(Q.enqueue_many(d, [new_job() for _ in range(1000)], ORIGIN, T0))
    held = [job for _ in range(6) for job in claim(pg, d, 500)]
    pairs = [(job.id, job.claims) for job in held[-500:]]
    ack = d.ack_claims("w1", pairs, T0)
    explain = Statement("EXPLAIN (ANALYZE) " + ack.sql, ack.params, Fetch.ALL)
    pg.sql(control.BEGIN, fetch=Fetch.NONE)
    try:
        plan = "\n".join(line for (line,) in pg.execute(explain))
    finally:
        pg.sql(control.ROLLBACK, fetch=Fetch.NONE)
    assert "Join Filter" not in plan and "Nested Loop" not in plan, plan
    assert re.search(r"Delete on jobs j .*rows=500 loops=1", plan), plan
    assert pg.run(C.ack_many(d, "w1", held[-500:], T0)) == {job_id for job_id, _ in pairs}


def test_the_worker_ack_looks_up_each_claim_number_under_any_plan(
    pg: Pg, d: PostgresDialect
) -> None:
    """The worker's ack finds each row's claim number by the row's id, under
    the generic plan a prepared statement settles on as under a custom one:
    no filter compares a row with every pair (an ``= ANY`` over 'id/claims'
    keys was hashed in a custom plan only; under the generic one an ack of
    1,000 jobs took 19 ms of server time). A stale claim number is refused,
    and an id given twice is acked once, under whichever number is live."""
    pg.run(Q.enqueue_many(d, [new_job() for _ in range(3)], ORIGIN, T0))
    first = claim(pg, d, 3, vis=US)
    later = T0 + 2 * US  # every claim lapsed; the same worker claims the first job again
    (again,) = claim(pg, d, 1, now=later)
    assert (again.id, again.claims) == (first[0].id, 2)
    assert pg.run(C.ack_many(d, "w1", [first[0]], later)) == set()  # claim number 1: stale
    assert pg.run(C.ack_many(d, "w1", [first[0], again], later)) == {again.id}
    assert pg.sql(f"SELECT count(*) FROM {d.jobs} WHERE id = $1", again.id) == [(0,)]

    ack = d.ack_claims("w1", [(job.id, job.claims) for job in first], later)
    pg.sql(f"PREPARE alk_ack AS {ack.sql}", fetch=Fetch.NONE)
    pg.sql("SET plan_cache_mode = force_generic_plan", fetch=Fetch.NONE)
    try:
        rows = pg.sql("EXPLAIN EXECUTE alk_ack ('{1,2}', '{}', 'w1', 0)")
    finally:
        pg.sql("RESET plan_cache_mode", fetch=Fetch.NONE)
        pg.sql("DEALLOCATE alk_ack", fetch=Fetch.NONE)
    plan = "\n".join(line for (line,) in rows)
    # The only array the plan compares with is the ids (an index condition,
    # or a filter on a table this small).
    assert re.findall(r"(\S+) = ANY", plan) == ["(id"], plan


def test_a_keyed_batch_enqueue_stores_its_keys_in_its_insert(pg: Pg, d: PostgresDialect) -> None:
    """A batch enqueue's concurrency keys go in with its rows: the plan
    inserts and notifies, and no statement reads the jobs table (a second
    statement that set the keys by joining the new ids read every job, on a
    table without statistics, for every batch)."""
    for _ in range(5):
        pg.run(Q.enqueue_many(d, [new_job() for _ in range(1000)], ORIGIN, T0))
    jobs = [new_job()._replace(concurrency_key=f"k{i % 3}" if i % 2 else None) for i in range(10)]
    pg.sent.clear()
    ids = pg.run(Q.enqueue_many(d, jobs, ORIGIN, T0))
    verbs = [s.sql.split()[0] for s in pg.sent if s.sql not in (control.BEGIN, control.COMMIT)]
    assert verbs == ["INSERT", "SELECT"], pg.sent  # the jobs, then the wake (pg_notify)
    keys = pg.sql(f"SELECT concurrency_key FROM {d.jobs} WHERE id = ANY($1) ORDER BY id", ids)
    assert [key for (key,) in keys] == [job.concurrency_key for job in jobs]


def enqueue(pg: Pg, d: PostgresDialect, **kw: Any) -> int:
    return pg.run(Q.enqueue(d, new_job(**kw), ORIGIN, T0))


def claim(pg: Pg, d: PostgresDialect, n: int = 1, *, worker: str = "w1", now: int = T0,
          queue: str = "q", vis: int = 10 * US) -> list[JobRecord]:  # fmt: skip
    return pg.run(C.claim(d, queue, worker, n, now, vis))


def test_enqueue_and_claim_order(pg: Pg, d: PostgresDialect) -> None:
    a = enqueue(pg, d, payload={"n": "a"})
    b = enqueue(pg, d, payload={"n": "b"})
    hi = enqueue(pg, d, payload={"n": "hi"}, priority=5)
    early = enqueue(pg, d, payload={"n": "early"}, run_at=T0 - US)
    later = enqueue(pg, d, payload={"n": "later"}, run_at=T0 + 60 * US)
    other = enqueue(pg, d, queue="other", payload={"n": "other"})
    assert len({a, b, hi, early, later, other}) == 6
    assert a < b  # identity: increasing

    jobs = claim(pg, d, 10, worker="w1")
    assert [j.id for j in jobs] == [hi, early, a, b]  # priority, then run_at, then id
    first = jobs[0]
    assert first.payload == {"n": "hi"} and first.priority == 5
    assert first.attempts == 1 and first.claimed_by == "w1"
    assert first.claim_expires_at_us == T0 + 10 * US and first.max_attempts == 3
    assert first.created_at_us == T0 and first.expires_at_us is None
    assert claim(pg, d, 10) == []  # later is not due, other is another queue
    assert pg.run(C.next_due(d, "q")) == T0 + 10 * US  # claims lapse first
    assert pg.run(C.next_due(d, "nothing")) is None
    # The four lapsed claims became due again together at T0 + 10 s (their
    # run_at now says so), so after priority they go by id; `later` is due
    # at T0 + 60 s.
    assert [j.id for j in claim(pg, d, 5, now=T0 + 60 * US)] == [hi, a, b, early, later]


def test_ack_ack_batch_and_ownership(pg: Pg, d: PostgresDialect) -> None:
    ids = [enqueue(pg, d, payload=i) for i in range(5)]
    jobs = claim(pg, d, 5)
    assert [j.id for j in jobs] == ids
    assert pg.run(C.ack(d, jobs[0], T0 + US)) is True
    assert pg.run(C.ack(d, jobs[0], T0 + US)) is False  # already gone
    assert pg.run(Q.get_job(d, "q", ids[0])) is None
    # Only the owner acks; ack_batch counts what was still owned.
    assert pg.run(C.ack_batch(d, "q", ids, "w2", T0 + US)) == 0
    assert pg.run(C.ack_batch(d, "other", ids, "w1", T0 + US)) == 0
    assert pg.run(C.ack_batch(d, "q", [ids[1], ids[2], 10**12], "w1", T0 + US)) == 2
    assert pg.run(C.ack_batch(d, "q", [], "w1", T0 + US)) == 0
    assert pg.run(iter_statements(d.ack_batch("q", [], "w1", T0))) == [0]  # '{}' binds
    # A lapsed claim is no longer owned.
    assert pg.run(C.ack(d, jobs[3], T0 + 10 * US)) is False
    assert pg.run(C.ack_batch(d, "q", [ids[3]], "w1", T0 + 10 * US)) == 0
    assert pg.run(C.ack(d, jobs[4], T0 + 10 * US - 1)) is True
    # Ids are never reused.
    assert enqueue(pg, d) > ids[-1]


def test_retry_fail_heartbeat_release(pg: Pg, d: PostgresDialect) -> None:
    jid = enqueue(pg, d, payload="x", max_attempts=2)
    (job,) = claim(pg, d)
    assert pg.run(C.heartbeat(d, job, T0 + US, 30 * US)) is True
    info = pg.run(Q.get_job(d, "q", jid))
    assert info is not None and info.state == "processing"
    assert info.claim_expires_at is not None
    wrong = JobRecord(**_fields(job, claimed_by="w9"))
    assert pg.run(C.heartbeat(d, wrong, T0 + US, 30 * US)) is False
    # retry with an explicit delay: pending, due later, error kept.
    ok = pg.run(C.retry(d, job, T0 + 2 * US, delay_us=5 * US, backoff=BACKOFF, draw=0.0,
                        error="flaky"))  # fmt: skip
    assert ok is Outcome.RETRIED
    info = pg.run(Q.get_job(d, "q", jid))
    assert info is not None and info.state == "pending" and info.last_error == "flaky"
    assert info.claimed_by is None and info.attempts == 1
    assert claim(pg, d, now=T0 + 6 * US) == []
    (job2,) = claim(pg, d, now=T0 + 7 * US)
    assert job2.attempts == 2 and job2.run_at_us == T0 + 7 * US
    assert pg.run(C.retry(d, job, T0 + 8 * US, delay_us=None, backoff=BACKOFF, draw=0.5,
                          error="stale")) is None  # fmt: skip
    # The last attempt's retry buries it; None keeps the previous error.
    assert pg.run(C.retry(d, job2, T0 + 8 * US, delay_us=None, backoff=BACKOFF, draw=0.5,
                          error=None)) is Outcome.DEAD  # fmt: skip
    dead = pg.run(Q.get_job(d, "q", jid))
    assert dead is not None and dead.state == "dead" and dead.dead_reason == "max_attempts"
    assert dead.last_error == "flaky" and dead.attempts == 2 and dead.claimed_by == "w1"

    # fail: straight to dead; error text Postgres cannot store is cleaned.
    jid2 = enqueue(pg, d, payload="y")
    (job3,) = claim(pg, d, now=T0 + 9 * US)
    assert pg.run(C.fail(d, job3, T0 + 9 * US, "bad\x00thing \udc80")) is True
    info = pg.run(Q.get_job(d, "q", jid2))
    assert info is not None and info.dead_reason == "failed"
    assert info.last_error == "bad\ufffdthing ?"
    assert pg.run(C.fail(d, job3, T0 + 9 * US, "again")) is False

    # release: back to pending at once, with or without the attempt refunded.
    jid3 = enqueue(pg, d, payload="z")
    (job4,) = claim(pg, d, now=T0 + 10 * US)
    assert pg.run(C.release(d, job4, T0 + 10 * US, refund=True)) is True
    (job5,) = claim(pg, d, worker="w2", now=T0 + 10 * US)
    assert job5.id == jid3 and job5.attempts == 1
    assert pg.run(C.release(d, job4, T0 + 10 * US, refund=True)) is False  # stale attempt
    assert pg.run(C.release(d, job5, T0 + 10 * US, refund=False)) is True
    info = pg.run(Q.get_job(d, "q", jid3))
    assert info is not None and info.attempts == 1 and info.state == "pending"


def _fields(job: JobRecord, **changes: Any) -> dict[str, Any]:
    values = job._asdict()
    values.update(changes)
    return values


def test_expired_claims_are_reclaimed_and_stale_owners_lose(pg: Pg, d: PostgresDialect) -> None:
    jid = enqueue(pg, d, max_attempts=3)
    (old,) = claim(pg, d, worker="w1", vis=5 * US)
    assert claim(pg, d, worker="w2", now=T0 + 5 * US - 1) == []
    (new,) = claim(pg, d, worker="w2", now=T0 + 5 * US)
    assert new.id == jid and new.attempts == 2 and new.claimed_by == "w2"
    assert pg.run(C.ack(d, old, T0 + 6 * US)) is False
    assert pg.run(C.fail(d, old, T0 + 6 * US, "x")) is False
    assert pg.run(C.ack(d, new, T0 + 6 * US)) is True


def test_sweep_stats_dead_letters_requeue_purge(pg: Pg, d: PostgresDialect) -> None:
    ready = enqueue(pg, d, payload="ready")
    scheduled = enqueue(pg, d, payload="later", run_at=T0 + 100 * US)
    expiring = enqueue(pg, d, payload="exp", run_at=T0 + 50 * US, expires=T0 + 20 * US)
    once = enqueue(pg, d, payload="once", max_attempts=1, priority=9)
    (c1,) = claim(pg, d, 1, vis=5 * US)  # "once": priority 9
    assert c1.id == once
    stats = pg.run(Q.stats(d, "q", T0))
    assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (1, 2, 1, 0)
    # The one ready job became due at T0; nothing is ready in another queue,
    # nor before anything is due.
    assert pg.run(Q.oldest_ready(d, "q", T0 + US)) == T0
    assert pg.run(Q.oldest_ready(d, "q", T0 - 1)) is None
    assert pg.run(Q.oldest_ready(d, "other", T0)) is None

    assert pg.run(C.sweep(d, "q", T0 + US)) == []  # nothing to do yet
    # The exhausted claim lapses; the deadline passes.
    assert sorted(pg.run(C.sweep(d, None, T0 + 30 * US))) == sorted(
        [(once, "claim_expired"), (expiring, "expired")]
    )
    assert pg.run(C.sweep(d, "q", T0 + 30 * US)) == []
    dead = pg.run(Q.dead_letters(d, "q", 10))
    assert {(j.id, j.dead_reason) for j in dead} == {
        (once, "claim_expired"),
        (expiring, "expired"),
    }
    assert [(j.died_at, j.id) for j in dead] == sorted((j.died_at, j.id) for j in dead)
    stats = pg.run(Q.stats(d, "q", T0 + 30 * US))
    assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (1, 1, 0, 2)
    assert pg.run(Q.dead_letters(d, "q", 1))[0].id in {once, expiring}
    assert pg.run(Q.dead_letters(d, "elsewhere", 10)) == []

    # requeue: same id, pending, fresh attempts, no deadline, due now.
    assert pg.run(Q.requeue_dead(d, "q", once, ORIGIN, T0 + 40 * US)) is True
    assert pg.run(Q.requeue_dead(d, "q", once, ORIGIN, T0 + 40 * US)) is False
    assert pg.run(Q.requeue_dead(d, "other", expiring, ORIGIN, T0 + 40 * US)) is False
    info = pg.run(Q.get_job(d, "q", once))
    assert info is not None and info.state == "pending" and info.attempts == 0
    assert info.expires_at is None and info.payload == "once"
    (again,) = claim(pg, d, 1, now=T0 + 40 * US)
    assert again.id == once and again.attempts == 1
    # A requeued row keeps its id and new jobs still get fresh ones.
    assert enqueue(pg, d) > once

    # purge: by age, then all.
    assert pg.run(Q.purge_dead(d, "q", T0 + 30 * US)) == 0  # died at exactly 30 s
    assert pg.run(Q.purge_dead(d, "q", T0 + 30 * US + 1)) == 1
    assert pg.run(Q.purge_dead(d, "q", None)) == 0
    # cancel
    assert pg.run(Q.cancel(d, "q", scheduled, "o", T0)) is True
    assert pg.run(Q.cancel(d, "q", scheduled, "o", T0)) is False
    assert pg.run(Q.cancel(d, "other", ready, "o", T0)) is False
    assert pg.run(Q.get_job(d, "other", ready)) is None


def headers_journey(run: Callable[[Plan[Any]], Any], d: Any) -> list[Any]:
    """A job's headers through every move of the job; what each claim read."""
    seen: list[Any] = []
    tagged = NewJob("h", "1", 0, T0, 1, None, headers='{"traceparent":"t1"}')
    plain = NewJob("h", "2", 0, T0, 1, None)
    first = run(Q.enqueue(d, tagged, ORIGIN, T0))
    run(Q.enqueue(d, plain, ORIGIN, T0))
    batch = [NewJob("h", str(i), 0, T0, 1, None, headers=h)
             for i, h in enumerate(['{"b":"0"}', None, '{"b":"2"}'])]  # fmt: skip
    run(Q.enqueue_many(d, batch, ORIGIN, T0))
    jobs = run(C.claim(d, "h", "w", 10, T0, 5 * US))
    seen.append([(j.payload, j.headers) for j in jobs])
    # A release keeps them; a failure buries them with the job; a requeue
    # brings them back.
    job = next(j for j in jobs if j.id == first)
    assert run(C.release(d, job, T0, refund=True)) is True
    (job,) = run(C.claim(d, "h", "w", 1, T0, 5 * US))
    seen.append(job.headers)
    assert run(C.fail(d, job, T0, "boom")) is True
    assert run(Q.requeue_dead(d, "h", first, ORIGIN, T0 + US)) is True
    (job,) = run(C.claim(d, "h", "w", 1, T0 + US, 5 * US))
    seen.append((job.id, job.headers))
    # The sweep's burial keeps them too.
    assert run(C.sweep(d, "h", T0 + 10 * US)) != []
    assert run(Q.requeue_dead(d, "h", first, ORIGIN, T0 + 11 * US)) is True
    (job,) = run(C.claim(d, "h", "w", 1, T0 + 11 * US, 5 * US))
    seen.append((job.id, job.headers))
    return seen


def test_headers_travel_with_the_job(pg: Pg, d: PostgresDialect) -> None:
    """Headers written at enqueue (one or many) come back with the claim,
    NULL as None, and survive release, burial (fail and sweep) and requeue,
    the same on both engines."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        sqlite_conn.ensure_schema(conn)
        on_sqlite = headers_journey(
            lambda plan: sqlite_conn.run_plan(conn, plan, write=True)[0], SqliteDialect()
        )
    finally:
        conn.close()
    on_postgres = headers_journey(pg.run, d)
    expected_claims = [
        (1, '{"traceparent":"t1"}'), (2, None),
        (0, '{"b":"0"}'), (1, None), (2, '{"b":"2"}'),
    ]  # fmt: skip
    for seen in (on_sqlite, on_postgres):
        assert seen[0] == expected_claims
        assert seen[1] == '{"traceparent":"t1"}'
        assert seen[2][1] == seen[3][1] == '{"traceparent":"t1"}'
        assert seen[2][0] == seen[3][0]


def test_parameters_of_every_int_width_bind(pg: Pg, d: PostgresDialect) -> None:
    """psycopg types each int by its value (int2/int4/int8/numeric); every
    statement must accept any width in any position."""
    big = 2**63 - 1  # "retry forever"
    jid = enqueue(pg, d, priority=-(2**31), max_attempts=big, run_at=0, expires=big)
    small = enqueue(pg, d, priority=2**31 - 1, max_attempts=1, run_at=1)
    jobs = claim(pg, d, 70_000, now=2**40)
    assert [j.id for j in jobs] == [small, jid]
    assert jobs[1].max_attempts == big and jobs[1].expires_at_us == big
    assert pg.run(C.release(d, jobs[1], 2**40, refund=True)) is True
    assert pg.run(C.ack_batch(d, "q", [small, 10**12, 1, 2**40], "w1", 2**40)) == 1
    assert pg.run(Q.get_job(d, "q", 2**62)) is None  # int8 against bigint
    assert pg.run(Q.cancel(d, "q", 2**40, "o", T0)) is False
    # Past 64 bits is refused before any round trip, as on SQLite.
    for plan in (lambda: Q.get_job(d, "q", 2**70), lambda: Q.cancel(d, "q", 2**70, "o", T0)):
        with pytest.raises(InvalidArgument):
            pg.run(plan())
    assert pg.run(S.read_since(d, "s", 2**62, 1)) == []
    assert pg.run(S.trim_to(d, "s", 0)) == 0
    assert pg.run(L.try_lock(d, "l", "o", 0, 1)) is not None


def test_concurrent_claimers_skip_locked_rows(pg: Pg, d: PostgresDialect) -> None:
    ids = [enqueue(pg, d, payload=i) for i in range(4)]
    a, b = Pg(), Pg()
    try:
        b.sql("SET statement_timeout = '5s'", fetch=Fetch.NONE)
        a.sql(control.BEGIN, fetch=Fetch.NONE)
        got_a = run_sync(C.claim(d, "q", "wa", 2, T0, 10 * US), a.execute)
        # b does not wait for a's uncommitted claim: it takes the next rows.
        got_b = b.run(C.claim(d, "q", "wb", 4, T0, 10 * US))
        a.sql(control.COMMIT, fetch=Fetch.NONE)
        assert [j.id for j in got_a] == ids[:2]
        assert [j.id for j in got_b] == ids[2:]
        # A sweeper does not wait for a worker settling a job either.
        a.sql(control.BEGIN, fetch=Fetch.NONE)
        assert run_sync(C.fail(d, got_a[0], T0 + US, "x"), a.execute) is True
        assert b.run(C.sweep(d, "q", T0 + 60 * US)) == []
        a.sql(control.COMMIT, fetch=Fetch.NONE)
    finally:
        a.close()
        b.close()


def test_owned_locks_the_row_against_a_concurrent_reclaim(pg: Pg, d: PostgresDialect) -> None:
    enqueue(pg, d)
    (job,) = claim(pg, d, vis=5 * US)
    a, b = Pg(), Pg()
    try:
        a.sql(control.BEGIN, fetch=Fetch.NONE)
        assert a.execute(d.owned(job.id, "w1", 1, T0 + US)) == (1, 3, False)
        # A reclaim (the claim lapses at 5 s) cannot take the locked row.
        assert b.run(C.claim(d, "q", "w2", 1, T0 + 5 * US, 5 * US)) == []
        a.execute(d.reschedule(job.id, T0 + 6 * US, "e"))
        a.sql(control.COMMIT, fetch=Fetch.NONE)
        (again,) = b.run(C.claim(d, "q", "w2", 1, T0 + 6 * US, 5 * US))
        assert again.attempts == 2
    finally:
        a.close()
        b.close()


def test_claim_and_next_due_use_the_partial_indexes(pg: Pg, d: PostgresDialect) -> None:
    jobs = [new_job(queue=f"q{i % 50}", priority=i % 3, run_at=T0 + i) for i in range(5000)]
    pg.run(iter_statements(*(d.enqueue(j, T0) for j in jobs)))
    pg.sql(f"ANALYZE {d.jobs}", fetch=Fetch.NONE)

    def plan_of(statement: Statement) -> str:
        rows = pg.execute(Statement("EXPLAIN " + statement.sql, statement.params, Fetch.ALL))
        return "\n".join(r[0] for r in rows)

    pg.sql(control.BEGIN, fetch=Fetch.NONE)
    try:
        assert "jobs_claim" in plan_of(d.claim("q7", "w", 5, T0 + 10**6, T0 + 2 * 10**6, 1))
        assert "jobs_due" in plan_of(d.next_due("q7"))
        assert "jobs_due" in plan_of(d.oldest_ready("q7", T0 + 10**6))
        assert "jobs_expiry" in plan_of(d.sweep_candidates("q7", T0, 100)) or "jobs_exhausted" in (
            plan_of(d.sweep_candidates("q7", T0, 100))
        )
    finally:
        pg.sql(control.ROLLBACK, fetch=Fetch.NONE)


# -- streams -----------------------------------------------------------------


def test_streams_publish_read_offsets_trim(pg: Pg, d: PostgresDialect) -> None:
    offs = [
        pg.run(S.publish(d, "s", None, codec.encode({"i": i}), ORIGIN, T0 + i)) for i in range(5)
    ]
    assert offs == [1, 2, 3, 4, 5]
    assert pg.run(S.publish(d, "s", "key-1", codec.encode("k"), ORIGIN, T0)) == 6
    assert pg.run(S.publish(d, "t", None, "null", ORIGIN, T0)) == 1  # per-stream offsets
    events = pg.run(S.read_since(d, "s", 0, 100))
    assert [e.offset for e in events] == [1, 2, 3, 4, 5, 6]
    assert events[0].payload == {"i": 0} and events[0].stream == "s" and events[0].key is None
    assert events[5].key == "key-1" and events[5].payload == "k"
    assert [e.offset for e in pg.run(S.read_since(d, "s", 3, 2))] == [4, 5]

    assert pg.run(S.get_offset(d, "s", "c")) == 0
    pg.run(S.save_offset(d, "s", "c", 3))
    pg.run(S.save_offset(d, "s", "c", 2))  # monotonic: never moves back
    assert pg.run(S.get_offset(d, "s", "c")) == 3
    pg.run(S.save_offset(d, "s", "c", 5))
    assert pg.run(S.get_offset(d, "s", "c")) == 5
    assert pg.run(S.get_offset(d, "t", "c")) == 0
    assert [e.offset for e in pg.run(S.read_from_consumer(d, "s", "c", 10))] == [6]

    assert pg.run(S.trim_to(d, "s", 4)) == 3
    assert [e.offset for e in pg.run(S.read_since(d, "s", 0, 10))] == [4, 5, 6]
    assert pg.run(S.publish(d, "s", None, "1", ORIGIN, T0)) == 7  # offsets continue


def test_publishers_of_one_stream_commit_in_offset_order(pg: Pg, d: PostgresDialect) -> None:
    """The race: B takes its offset while A's is still uncommitted. B waits
    on the stream's counter row until A commits, so a reader can never see
    offset 2 before offset 1 exists."""
    a, b, reader = Pg(), Pg(), Pg()
    try:
        a.sql(control.BEGIN, fetch=Fetch.NONE)
        assert run_sync(S.publish(d, "s", None, '"a"', ORIGIN, T0), a.execute) == 1

        b.sql(control.BEGIN, fetch=Fetch.NONE)
        plan = S.publish(d, "s", None, '"b"', ORIGIN, T0)
        first = next(plan)
        b.wire.send(first)
        time.sleep(0.3)
        b.pg.consume_input()
        assert b.pg.is_busy()  # B waits for A
        assert reader.run(S.read_since(d, "s", 0, 10)) == []

        a.sql(control.COMMIT, fetch=Fetch.NONE)
        row = b.wire.result(b.collect(), first.fetch)
        assert row == (2,)
        try:
            statement = plan.send(row)
            while True:
                statement = plan.send(b.execute(statement))
        except StopIteration as stop:
            assert stop.value == 2
        assert [e.offset for e in reader.run(S.read_since(d, "s", 0, 10))] == [1]
        b.sql(control.COMMIT, fetch=Fetch.NONE)
        assert [e.offset for e in reader.run(S.read_since(d, "s", 0, 10))] == [1, 2]
    finally:
        a.close()
        b.close()
        reader.close()


def test_no_reader_ever_skips_an_offset_under_concurrent_publishers(
    pg: Pg, d: PostgresDialect
) -> None:
    publishers, per_publisher = 4, 40
    total = publishers * per_publisher
    errors: list[BaseException] = []
    done = threading.Event()

    def publish(seed: int) -> None:
        rng = random.Random(seed)
        c = Pg()
        try:

            def slow(statement: Statement) -> Any:
                result = c.execute(statement)
                if rng.random() < 0.5:
                    time.sleep(rng.random() * 0.003)  # widen the window before commit
                return result

            for i in range(per_publisher):
                c.sql(control.BEGIN, fetch=Fetch.NONE)
                run_sync(S.publish(d, "race", None, codec.encode([seed, i]), ORIGIN, T0), slow)
                c.sql(control.COMMIT, fetch=Fetch.NONE)
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.close()

    seen: list[int] = []

    def read() -> None:
        c = Pg()
        try:
            last = 0
            while last < total:
                for event in c.run(S.read_since(d, "race", last, 1000)):
                    # Every read continues exactly where the last one stopped.
                    assert event.offset == last + 1, (event.offset, last)
                    last = event.offset
                    seen.append(event.offset)
                if done.is_set() and last < total and errors:
                    return
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.close()

    reader = threading.Thread(target=read)
    threads = [threading.Thread(target=publish, args=(s,)) for s in range(publishers)]
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    done.set()
    reader.join(60)
    assert not errors
    assert seen == list(range(1, total + 1))


# -- locks -------------------------------------------------------------------


def test_locks_and_fencing_tokens(pg: Pg, d: PostgresDialect) -> None:
    a = pg.run(L.try_lock(d, "L", "alice", T0, 10 * US))
    assert a is not None and a.token == 1 and a.expires_at_us == T0 + 10 * US
    assert pg.run(L.try_lock(d, "L", "bob", T0 + US, 10 * US)) is None
    assert pg.run(L.try_lock(d, "other", "bob", T0 + US, 10 * US)) is not None
    # The holder re-acquires: same token, TTL refreshed.
    again = pg.run(L.try_lock(d, "L", "alice", T0 + 2 * US, 10 * US))
    assert again is not None and again.token == 1 and again.expires_at_us == T0 + 12 * US
    renewed = pg.run(L.renew(d, again, T0 + 3 * US, 20 * US))
    assert renewed is not None and renewed.expires_at_us == T0 + 23 * US
    # Lapsed: renew and release fail; another owner gets a higher token.
    assert pg.run(L.renew(d, renewed, T0 + 23 * US, 5 * US)) is None
    b = pg.run(L.try_lock(d, "L", "bob", T0 + 23 * US, 10 * US))
    assert b is not None and b.token == 2
    assert pg.run(L.release(d, renewed, T0 + 24 * US)) is False
    assert pg.run(L.release(d, b, T0 + 24 * US)) is True
    assert pg.run(L.release(d, b, T0 + 24 * US)) is False
    # Released: free at once, and the token keeps increasing.
    c = pg.run(L.try_lock(d, "L", "alice", T0 + 25 * US, 10 * US))
    assert c is not None and c.token == 3
    # The same owner after its own lapse: a new acquisition, a new token.
    c2 = pg.run(L.try_lock(d, "L", "alice", T0 + 35 * US, 10 * US))
    assert c2 is not None and c2.token == 4
    # Lock names are data: long, quoted, unicode names do not alias.
    long_a, long_b = "n" * 70 + "a", "n" * 70 + "b"
    assert pg.run(L.try_lock(d, long_a, "x", T0, 10 * US)) is not None
    assert pg.run(L.try_lock(d, long_b, "y", T0, 10 * US)) is not None
    assert pg.run(L.try_lock(d, "q\"uote'd é", "x", T0, 10 * US)) is not None
    assert pg.run(L.try_lock(d, "Ünïcode", "x", T0, 10 * US)) is not None
    assert pg.run(L.try_lock(d, "ünïcode", "y", T0, 10 * US)) is not None


# -- schedules ---------------------------------------------------------------


def test_schedules_fire_once_per_fire_time(pg: Pg, d: PostgresDialect) -> None:
    expr = SCHV.parse("@every 10s")
    opts = SCHV.ScheduleOptions.of(priority=2, expires_after=5)
    pg.run(SCH.register(d, "tick", "jobs", expr, codec.encode({"t": 1}), opts, T0))
    first = expr.next_after(T0)
    assert pg.run(SCH.next_fire(d)) == first
    # Re-registering the same expression keeps the pending fire time.
    pg.run(SCH.register(d, "tick", "jobs", expr, codec.encode({"t": 2}), opts, T0 + 5 * US))
    assert pg.run(SCH.next_fire(d)) == first
    assert pg.run(SCH.tick(d, first - 1, ORIGIN, 3)) == []

    a, b = Pg(), Pg()
    try:
        b.sql("SET statement_timeout = '5s'", fetch=Fetch.NONE)
        a.sql(control.BEGIN, fetch=Fetch.NONE)
        fired = run_sync(SCH.tick(d, first, ORIGIN, 3), a.execute)
        # A concurrent ticker skips the row a is firing, without waiting.
        assert b.run(SCH.tick(d, first, ORIGIN, 3)) == []
        a.sql(control.COMMIT, fetch=Fetch.NONE)
    finally:
        a.close()
        b.close()
    assert [(f.schedule, f.queue, f.fire_at_us) for f in fired] == [("tick", "jobs", first)]
    assert pg.run(SCH.tick(d, first, ORIGIN, 3)) == []
    (job,) = claim(pg, d, 5, queue="jobs", now=first)
    assert job.id == fired[0].job_id and job.payload == {"t": 2} and job.priority == 2
    assert job.expires_at_us == first + 5 * US

    # Missed fire times collapse into one job, then the schedule goes on from now.
    late = first + 95 * US
    assert len(pg.run(SCH.tick(d, late, ORIGIN, 3))) == 1
    assert pg.run(SCH.next_fire(d)) == expr.next_after(late)
    # A changed expression takes its own next fire time.
    hourly = SCHV.parse("@every 1h")
    pg.run(SCH.register(d, "tick", "jobs", hourly, "null", opts, late))
    assert pg.run(SCH.next_fire(d)) == hourly.next_after(late)
    assert pg.run(SCH.unregister(d, "tick")) is True
    assert pg.run(SCH.unregister(d, "tick")) is False
    assert pg.run(SCH.next_fire(d)) is None


# -- channel names and LISTEN/NOTIFY ----------------------------------------


def test_channel_identifiers_are_fixed_ascii_and_distinct() -> None:
    prefix63 = "p" * 63
    names = [
        prefix63 + "a",
        prefix63 + "b",
        "é" * 40 + "1",  # 81 bytes
        "é" * 40 + "2",
        "Orders",
        "orders",
        "ORDERS",
        'has "quotes"',
        "has spaces",
        "'; DROP TABLE x; --",
        "日本語のチャンネル",
        "x",
        "__alkstore_q:orders",
        "a" * 1024,
    ]
    ids = [channel_identifier(n) for n in names]
    for ident in ids:
        assert re.fullmatch(r"alk_[0-9a-f]{56}", ident)
        assert len(ident.encode()) == 60 < 64
    assert len(set(ids)) == len(names)
    assert channel_identifier("Orders") == channel_identifier("Orders")  # deterministic
    assert PostgresDialect().listen("x") == f'LISTEN "{channel_identifier("x")}"'
    assert PostgresDialect().unlisten("x") == f'UNLISTEN "{channel_identifier("x")}"'


def test_channels_are_scoped_by_schema_and_the_default_keeps_its_identifiers() -> None:
    """LISTEN/NOTIFY are per database: a store in another schema gets
    identifiers of its own, so two schemas never wake each other; the
    default schema's are those of earlier releases (the bare digest)."""
    default, other, third = PostgresDialect(), PostgresDialect("app_a"), PostgresDialect("app_b")
    assert default.channel_identifier("x") == "alk_" + hashlib.sha256(b"x").hexdigest()[:56]
    ids = {d.channel_identifier("__alkstore_q:orders") for d in (default, other, third)}
    assert len(ids) == 3
    for d in (other, third):
        assert re.fullmatch(r"alk_[0-9a-f]{56}", d.channel_identifier("x"))
        assert d.listen("x") == f'LISTEN "{d.channel_identifier("x")}"'
        assert d.notify("x", ORIGIN, T0).params == (d.channel_identifier("x"),)


def test_quote_ident() -> None:
    assert quote_ident("jobs") == '"jobs"'
    assert quote_ident('a"b') == '"a""b"'
    assert quote_ident("é" * 31) == '"' + "é" * 31 + '"'  # 62 bytes
    for bad in ["", "x" * 64, "é" * 32, "a\x00b", "\udc80"]:
        with pytest.raises(InvalidName):
            quote_ident(bad)


def wait_notifies(c: Pg, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    got: list[str] = []
    while time.monotonic() < deadline:
        c.pg.consume_input()
        while (n := c.pg.notifies()) is not None:
            got.append(n.relname.decode())
        if got:
            # Collect anything that arrives right behind.
            time.sleep(0.05)
            c.pg.consume_input()
            while (n := c.pg.notifies()) is not None:
                got.append(n.relname.decode())
            return got
        time.sleep(0.005)
    return got


def test_listen_on_mapped_identifiers_and_pg_notify(d: PostgresDialect) -> None:
    prefix63 = "p" * 63
    names = [prefix63 + "a", prefix63 + "b", "Orders", "orders", 'qu"ote d', "日本語", "é" * 40]
    listener, sender = Pg(), Pg()
    try:
        for name in names:
            listener.sql(d.listen(name), fetch=Fetch.NONE)
        for name in names:
            statement = d.notify(name, ORIGIN, T0)
            assert statement.wakes == (name,)
            sender.run(iter_statements(statement))
            assert wait_notifies(listener, 5) == [d.channel_identifier(name)], name

        # A rolled-back notify never arrives; a committed one does, at commit.
        statement = d.notify(names[0], ORIGIN, T0)
        sender.sql(control.BEGIN, fetch=Fetch.NONE)
        sender.execute(statement)
        assert wait_notifies(listener, 0.2) == []
        sender.sql(control.ROLLBACK, fetch=Fetch.NONE)
        assert wait_notifies(listener, 0.3) == []
        sender.run(iter_statements(statement))
        assert wait_notifies(listener, 5) == [d.channel_identifier(names[0])]

        listener.sql(d.unlisten(names[0]), fetch=Fetch.NONE)
        sender.run(iter_statements(d.notify(names[0], ORIGIN, T0)))
        sender.run(iter_statements(d.notify(names[1], ORIGIN, T0)))
        assert wait_notifies(listener, 5) == [d.channel_identifier(names[1])]
    finally:
        listener.close()
        sender.close()


def test_enqueue_and_publish_notify_their_channels(pg: Pg, d: PostgresDialect) -> None:
    listener = Pg()
    try:
        listener.sql(d.listen("__alkstore_q:q"), fetch=Fetch.NONE)
        listener.sql(d.listen("__alkstore_s:s"), fetch=Fetch.NONE)
        enqueue(pg, d)
        assert wait_notifies(listener, 5) == [d.channel_identifier("__alkstore_q:q")]
        pg.run(S.publish(d, "s", None, "1", ORIGIN, T0))
        assert wait_notifies(listener, 5) == [d.channel_identifier("__alkstore_s:s")]
    finally:
        listener.close()


# -- the same operations on SQLite and Postgres give the same answers ---------


def scenario(run: Callable[[Plan[Any]], Any], d: Any, seed: int, steps: int) -> list[Any]:
    rng = random.Random(seed)
    now = T0
    log: list[Any] = []
    held: list[JobRecord] = []
    known: list[int] = []
    locks: list[Any] = []
    for _ in range(steps):
        op = rng.choice(
            ["enqueue"] * 4
            + ["claim"] * 3
            + ["ack", "retry", "fail", "heartbeat", "release", "ack_batch"] * 3
            + ["sweep", "stats", "dead", "requeue", "purge", "cancel", "get", "next_due", "tick"]
            + ["publish", "read", "save", "trim", "lock", "renew", "unlock"]
            + ["retention", "prune", "history", "stream_retention", "protect", "unprotect"]
        )
        queue = rng.choice(["a", "b"])
        if op == "enqueue":
            fresh = NewJob(
                queue,
                codec.encode({"n": rng.randint(0, 9)}),
                rng.choice([-1, 0, 0, 5]),
                now + rng.choice([0, 0, 2 * US, 10 * US]),
                rng.choice([1, 2, 3]),
                rng.choice([None, None, now + 5 * US, now + 30 * US]),
                rng.choice([None, None, '{"traceparent":"t"}']),
            )
            jid = run(Q.enqueue(d, fresh, ORIGIN, now))
            known.append(jid)
            log.append((op, jid))
        elif op == "claim":
            got = run(C.claim(d, queue, rng.choice(["w1", "w2"]), rng.randint(1, 3), now, 4 * US))
            held.extend(got)
            log.append((op, got))
        elif op in ("ack", "retry", "fail", "heartbeat", "release") and held:
            job = held.pop(rng.randrange(len(held)))
            if op == "ack":
                out = run(C.ack(d, job, now))
            elif op == "retry":
                delay = rng.choice([None, 0, 3 * US])
                out = run(C.retry(d, job, now, delay_us=delay, backoff=BACKOFF,
                                  draw=rng.random(), error=rng.choice([None, "e"])))  # fmt: skip
            elif op == "fail":
                out = run(C.fail(d, job, now, "failed"))
            elif op == "heartbeat":
                out = run(C.heartbeat(d, job, now, 6 * US))
                held.append(job)
            else:
                out = run(C.release(d, job, now, refund=rng.random() < 0.5))
            log.append((op, job.id, out))
        elif op == "ack_batch" and held:
            ids = [j.id for j in rng.sample(held, min(len(held), 2))]
            log.append((op, run(C.ack_batch(d, queue, ids, rng.choice(["w1", "w2"]), now))))
        elif op == "sweep":
            log.append((op, run(C.sweep(d, rng.choice([None, queue]), now, 3))))
        elif op == "stats":
            log.append((op, run(Q.stats(d, queue, now))))
            log.append(("oldest", run(Q.oldest_ready(d, queue, now))))
        elif op == "dead":
            log.append((op, run(Q.dead_letters(d, queue, 5))))
        elif op in ("requeue", "cancel", "get") and known:
            jid = rng.choice(known)
            if op == "requeue":
                log.append((op, run(Q.requeue_dead(d, queue, jid, ORIGIN, now))))
            elif op == "cancel":
                log.append((op, run(Q.cancel(d, queue, jid, "o", now))))
            else:
                log.append((op, run(Q.get_job(d, queue, jid))))
        elif op == "purge":
            log.append((op, run(Q.purge_dead(d, queue, rng.choice([None, now - 5 * US])))))
        elif op == "next_due":
            log.append((op, run(C.next_due(d, queue))))
        elif op == "publish":
            key = rng.choice([None, "k"])
            log.append((op, run(S.publish(d, queue, key, codec.encode(now), ORIGIN, now))))
        elif op == "read":
            log.append((op, run(S.read_from_consumer(d, queue, "c", rng.randint(1, 4)))))
        elif op == "save":
            log.append((op, run(S.save_offset(d, queue, "c", rng.randint(0, 6)))))
            log.append(("offset", run(S.get_offset(d, queue, "c"))))
        elif op == "trim":
            log.append((op, run(S.trim_to(d, queue, rng.randint(0, 5)))))
        elif op == "lock":
            got_lock = run(L.try_lock(d, queue, rng.choice(["o1", "o2"]), now, 5 * US))
            if got_lock is not None:
                locks.append(got_lock)
            log.append((op, got_lock))
        elif op in ("renew", "unlock") and locks:
            lock = locks.pop(rng.randrange(len(locks)))
            if op == "renew":
                out = run(L.renew(d, lock, now, 5 * US))
                if out is not None:
                    locks.append(out)
            else:
                out = run(L.release(d, lock, now))
            log.append((op, out))
        elif op == "retention":
            history = rng.choice([None, 2 * US, 20 * US])
            dead = rng.choice([None, 3 * US])
            run(Q.set_retention(d, queue, history, dead))
            log.append((op, run(Q.retention(d, queue))))
        elif op == "prune":
            log.append((op, run(HK.prune_history(d, now, 2)), run(HK.prune_dead(d, now, 2))))
            for stream in run(S.retained_streams(d, "", 10)):
                log.append(("prune_stream", stream, run(S.prune_stream(d, stream, now, 3))))
            log.append(("prune_locks", run(L.prune(d, now - 2 * US, 1))))
            log.append(("floor", run(L.token_floor_plan(d))))
        elif op == "history":
            log.append((op, run(history_rows(d))))
        elif op == "stream_retention":
            age = rng.choice([None, 3 * US])
            count = rng.choice([None, 0, 2])
            run(S.set_retention(d, queue, age, count))
            log.append((op, run(S.head_offset(d, queue))))
        elif op in ("protect", "unprotect"):
            consumer = rng.choice(["c", "p"])
            if op == "protect":
                log.append((op, run(S.protect(d, queue, consumer))))
            else:
                log.append((op, run(S.unprotect(d, queue, consumer))))
            log.append(("offset", run(S.get_offset(d, queue, consumer))))
        elif op == "tick":
            if rng.random() < 0.3:
                expr = SCHV.parse(rng.choice(["@every 3s", "@every 7s"]))
                run(SCH.register(d, "s1", queue, expr, "1", SCHV.ScheduleOptions(), now))
            log.append((op, run(SCH.tick(d, now, ORIGIN, 3))))
            log.append(("next_fire", run(SCH.next_fire(d))))
        now += rng.choice([0, 0, 0, 0, US // 2, US, 3 * US, 7 * US])
    return log


@pytest.mark.parametrize("seed", range(6))
def test_same_answers_as_the_sqlite_engine(pg: Pg, d: PostgresDialect, seed: int) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        sqlite_conn.ensure_schema(conn)

        def on_sqlite(plan: Plan[Any]) -> Any:
            return sqlite_conn.run_plan(conn, plan, write=True)[0]

        expected = scenario(on_sqlite, SqliteDialect(), seed, 300)
    finally:
        conn.close()
    assert scenario(pg.run, d, seed, 300) == expected
