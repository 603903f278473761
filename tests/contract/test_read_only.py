"""Read-only stores (contract extension, on every backend): a store opened
with ``read_only=True`` reads everything a writer wrote, refuses every write
with ``UsageError`` before any IO, never creates, migrates or changes the
database (SQLite: ``mode=ro``; Postgres: read-only sessions, which refuse a
write the store let through), and refuses a schema of another version with
``SchemaMismatch``."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from alkstore import (
    DatabaseError,
    InvalidArgument,
    Job,
    ManualClock,
    SchemaMismatch,
    Store,
    UsageError,
)
from tests.backends import PG_DSN, Backend

from . import aio
from .helpers import SOON, execute, table


async def test_a_read_only_store_reads_what_a_writer_wrote(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock) as writer:
        q = writer.queue("q")
        job_id = await q.enqueue({"n": 1})
        await writer.stream("s").publish("e1")
        await writer.stream("s").save_offset("c", 1)
        assert await writer.try_lock("l", "alice", 60) is not None
        await writer.schedule("tick", "q", "@every 1h")
        async with backend.open(location, clock=clock, read_only=True) as reader:
            assert reader.read_only is True and writer.read_only is False
            assert await reader.queue("q").stats() == await q.stats()
            assert await reader.queue("q").get_job(job_id) == await q.get_job(job_id)
            assert await reader.get_job(job_id) == await q.get_job(job_id)
            assert await reader.list_queues() == await writer.list_queues()
            assert await reader.queue("q").list_jobs() == await q.list_jobs()
            assert [e.payload for e in await reader.stream("s").read_since(0)] == ["e1"]
            assert await reader.stream("s").get_offset("c") == 1
            assert await reader.stream("s").read_from_consumer("c") == []
            assert await reader.stream("s").head_offset() == 1
            assert await reader.stream("s").info() == await writer.stream("s").info()
            assert await reader.queue("q").next_due() == await q.next_due()
            assert await reader.queue("q").is_paused() is False
            assert await reader.queue("q").dead_letters() == []
            assert await reader.outbox("o").stats() == await writer.outbox("o").stats()
            assert await reader.list_streams() == await writer.list_streams()
            assert await reader.list_locks() == await writer.list_locks()
            assert await reader.list_schedules() == await writer.list_schedules()
            # A later commit is seen by the next read.
            await q.enqueue({"n": 2})
            assert (await reader.queue("q").stats()).ready == 2


async def test_a_read_only_store_hears_a_writers_wakes_and_events(
    backend: Backend, location: str
) -> None:
    """The watcher (SQLite) and the listener (Postgres) only read: a
    read-only store has them, so its receivers hear other stores' commits."""
    async with (
        backend.open(location) as writer,
        backend.open(location, read_only=True) as reader,
        reader.listen("ch") as wakes,
        reader.stream("s").subscribe("c") as events,
    ):
        await writer.notify("ch")
        await writer.stream("s").publish("hello")
        async with aio.fail_after(SOON):
            wake = await wakes.recv()
            event = await events.recv()
        assert wake is not None and wake.channel == "ch"
        assert event is not None and event.payload == "hello"
        with pytest.raises(UsageError, match="read-only"):
            await events.save_offset()


def _writes(store: Store) -> Iterator[tuple[str, Callable[[], Awaitable[Any]]]]:
    q, s = store.queue("q"), store.stream("s")

    async def handler(job: Job) -> None:
        raise AssertionError("a read-only store claimed a job")

    yield "enqueue", lambda: q.enqueue(1)
    yield "enqueue_batch", lambda: q.enqueue_batch([1, 2])
    yield "claim", lambda: q.claim_one("w")
    yield "ack_batch", lambda: q.ack_batch([1], "w")
    yield "cancel", lambda: q.cancel(1)
    yield "sweep", lambda: q.sweep_expired()
    yield "pause", lambda: q.pause()
    yield "requeue", lambda: q.requeue_dead(1)
    yield "purge", lambda: q.purge_dead()
    yield "work", lambda: q.work(handler)
    yield "publish", lambda: s.publish(1)
    yield "save_offset", lambda: s.save_offset("c", 1)
    yield "trim", lambda: s.trim_to(1)
    yield "notify", lambda: store.notify("ch")
    yield "try_lock", lambda: store.try_lock("l", "o", 10)
    yield "schedule", lambda: store.schedule("n", "q", "@every 1s")
    yield "unschedule", lambda: store.unschedule("n")
    yield "pause_schedule", lambda: store.pause_schedule("n")
    yield "resume_schedule", lambda: store.resume_schedule("n")
    yield "run_schedules", lambda: store.run_schedules()
    yield "run_scheduler", lambda: store.run_scheduler()
    yield "outbox", lambda: store.outbox("o").enqueue(1)
    yield "deliver", lambda: store.outbox("o").run_once(_deliver)


async def _deliver(payload: object) -> None:
    raise AssertionError("a read-only store delivered a message")


async def test_every_write_is_refused_and_nothing_changes(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock) as writer:
        await writer.queue("q").enqueue("kept")
        before = (await writer.list_queues(), await writer.list_streams(),
                  await writer.list_locks(), await writer.list_schedules())  # fmt: skip
    async with backend.open(location, clock=clock, read_only=True) as reader:
        for what, write in _writes(reader):
            with pytest.raises(UsageError, match="opened read-only"):
                await write()
            assert what  # (named in the failure output)
        with pytest.raises(UsageError, match="read-only"):
            async with reader.hold_lock("l", "o", 10):
                pytest.fail("held a lock on a read-only store")
        with pytest.raises(UsageError, match="read-only"):
            async with reader.transaction():
                pytest.fail("a transaction opened on a read-only store")
    async with backend.open(location, clock=clock) as writer:
        after = (await writer.list_queues(), await writer.list_streams(),
                 await writer.list_locks(), await writer.list_schedules())  # fmt: skip
    assert after == before


async def test_the_database_refuses_a_write_the_store_let_through(
    backend: Backend, location: str
) -> None:
    """Below the store's own refusal: SQLite's ``mode=ro`` connections and
    Postgres's read-only sessions refuse the write themselves, and the
    refusal is a ``DatabaseError`` (the driver's error as its cause)."""
    async with backend.open(location):
        pass
    async with backend.open(location, read_only=True) as reader:

        def pause_everything() -> Iterator[Any]:
            yield reader._core.dialect.set_paused("q", True)  # a write, not marked as a read

        with pytest.raises(DatabaseError, match=r"read-?only") as caught:
            await reader._core.executor.run(pause_everything())
        assert caught.value.__cause__ is not None
        assert await reader.queue("q").is_paused() is False


async def test_a_read_only_store_creates_nothing(
    backend: Backend, location: str, tmp_path: Path
) -> None:
    with pytest.raises((DatabaseError, SchemaMismatch)) as caught:
        async with backend.open(location, read_only=True):
            pytest.fail("opened a database that does not exist")
    if backend.engine == "sqlite":
        assert "no such file" in str(caught.value)
        assert _files(tmp_path) == []
    else:
        assert isinstance(caught.value, SchemaMismatch) and caught.value.found == 0
        assert "no alkstore schema" in str(caught.value)
        assert _pg_tables(location) is None  # the schema was not created


async def test_inspecting_a_database_without_alkstore_changes_nothing(
    backend: Backend, location: str, tmp_path: Path
) -> None:
    """An application's own database, never opened by alkstore: refused with
    ``SchemaMismatch`` (found 0), and left exactly as it was: on SQLite the
    same bytes and no new file beside it (no journal, no WAL), on Postgres
    the same tables."""
    if backend.engine == "sqlite":
        import sqlite3

        conn = sqlite3.connect(location)
        with conn:
            conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)")
            conn.execute("INSERT INTO orders VALUES (1, 'first')")
        conn.close()
    else:
        _pg(f'CREATE SCHEMA "{location}"', f'CREATE TABLE "{location}".orders (id int)')
    before = _database(backend, location, tmp_path)
    with pytest.raises(SchemaMismatch, match="no alkstore schema") as caught:
        async with backend.open(location, read_only=True):
            pytest.fail("opened a database without an alkstore schema")
    assert (caught.value.found, caught.value.expected) == (0, await _current_version(backend))
    assert _database(backend, location, tmp_path) == before


async def test_an_alkstore_file_read_only_keeps_its_bytes(
    backend: Backend, location: str, tmp_path: Path
) -> None:
    """The database file itself is never written. (SQLite: reading a WAL
    database takes its -wal and -shm files, which a reader creates, empty of
    commits, when no other connection has them open; Postgres: the tables
    keep their rows.)"""
    async with backend.open(location) as writer:
        await writer.queue("q").enqueue("kept")
    before = _database(backend, location, tmp_path)
    async with backend.open(location, read_only=True) as reader:
        assert (await reader.queue("q").stats()).ready == 1
        await reader.list_queues()
        assert _database(backend, location, tmp_path)[0] == before[0]
    after = _database(backend, location, tmp_path)
    assert after[0] == before[0]
    if backend.engine == "sqlite":
        name = Path(location).name
        assert set(after[1]) - {name} <= {f"{name}-wal", f"{name}-shm"}
        assert _wal_is_empty(location)
    async with backend.open(location) as writer:
        assert (await writer.queue("q").stats()).ready == 1


@pytest.mark.producer
async def test_a_schema_of_another_version_is_a_schema_mismatch(
    backend: Backend, location: str
) -> None:
    current = await _current_version(backend)
    async with backend.open(location) as store:
        meta = table(store, "meta")
        await execute(store, f"UPDATE {meta} SET value = {{}}", str(current + 1))
    for read_only in (True, False):  # a newer schema: neither may open it
        with pytest.raises(SchemaMismatch, match="upgrade alkstore") as caught:
            async with backend.open(location, read_only=read_only):
                pytest.fail("opened a newer schema")
        assert (caught.value.found, caught.value.expected) == (current + 1, current)
    assert isinstance(caught.value, DatabaseError)


async def test_read_only_never_migrates_an_older_schema(
    backend: Backend, location: str
) -> None:
    current = await _current_version(backend)
    async with backend.open(location) as store:
        await execute(store, f"UPDATE {table(store, 'meta')} SET value = {{}}", "1")
    with pytest.raises(SchemaMismatch, match="alkstore migrate") as caught:
        async with backend.open(location, read_only=True):
            pytest.fail("opened an older schema read-only")
    assert (caught.value.found, caught.value.expected) == (1, current)
    assert await _stored_version(backend, location) == "1"


@pytest.mark.producer
async def test_read_only_is_a_bool(backend: Backend, location: str, tmp_path: Path) -> None:
    for wrong in ("yes", 1, None):
        with pytest.raises(InvalidArgument, match="read_only"):
            async with backend.open(location, read_only=wrong):
                pytest.fail("opened with a read_only that is not a bool")
    if backend.engine == "sqlite":
        with pytest.raises(InvalidArgument, match="existing database file"):
            async with backend.open(":memory:", read_only=True):
                pytest.fail("opened a private memory database read-only")
        assert os.listdir(tmp_path) == []
    else:
        assert _pg_tables(location) is None


# -- helpers ---------------------------------------------------------------------


def _files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


def _database(backend: Backend, location: str, tmp_path: Path) -> tuple[Any, list[str]]:
    """What a read must not change. SQLite: the file's bytes, and the files
    in its directory; Postgres: the schema's tables and the jobs' rows."""
    if backend.engine == "sqlite":
        return Path(location).read_bytes(), _files(tmp_path)
    tables = _pg_tables(location)
    rows: list[tuple[Any, ...]] = []
    if tables and "jobs" in tables:
        rows = _pg(f'SELECT * FROM "{location}".jobs ORDER BY id')
    return (tables, rows), []


def _wal_is_empty(location: str) -> bool:
    """No commit in the WAL: the file is absent or empty."""
    wal = Path(location + "-wal")
    return not wal.exists() or wal.stat().st_size == 0


async def _current_version(backend: Backend) -> int:
    """The schema version a store of this alkstore creates."""
    return int(await _stored_version(backend, None))


async def _stored_version(backend: Backend, location: str | None) -> str:
    """The version stored in ``location``'s schema (a fresh one's if None)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        at = location if location is not None else backend.new_location(Path(tmp))
        if location is None:
            async with backend.open(at):
                pass
        if backend.engine == "sqlite":
            import sqlite3

            conn = sqlite3.connect(f"file:{at}?mode=ro", uri=True)
            try:
                (value,) = conn.execute(
                    "SELECT value FROM __alkstore_meta WHERE key = 'schema_version'"
                ).fetchone()
            finally:
                conn.close()
            return str(value)
        rows = _pg(f"SELECT value FROM \"{at}\".meta WHERE key = 'schema_version'")
        return str(rows[0][0])


def _pg(*statements: str) -> list[tuple[Any, ...]]:
    import psycopg

    rows: list[tuple[Any, ...]] = []
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for sql in statements:
            cursor = conn.execute(sql)
            rows = cursor.fetchall() if cursor.description else []
    return rows


def _pg_tables(schema: str) -> list[str] | None:
    """The tables of Postgres schema ``schema``; None when it does not exist."""
    if not _pg(f"SELECT 1 FROM pg_namespace WHERE nspname = '{schema}'"):
        return None
    rows = _pg(f"SELECT tablename FROM pg_tables WHERE schemaname = '{schema}' ORDER BY 1")
    return [r[0] for r in rows]
