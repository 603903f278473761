"""Opening and closing stores: concurrent opens, durability across reopen, Closed."""

from __future__ import annotations

from pathlib import Path

import pytest
import sniffio

from alkstore import Closed, DatabaseError, ManualClock, QueueStats, Store
from tests.backends import Backend

from . import aio
from .helpers import SOON


async def test_each_backend_runs_on_its_own_driver(backend: Backend, store: Store) -> None:
    """The suite itself: a backend's tests run under its async library and driver."""
    assert sniffio.current_async_library() == backend.driver
    assert store._core.runtime.name == backend.driver


async def test_several_stores_can_open_a_fresh_database_at_once(
    backend: Backend, tmp_path: Path, clock: ManualClock
) -> None:
    # A few rounds on fresh databases: the first-open race is timing-dependent.
    for _ in range(5):
        location = backend.new_location(tmp_path)
        opened: list[int] = []

        async def open_and_use(
            i: int, location: str = location, opened: list[int] = opened
        ) -> None:
            async with backend.open(location, clock=clock) as s:
                await s.queue("jobs").enqueue(i)
                opened.append(i)

        async with aio.fail_after(SOON * 2), aio.open_task_group() as nursery:
            for i in range(3):
                nursery.start_soon(open_and_use, i)
        assert sorted(opened) == [0, 1, 2]
        async with backend.open(location, clock=clock) as s:
            assert await s.queue("jobs").stats() == QueueStats(3, 0, 0, 0)


async def test_everything_survives_closing_and_reopening(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock) as s:
        job_id = await s.queue("jobs").enqueue({"n": 1})
        await s.stream("s").publish("e1")
        await s.stream("s").save_offset("c", 1)
        lock = await s.try_lock("res", "alice", 60)
        assert lock is not None
    async with backend.open(location, clock=clock) as s:
        got = await s.queue("jobs").get_job(job_id)
        assert got is not None and got.payload == {"n": 1}
        assert [e.payload for e in await s.stream("s").read_since(0)] == ["e1"]
        assert await s.stream("s").get_offset("c") == 1
        assert await s.stream("s").publish("e2") == 2
        assert await s.try_lock("res", "bob", 60) is None


async def test_a_job_held_by_a_store_that_went_away_is_reclaimed(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    """At-least-once: a claim whose worker vanished lapses and the job runs again."""
    async with backend.open(location, clock=clock) as s:
        job_id = await s.queue("jobs", visibility_timeout=30).enqueue("work")
        job = await s.queue("jobs", visibility_timeout=30).claim_one("doomed")
        assert job is not None
    async with backend.open(location, clock=clock) as s:
        q = s.queue("jobs", visibility_timeout=30)
        assert await q.claim_one("survivor") is None
        clock.advance(31)
        again = await q.claim_one("survivor")
        assert again is not None and again.id == job_id and again.attempts == 2
        assert await again.ack() is True


async def test_operations_on_a_closed_store_raise_closed(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock) as s:
        q = s.queue("jobs")
        await q.enqueue(1)
        job = await q.claim_one("w")
        lock = await s.try_lock("res", "alice", 60)
        assert job is not None and lock is not None
    assert s.closed
    stream = s.stream("s")
    for op in (
        lambda: s.notify("ch"),
        lambda: q.enqueue(2),
        lambda: q.claim_one("w"),
        lambda: q.stats(),
        lambda: q.get_job(job.id),
        lambda: q.sweep_expired(),
        lambda: q.dead_letters(),
        lambda: job.ack(),
        lambda: job.heartbeat(),
        lambda: stream.publish(1),
        lambda: stream.read_since(0),
        lambda: stream.get_offset("c"),
        lambda: s.try_lock("res", "bob", 10),
        lambda: lock.renew(10),
        lambda: lock.release(),
        lambda: s.outbox("o").run_once(_never),
    ):
        with pytest.raises(Closed):
            await op()
    with pytest.raises(Closed):
        async with s.transaction():
            pytest.fail("a transaction opened on a closed store")


async def _never(payload: object) -> None:
    raise AssertionError("delivered on a closed store")


async def test_entering_a_listener_on_a_closed_store_raises_closed(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with backend.open(location, clock=clock) as s:
        pass
    with pytest.raises(Closed):
        async with s.listen("ch"):
            pytest.fail("a listener entered on a closed store")
    with pytest.raises(Closed):
        async with s.stream("s").subscribe("c"):
            pytest.fail("a subscriber entered on a closed store")


@pytest.mark.parametrize("garbage", ["garbage", "", "1.5", "-1", "99999999999999999999"])
async def test_a_garbled_schema_version_is_a_database_error(
    backend: Backend, location: str, garbage: str
) -> None:
    """Something else wrote the schema-version row: opening refuses with a
    DatabaseError naming the value (was a raw ValueError)."""
    async with backend.open(location):
        pass
    if backend.engine == "sqlite":
        import sqlite3

        conn = sqlite3.connect(location)
        try:
            with conn:  # commits; closing is separate
                conn.execute("UPDATE __alkstore_meta SET value = ? WHERE key = 'schema_version'",
                             (garbage,))  # fmt: skip
        finally:
            conn.close()
    else:
        import psycopg

        from tests.backends import PG_DSN

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'UPDATE "{location}".meta SET value = %s WHERE key = %s',
                         (garbage, "schema_version"))  # fmt: skip
    with pytest.raises(DatabaseError, match="schema version"):
        async with backend.open(location):
            pass


async def test_a_database_of_an_earlier_version_is_migrated_on_open(
    backend: Backend, location: str
) -> None:
    """A database built by the released version-1 migration alone (before
    the queues table that pausing needs, and the later columns) is brought up
    to date when opened: its job survives and pausing works."""
    insert = (
        "INSERT INTO {jobs} (queue, payload, priority, max_attempts, run_at, created_at,"
        " visible_at) VALUES ('q', '\"kept\"', 0, 3, 0, 0, 0)"
    )
    if backend.engine == "sqlite":
        import sqlite3

        from alkstore.engines import sqlite as engine

        conn = sqlite3.connect(location)
        try:
            with conn:
                for sql in dict(engine.MIGRATIONS)[1]:
                    conn.execute(sql)
                conn.execute("CREATE TABLE __alkstore_meta (key TEXT PRIMARY KEY, value TEXT)")
                conn.execute("INSERT INTO __alkstore_meta VALUES ('schema_version', '1')")
                conn.execute(insert.format(jobs="__alkstore_jobs"))
        finally:
            conn.close()
    else:
        import psycopg

        from alkstore.engines import postgres as engine
        from tests.backends import PG_DSN

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{location}"')
            for sql in dict(engine.migrations(location))[1]:
                conn.execute(sql)
            conn.execute(f'CREATE TABLE "{location}".meta (key text PRIMARY KEY, value text)')
            conn.execute(f"INSERT INTO \"{location}\".meta VALUES ('schema_version', '1')")
            conn.execute(insert.format(jobs=f'"{location}".jobs'))
    async with backend.open(location) as store:
        q = store.queue("q")
        await q.pause()
        assert await q.claim_one("w") is None
        await q.resume()
        job = await q.claim_one("w")
        assert job is not None and job.payload == "kept"
