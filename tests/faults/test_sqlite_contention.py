"""SQLite under real write contention from several processes (issue 4: real
faults on real engines).

Every process opens its own store on one file; SQLite's file lock, not the
in-process writer slot, is what they contend on. The lock holder in the
busy-timeout tests is plain ``sqlite3`` in another process.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
import trio

from alkstore import DatabaseError, Store
from alkstore.io_trio import SqliteOptions, open_sqlite

from .contender import QUEUE, VISIBILITY, Tally, contend
from .procs import STARTUP, no_thread_leak, process, read_line

pytestmark = pytest.mark.slow

PROCESSES = 4
TASKS = 3  # concurrent tasks per process
SECONDS = 3.0  # of contention, once every process is ready
DEFAULT_BUSY = SqliteOptions().busy_timeout

# A plain sqlite3 client that takes the write lock (BEGIN IMMEDIATE), says
# "locked", holds it for argv[2] seconds or until stdin closes, rolls back.
BLOCKER = """
import select, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
select.select([sys.stdin], [], [], float(sys.argv[2]))
conn.execute("ROLLBACK")
conn.close()
print("released", flush=True)
"""


async def test_processes_contending_for_the_write_lock_process_every_job_exactly_once(
    tmp_path: Path,
) -> None:
    """Five processes on one file: only DatabaseError (after busy_timeout), every job once.

    Each process (four subprocesses and this one) has its own store and
    several tasks enqueueing, claiming and acking as fast as they can; at the
    end every job whose enqueue returned an id was claimed exactly once and
    nothing else was.
    """
    path = str(tmp_path / "contended.db")
    folder = tmp_path / "tallies"
    folder.mkdir()
    tags = [f"p{i}" for i in range(PROCESSES)]
    mine = Tally("main")
    with no_thread_leak(), trio.fail_after(STARTUP + 60):
        async with trio.open_nursery() as nursery:
            # All processes open the fresh file at once (creating and
            # migrating it concurrently), then wait for "go".
            procs = []
            for tag in tags:
                argv = ["-m", "tests.faults.contender", path, tag, str(SECONDS), str(TASKS)]
                procs.append(await nursery.start(_run_process, [*argv, str(folder)]))
            async with open_sqlite(path) as store:
                with trio.fail_after(STARTUP):
                    while not all((folder / f"{t}.ready").exists() for t in tags):
                        assert all(p.returncode is None for p in procs), "a contender died"
                        await trio.sleep(0.01)
                (folder / "go").touch()
                await contend(store, mine, SECONDS, TASKS)
            with trio.fail_after(STARTUP):
                for proc in procs:
                    assert await proc.wait() == 0

        tallies = [mine] + [
            Tally(**orjson.loads((folder / f"{t}.json").read_bytes())) for t in tags
        ]
        # Nothing but DatabaseError escaped, and only after the busy timeout.
        assert [e for t in tallies for e in t.raw_errors] == []
        for t in tallies:
            for op, took, message, cause in t.database_errors:
                assert took >= DEFAULT_BUSY * 0.9, (t.tag, op, took, message)
                assert cause.startswith("sqlite3."), (t.tag, op, message, cause)
        # Real contention: every process got work done.
        assert all(len(t.enqueued) >= 5 for t in tallies), [len(t.enqueued) for t in tallies]

        enqueued = {job_id: token for t in tallies for job_id, token in t.enqueued}
        assert len(enqueued) == sum(len(t.enqueued) for t in tallies), "an id returned twice"
        failed_tokens = {token for t in tallies for token in t.enqueue_failed}
        claimed = Counter(job_id for t in tallies for job_id in t.claimed)
        acked = Counter(job_id for t in tallies for job_id in t.acked)

        # Drain what is left, then account for every job.
        async with open_sqlite(path) as store:
            q = store.queue(QUEUE, visibility_timeout=VISIBILITY)
            drained: dict[int, str] = {}
            while jobs := await q.claim_batch("drain", 500):
                for job in jobs:
                    drained[job.id] = job.payload["token"]
                assert await q.ack_batch([j.id for j in jobs], "drain") == len(jobs)
            stats = await q.stats()
        assert set(drained.values()).isdisjoint(failed_tokens)
        assert all(enqueued.get(job_id) == token for job_id, token in drained.items())
        processed = claimed + Counter(drained)
        assert set(processed) == set(enqueued), "a job lost, or one nobody enqueued"
        assert max(processed.values()) == 1, "a job delivered twice"
        assert max(acked.values(), default=1) == 1
        failed_acks = sum(1 for t in tallies for e in t.database_errors if e[0] == "ack")
        assert len(claimed) - len(acked) == failed_acks
        assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (
            0, 0, failed_acks, 0,
        )  # fmt: skip


async def _run_process(
    argv: list[str], task_status: trio.TaskStatus[trio.Process] = trio.TASK_STATUS_IGNORED
) -> None:
    async with process(argv) as proc:
        task_status.started(proc)
        await proc.wait()


async def test_a_writer_blocked_past_busy_timeout_gets_database_error_then_recovers(
    tmp_path: Path,
) -> None:
    """Write lock held past busy_timeout: DatabaseError after about busy_timeout, then usable.

    Reads go on meanwhile (WAL); no failed write leaves anything behind.
    """
    busy = 1.0
    path = str(tmp_path / "blocked.db")
    options = SqliteOptions(busy_timeout=busy)
    with no_thread_leak(), trio.fail_after(STARTUP + 30):
        async with open_sqlite(path, options=options) as store:
            q = store.queue("q")
            before = await q.enqueue({"token": "before"})
            argv = ["-c", BLOCKER, path, "60"]
            async with process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as blocker:
                assert blocker.stdout is not None and blocker.stdin is not None
                assert await read_line(blocker.stdout) == "locked"

                # One write alone, then several at once (one group commit).
                errors = [await _timed_failure(q.enqueue({"token": "blocked-0"}))]
                async with trio.open_nursery() as nursery:
                    for i in range(1, 4):
                        nursery.start_soon(_collect, errors, q.enqueue({"token": f"blocked-{i}"}))
                    nursery.start_soon(_collect, errors, q.claim_batch("w", 5))
                    nursery.start_soon(_collect, errors, _in_transaction(store))
                for took, error in errors:
                    assert isinstance(error, DatabaseError), error
                    assert isinstance(error.__cause__, sqlite3.OperationalError), error.__cause__
                    assert "locked" in str(error), error
                    assert busy * 0.9 <= took <= busy + 4.0, took

                # Readers are not blocked by a writer (WAL): quick, and correct,
                # even while this store's own writes wait for the lock.
                started = time.monotonic()
                async with trio.open_nursery() as nursery:
                    waiting: list[tuple[float, BaseException | None]] = []
                    nursery.start_soon(_collect, waiting, q.enqueue({"token": "blocked-4"}))
                    await trio.sleep(0.05)  # the writer slot is stuck in BEGIN IMMEDIATE
                    for _ in range(3):
                        assert (await q.stats()).ready == 1
                        assert (await q.get_job(before)) is not None
                        assert await store.stream("s").read_since(0) == []
                        assert await store.stream("s").get_offset("c") == 0
                    read_took = time.monotonic() - started
                assert read_took < busy, read_took
                assert isinstance(waiting[0][1], DatabaseError)

                # Opening the file takes no write lock when its schema is current.
                took, error = await _timed_failure(_open_and_close(path, options))
                assert error is None, error
                assert took < busy, took

                await blocker.stdin.aclose()  # the blocker rolls back and exits
                assert await read_line(blocker.stdout) == "released"
                assert await blocker.wait() == 0

            # Fully usable again, and no failed write left anything behind.
            after = await q.enqueue({"token": "after"})
            jobs = await q.claim_batch("w", 10)
            assert sorted((j.id, j.payload["token"]) for j in jobs) == [
                (before, "before"),
                (after, "after"),
            ]
            assert await q.ack_batch([before, after], "w") == 2
            async with store.transaction() as tx:
                await tx.enqueue("q", {"token": "tx"})
            stats = await q.stats()
            assert (stats.ready, stats.processing, stats.dead) == (1, 0, 0)


async def test_a_writer_blocked_shorter_than_busy_timeout_waits_and_succeeds(
    tmp_path: Path,
) -> None:
    """Write lock held for less than busy_timeout: the write waits for it and succeeds."""
    path = str(tmp_path / "briefly.db")
    hold = 0.5
    with no_thread_leak(), trio.fail_after(STARTUP + 30):
        async with open_sqlite(path) as store:
            q = store.queue("q")
            argv = ["-c", BLOCKER, path, str(hold)]
            async with process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as blocker:
                assert blocker.stdout is not None
                assert await read_line(blocker.stdout) == "locked"
                started = time.monotonic()
                job_id = await q.enqueue({"token": "waited"})
                took = time.monotonic() - started
                assert await blocker.wait() == 0
            assert took < DEFAULT_BUSY, took
            job = await q.claim_one("w")
            assert job is not None and job.id == job_id
            assert await job.ack()


async def _timed_failure(call: object) -> tuple[float, BaseException | None]:
    started = time.monotonic()
    try:
        await call  # type: ignore[misc]
    except Exception as exc:  # the caller asserts on its type
        return time.monotonic() - started, exc
    return time.monotonic() - started, None


async def _collect(out: list[tuple[float, BaseException | None]], call: object) -> None:
    out.append(await _timed_failure(call))


async def _in_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.enqueue("q", {"token": "blocked-tx"})


async def _open_and_close(path: str, options: SqliteOptions) -> None:
    async with open_sqlite(path, options=options):
        pass


READER = """
import sys, time, trio
from alkstore.io_trio import SqliteOptions, open_sqlite

async def main(path, seconds):
    failures, reads = [], 0
    async with open_sqlite(path, options=SqliteOptions(busy_timeout=1.0)) as store:
        stream, q = store.stream("s"), store.queue("contended")
        deadline = time.monotonic() + seconds

        async def reader():
            nonlocal reads
            while time.monotonic() < deadline:
                for call in (lambda: stream.read_since(0, 10), lambda: stream.get_offset("c"),
                             q.stats):
                    try:
                        await call()
                        reads += 1
                    except Exception as exc:
                        failures.append(repr(exc))

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(reader)
    print(reads, len(failures), failures[:3], flush=True)

trio.run(main, sys.argv[1], float(sys.argv[2]))
"""


async def test_reads_never_fail_on_the_write_lock_under_writer_processes(
    tmp_path: Path,
) -> None:
    """Four processes write as fast as they can, and a fifth takes the write
    lock for 2 s at a time, while another process reads (three concurrent
    tasks of read_since/get_offset/stats) with a 1 s busy timeout: every
    read succeeds, none waits for the write lock."""
    path = str(tmp_path / "readers.db")
    folder = tmp_path / "tallies"
    folder.mkdir()
    async with open_sqlite(path):
        pass  # schema in place
    tags = [f"w{i}" for i in range(PROCESSES)]
    with no_thread_leak(), trio.fail_after(STARTUP + 60):
        async with trio.open_nursery() as nursery:
            procs = []
            for tag in tags:
                argv = ["-m", "tests.faults.contender", path, tag, str(SECONDS), str(TASKS)]
                procs.append(await nursery.start(_run_process, [*argv, str(folder)]))
            with trio.fail_after(STARTUP):
                while not all((folder / f"{t}.ready").exists() for t in tags):
                    assert all(p.returncode is None for p in procs), "a writer died"
                    await trio.sleep(0.01)
            (folder / "go").touch()
            async with trio.open_nursery() as blocking:
                blocking.start_soon(_hold_lock_repeatedly, path, SECONDS + STARTUP)
                async with process(
                    ["-c", READER, path, str(SECONDS)], stdout=subprocess.PIPE
                ) as r:
                    assert r.stdout is not None
                    line = await read_line(r.stdout, STARTUP + SECONDS)
                    assert await r.wait() == 0
                blocking.cancel_scope.cancel()
            for proc in procs:
                assert await proc.wait() == 0
    print("reader:", line)
    reads, failed, examples = line.split(" ", 2)
    assert int(failed) == 0, examples
    assert int(reads) > 30, reads
    writes = [Tally(**orjson.loads((folder / f"{t}.json").read_bytes())) for t in tags]
    # Every writer wrote throughout (the reads ran against real contention).
    # Not an equal share each: SQLite's lock is not fair between processes,
    # and on a loaded machine one writer can get a handful of commits where
    # another gets hundreds.
    counts = [len(t.enqueued) for t in writes]
    assert all(counts) and sum(counts) >= 5 * PROCESSES, f"the writers did not contend: {counts}"


async def _hold_lock_repeatedly(path: str, seconds: float) -> None:
    """Take the write lock from another process, 2 s at a time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        argv = ["-c", BLOCKER, path, "2"]
        async with process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as blocker:
            assert blocker.stdout is not None
            assert await read_line(blocker.stdout) == "locked"
            assert await read_line(blocker.stdout) == "released"  # after 2 s
            await blocker.wait()


OPENER = """
import sys, trio
from alkstore.io_trio import SqliteOptions, open_sqlite

async def main(path):
    async with open_sqlite(path, options=SqliteOptions(busy_timeout=1.0)) as store:
        stats = await store.queue("q").stats()
    print("opened", stats.ready, flush=True)

trio.run(main, sys.argv[1])
"""


async def test_many_processes_open_a_current_database_while_its_write_lock_is_held(
    tmp_path: Path,
) -> None:
    """Six processes open the same file at once while another holds its write
    lock for longer than their busy timeout: every open succeeds (the schema
    version is read, nothing is migrated)."""
    path = str(tmp_path / "opens.db")
    async with open_sqlite(path) as store:
        await store.queue("q").enqueue(1)
    with trio.fail_after(STARTUP * 2):
        blocker_argv = ["-c", BLOCKER, path, "120"]
        async with process(blocker_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as b:
            assert b.stdout is not None and b.stdin is not None
            assert await read_line(b.stdout) == "locked"
            lines: list[str] = []

            async def open_one() -> None:
                async with process(["-c", OPENER, path], stdout=subprocess.PIPE) as proc:
                    assert proc.stdout is not None
                    lines.append(await read_line(proc.stdout, STARTUP * 2))
                    assert await proc.wait() == 0

            async with trio.open_nursery() as nursery:
                for _ in range(6):
                    nursery.start_soon(open_one)
            await b.stdin.aclose()
            assert await read_line(b.stdout) == "released"
    assert lines == ["opened 1"] * 6
