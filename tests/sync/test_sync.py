"""``alkstore.sync`` beyond the contract tests it runs as the ``*-sync``
backends: joining an application's own connection (sqlite3 in both of
Python's transaction modes, psycopg), wakes reaching async workers in this
process and in another without waiting for their poll, threads sharing one
store, the read-only and closed refusals, and the engine errors mapped to
the taxonomy."""

from __future__ import annotations

import functools
import os
import sqlite3
import sys
import textwrap
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

import alkstore.io_trio
import alkstore.sync
from alkstore import (
    Closed,
    DatabaseError,
    InvalidArgument,
    Job,
    JobCancelled,
    TransactionConflict,
    UsageError,
    Wake,
)
from tests.backends import PG_DSN, PG_TEST_SCHEMA_PREFIX

# A worker polls this rarely: anything it does within SOON was woken.
POLL = 120.0
SOON = 10.0

ENGINES = ["sqlite", "postgres"]


def _schema() -> str:
    return f"{PG_TEST_SCHEMA_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(engine: str, tmp_path: Path) -> str:
    return str(tmp_path / "app.db") if engine == "sqlite" else _schema()


@contextmanager
def open_sync(engine: str, location: str, **kw: Any) -> Iterator[alkstore.sync.Store]:
    if engine == "sqlite":
        with alkstore.sync.open_sqlite(location, **kw) as store:
            yield store
    else:
        options = alkstore.sync.PostgresOptions(schema=location)
        with alkstore.sync.open_postgres(PG_DSN, options=options, **kw) as store:
            yield store


@asynccontextmanager
async def open_async(engine: str, location: str) -> AsyncIterator[alkstore.Store]:
    if engine == "sqlite":
        async with alkstore.io_trio.open_sqlite(location) as store:
            yield store
    else:
        options = alkstore.io_trio.PostgresOptions(schema=location, pool_size=2)
        async with alkstore.io_trio.open_postgres(PG_DSN, options=options) as store:
            yield store


class Worker:
    """An async worker on ``queue`` that polls every ``POLL`` seconds: a job
    it takes within ``SOON`` of a commit was woken by that commit."""

    def __init__(self) -> None:
        self.got: list[Any] = []
        self._news = trio.Event()

    async def handler(self, job: Job) -> None:
        self.got.append(job.payload)
        self._news.set()

    async def wait_for(self, payload: Any) -> None:
        with trio.fail_after(SOON):
            while payload not in self.got:
                self._news = trio.Event()
                await self._news.wait()


@asynccontextmanager
async def running_worker(store: alkstore.Store, queue: str) -> AsyncIterator[Worker]:
    """A worker that has taken a first job already, so it is waiting out
    its poll interval when the test's commit comes."""
    worker = Worker()
    async with trio.open_nursery() as nursery:
        q = store.queue(queue)
        await nursery.start(functools.partial(q.work, worker.handler, poll_interval=POLL))
        await q.enqueue("warm-up")
        await worker.wait_for("warm-up")
        yield worker
        nursery.cancel_scope.cancel()


def _sqlite_app_connection(path: str, mode: str) -> sqlite3.Connection:
    """An application's own connection: Python's default (legacy implicit
    transactions, as SQLAlchemy's pysqlite), or Django's (autocommit,
    ``isolation_level=None``, with BEGIN issued by ``atomic()``, and its
    ``detect_types``)."""
    if mode == "legacy":
        return sqlite3.connect(path)
    return sqlite3.connect(
        path,
        isolation_level=None,
        detect_types=sqlite3.PARSE_DECLTYPES | sqlite3.PARSE_COLNAMES,
        check_same_thread=False,
    )


# -- join: SQLite ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["legacy", "django"])
async def test_sqlite_join_commits_and_rolls_back_with_the_application(
    tmp_path: Path, mode: str
) -> None:
    path = str(tmp_path / "app.db")
    with alkstore.sync.open_sqlite(path) as store:
        async with open_async("sqlite", path) as other, running_worker(other, "jobs") as worker:
            app = _sqlite_app_connection(path, mode)
            app.row_factory = sqlite3.Row  # alkstore's rows come back as tuples anyway
            app.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)")
            app.commit()
            q = store.queue("jobs")
            # Rolled back: neither the order nor the job exists, nobody woke.
            if mode == "django":
                app.execute("BEGIN")  # what transaction.atomic() does
            app.execute("INSERT INTO orders (note) VALUES ('lost')")
            with store.join(app) as tx:
                lost = tx.enqueue("jobs", "lost")
                assert q.get_job(lost) is None  # not visible outside the app's transaction
            app.rollback()
            assert q.get_job(lost) is None
            assert app.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 0
            # Committed: both, and the worker wakes for it.
            if mode == "django":
                app.execute("BEGIN")
            app.execute("INSERT INTO orders (note) VALUES ('kept')")
            with store.join(app) as tx:
                kept = tx.enqueue("jobs", "kept")
                tx.publish("orders", {"note": "kept"})
            app.commit()
            await worker.wait_for("kept")
            assert "lost" not in worker.got
            assert [e.payload for e in store.stream("orders").read_since(0)] == [{"note": "kept"}]
            assert kept > 0
            app.close()


async def test_sqlite_join_in_legacy_mode_opens_the_transaction_python_would(
    tmp_path: Path,
) -> None:
    """With no transaction open yet, join opens the one Python's legacy
    mode would open before the next write: the application's commit() or
    rollback() decides."""
    path = str(tmp_path / "app.db")
    with alkstore.sync.open_sqlite(path) as store:
        app = sqlite3.connect(path)
        assert not app.in_transaction
        with store.join(app) as tx:
            job_id = tx.enqueue("jobs", 1)
        assert app.in_transaction
        app.rollback()
        assert store.get_job(job_id) is None
        with store.join(app) as tx:
            job_id = tx.enqueue("jobs", 2)
        app.commit()
        info = store.get_job(job_id)
        assert info is not None and info.payload == 2
        app.close()


def test_sqlite_join_refuses_an_autocommit_connection_with_no_transaction(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "app.db")
    with alkstore.sync.open_sqlite(path) as store:
        app = sqlite3.connect(path, isolation_level=None)
        with pytest.raises(UsageError, match="inside a transaction"), store.join(app):
            pytest.fail("joined a connection in autocommit mode")
        assert store.queue("jobs").stats().ready == 0
        app.close()


def test_sqlite_join_refuses_another_database_and_other_objects(tmp_path: Path) -> None:
    with alkstore.sync.open_sqlite(str(tmp_path / "app.db")) as store:
        other = sqlite3.connect(str(tmp_path / "other.db"))
        with pytest.raises(UsageError, match="database file"), store.join(other):
            pass
        memory = sqlite3.connect(":memory:")
        with pytest.raises(UsageError, match="database file"), store.join(memory):
            pass
        with pytest.raises(InvalidArgument), store.join("app.db"):
            pass
        other.close()
        memory.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_joined_transaction_is_the_applications(engine: str, location: str) -> None:
    with open_sync(engine, location) as store:
        app: Any = (
            sqlite3.connect(location) if engine == "sqlite" else psycopg.connect(PG_DSN)
        )
        with store.join(app) as tx:
            tx.enqueue("jobs", 1)
            with pytest.raises(UsageError, match="application's"):
                tx.commit()
            with pytest.raises(UsageError, match="application's"):
                tx.rollback()
        with pytest.raises(Closed):
            tx.enqueue("jobs", 2)
        app.rollback()
        assert store.queue("jobs").stats().ready == 0
        app.close()


# -- join: Postgres -------------------------------------------------------------------
async def test_postgres_join_commits_and_rolls_back_with_the_application() -> None:
    schema = _schema()
    with open_sync("postgres", schema) as store:
        async with open_async("postgres", schema) as other, running_worker(
            other, "jobs"
        ) as worker:
            q = store.queue("jobs")
            with psycopg.connect(PG_DSN) as app:
                app.execute(f'CREATE TABLE "{schema}".orders (id serial PRIMARY KEY, note text)')
                app.commit()
                app.execute(f"INSERT INTO \"{schema}\".orders (note) VALUES ('lost')")
                with store.join(app) as tx:
                    lost = tx.enqueue("jobs", "lost")
                    tx.notify("orders")
                app.rollback()
                assert q.get_job(lost) is None
                app.execute(f"INSERT INTO \"{schema}\".orders (note) VALUES ('kept')")
                with store.join(app) as tx:
                    tx.enqueue("jobs", "kept")
                app.commit()
                await worker.wait_for("kept")
                assert "lost" not in worker.got
                rows = app.execute(f'SELECT note FROM "{schema}".orders').fetchall()
                assert rows == [("kept",)]


def test_postgres_join_refuses_autocommit_and_async_connections() -> None:
    with open_sync("postgres", _schema()) as store:
        with (
            psycopg.connect(PG_DSN, autocommit=True) as app,
            pytest.raises(InvalidArgument, match="autocommit"),
            store.join(app),
        ):
            pass
        with pytest.raises(InvalidArgument, match="psycopg Connection"), store.join(object()):
            pass


# -- wakes ------------------------------------------------------------------------------
async def test_a_sync_enqueue_publish_and_notify_wake_async_consumers(
    engine: str, location: str
) -> None:
    with open_sync(engine, location) as store:
        async with (
            open_async(engine, location) as other,
            running_worker(other, "jobs") as worker,
            other.stream("events").subscribe("c", backstop=POLL) as events,
            other.listen("ch") as wakes,
        ):
            store.queue("jobs").enqueue("direct")
            await worker.wait_for("direct")
            with trio.fail_after(SOON):
                store.stream("events").publish("e1")
                event = await events.recv()
            assert event is not None and event.payload == "e1"
            store.notify("ch")
            assert await wakes.recv_timeout(SOON) == Wake("ch")
            with store.transaction() as tx:
                tx.enqueue("jobs", "in-tx")
                tx.notify("ch")
            await worker.wait_for("in-tx")
            assert await wakes.recv_timeout(SOON) == Wake("ch")


_PRODUCER = """
import sys
import alkstore.sync
engine, location, dsn = sys.argv[1:4]
if engine == "sqlite":
    opened = alkstore.sync.open_sqlite(location)
else:
    opened = alkstore.sync.open_postgres(
        dsn, options=alkstore.sync.PostgresOptions(schema=location)
    )
with opened as store:
    store.queue("jobs").enqueue("from another process")
    store.notify("ch")
"""


@pytest.mark.slow
async def test_a_sync_producer_in_another_process_wakes_a_worker(
    engine: str, location: str
) -> None:
    async with (
        open_async(engine, location) as store,
        running_worker(store, "jobs") as worker,
        store.listen("ch") as wakes,
    ):
        script = textwrap.dedent(_PRODUCER)
        await trio.run_process([sys.executable, "-c", script, engine, location, PG_DSN])
        await worker.wait_for("from another process")
        assert await wakes.recv_timeout(SOON) == Wake("ch")


# -- threads, transactions, closing ------------------------------------------------------
def test_threads_share_one_store(engine: str, location: str) -> None:
    before = set(threading.enumerate())
    with open_sync(engine, location) as store:
        ids: list[int] = []
        errors: list[BaseException] = []

        def produce(n: int) -> None:
            try:
                q = store.queue("jobs")
                for i in range(20):
                    if i % 5 == 0:
                        with store.transaction() as tx:
                            ids.append(tx.enqueue("jobs", [n, i]))
                    else:
                        ids.append(q.enqueue([n, i]))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=produce, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(set(ids)) == 120
        assert store.queue("jobs").stats().ready == 120
    assert set(threading.enumerate()) == before, "the store left a thread behind"


def test_a_blocking_result_wait_sees_a_cancel_of_its_job(engine: str, location: str) -> None:
    # The wait marks its job awaited, so a cancel without history is
    # recorded and raises, as it does for the async wait.
    with open_sync(engine, location) as store:
        q = store.queue("q")
        job_id = q.enqueue("x", delay=3600)
        timer = threading.Timer(0.3, lambda: q.cancel(job_id))
        timer.start()
        try:
            with pytest.raises(JobCancelled):
                q.result(job_id, timeout=SOON)
        finally:
            timer.join()


def test_the_store_s_own_methods_inside_its_transaction_are_refused(
    engine: str, location: str
) -> None:
    with open_sync(engine, location) as store:
        with store.transaction() as tx:
            tx.enqueue("jobs", "kept")
            with pytest.raises(UsageError, match="inside its transaction"):
                store.queue("jobs").enqueue("refused")
            with pytest.raises(UsageError, match="inside its transaction"), store.transaction():
                pass
        assert store.queue("jobs").stats().ready == 1


def test_a_closed_store_refuses_everything(engine: str, location: str) -> None:
    with open_sync(engine, location) as store:
        q, s, ob = store.queue("q"), store.stream("s"), store.outbox("o")
        q.enqueue(1)
    assert store.closed
    calls = [
        lambda: q.enqueue(1), lambda: q.enqueue_batch([1]), lambda: q.stats(),
        lambda: q.get_job(1), lambda: q.dead_letters(), lambda: q.list_jobs(),
        lambda: s.publish(1), lambda: s.read_since(0), lambda: s.head_offset(),
        lambda: store.notify("c"), lambda: store.get_job(1), lambda: ob.enqueue(1),
    ]  # fmt: skip
    for call in calls:
        with pytest.raises(Closed):
            call()
    with pytest.raises(Closed), store.transaction():
        pass
    store.close()  # idempotent


def test_a_read_only_store_refuses_every_write_before_any_io(
    engine: str, location: str
) -> None:
    with open_sync(engine, location) as writer:
        job = writer.queue("q").enqueue("kept")
        writer.stream("s").publish("e")
    with open_sync(engine, location, read_only=True) as reader:
        q, s = reader.queue("q"), reader.stream("s")
        writes = {
            "enqueue": lambda: q.enqueue(1), "enqueue_batch": lambda: q.enqueue_batch([1]),
            "cancel": lambda: q.cancel(job), "requeue_dead": lambda: q.requeue_dead(job),
            "purge_dead": lambda: q.purge_dead(), "pause": lambda: q.pause(),
            "resume": lambda: q.resume(), "publish": lambda: s.publish(1),
            "publish_with_key": lambda: s.publish_with_key("k", 1),
            "save_offset": lambda: s.save_offset("c", 1), "notify": lambda: reader.notify("c"),
            "outbox.enqueue": lambda: reader.outbox("o").enqueue(1),
        }  # fmt: skip
        for what, write in writes.items():
            with pytest.raises(UsageError, match="opened read-only"):
                write()
            assert what
        with pytest.raises(UsageError, match="read-only"), reader.transaction():
            pass
        with pytest.raises(UsageError, match="read-only"), reader.join(object()):
            pass
        assert q.stats().ready == 1
        assert [e.payload for e in s.read_since(0)] == ["e"]
        info = reader.get_job(job)
        assert info is not None and info.state == "pending"


# -- the engines' errors, mapped ---------------------------------------------------------
def test_sqlite_busy_is_a_transaction_conflict_as_on_the_async_stores(tmp_path: Path) -> None:
    path = str(tmp_path / "app.db")
    options = alkstore.sync.SqliteOptions(busy_timeout=0.05)
    with alkstore.sync.open_sqlite(path, options=options) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(TransactionConflict) as caught:
            store.queue("jobs").enqueue(1)
        assert isinstance(caught.value.__cause__, sqlite3.Error)
        with pytest.raises(TransactionConflict), store.transaction():
            pass
        holder.execute("ROLLBACK")
        assert store.queue("jobs").enqueue(1) > 0  # the store goes on
        holder.close()


def test_a_failing_statement_is_a_database_error_and_the_transaction_goes_on(
    engine: str, location: str
) -> None:
    with open_sync(engine, location) as store:
        with store.transaction() as tx:
            tx.enqueue("jobs", "kept")
            with pytest.raises(DatabaseError) as caught:
                tx.execute("SELECT * FROM no_such_table")
            cause = caught.value.__cause__
            assert isinstance(cause, sqlite3.Error if engine == "sqlite" else psycopg.Error)
            tx.enqueue("jobs", "also kept")
        assert store.queue("jobs").stats().ready == 2


def test_postgres_store_holds_one_connection_and_closes_it() -> None:
    name = f"alk_sync_{uuid.uuid4().hex[:8]}"
    dsn = psycopg.conninfo.make_conninfo(PG_DSN, application_name=name)

    def connections() -> int:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()
        assert row is not None
        return int(row[0])

    options = alkstore.sync.PostgresOptions(schema=_schema())
    with alkstore.sync.open_postgres(dsn, options=options) as store:
        store.queue("jobs").enqueue(1)
        assert connections() == 1
    assert connections() == 0


def test_a_sync_listing_reads_one_snapshot_while_its_jobs_move(
    engine: str, location: str
) -> None:
    """The blocking store's reads run in one snapshot too (psycopg's
    REPEATABLE READ, READ ONLY on Postgres): thousands of listings while a
    worker in another thread keeps moving the same jobs between pending,
    processing and dead never list a job twice or leave one out."""
    with open_sync(engine, location) as store:
        q = store.queue("moving")
        everyone = set(q.enqueue_batch(list(range(50))))
        stop = threading.Event()
        moves: list[int] = []

        async def mover() -> None:
            async with open_async(engine, location) as moving:
                aq = moving.queue("moving", max_attempts=1_000_000)
                while not stop.is_set():
                    for i, job in enumerate(await aq.claim_batch("mover", 10)):
                        if i % 2:
                            await job.release()
                        else:
                            await job.fail("moved")
                            await aq.requeue_dead(job.id)
                        moves.append(job.id)

        errors: list[BaseException] = []

        def run_mover() -> None:
            try:
                trio.run(mover)
            except BaseException as exc:  # reported by the test thread
                errors.append(exc)

        thread = threading.Thread(target=run_mover)
        thread.start()
        try:
            for _ in range(1000):
                listed = [job.id for job in q.list_jobs(limit=1000)]
                assert len(listed) == len(set(listed)), f"listed twice: {sorted(listed)}"
                assert set(listed) == everyone, f"left out: {sorted(everyone - set(listed))}"
        finally:
            stop.set()
            thread.join(timeout=SOON)
        assert not errors and not thread.is_alive()
        assert len(moves) > 100  # the jobs really moved while they were listed
