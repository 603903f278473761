"""SQLite on a full disk (issue 4: real faults on real engines).

``PRAGMA max_page_count`` caps the database file: past it SQLite fails
writes with SQLITE_FULL exactly as on a full disk, and the cap is per
connection, so a store reopened with a higher cap has room again. Where this
process may mount a small tmpfs (root, mount allowed), the same is checked
on a real full file system, freed by deleting a ballast file.

Depending on the statement, SQLITE_FULL undoes that statement only or the
whole transaction (savepoints included), so both the group commit and a
caller's transaction are checked for what they report against what is there.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from alkstore import DatabaseError, Store
from alkstore.io_trio import SqliteOptions, open_sqlite

from .procs import no_thread_leak

QUEUE = "q"
STREAM = "s"
PAD = "x" * 1000  # about a quarter of a page per job
BIG = "y" * 20_000  # several overflow pages: never fits into a full database


def capped(pages: int) -> SqliteOptions:
    return SqliteOptions(pragmas={"max_page_count": str(pages)})


@dataclass
class Ledger:
    """What the API reported: every token either got an id/offset or an error."""

    jobs: dict[str, int] = field(default_factory=dict)  # token -> job id
    events: dict[str, int] = field(default_factory=dict)  # token -> offset
    failed: set[str] = field(default_factory=set)
    errors: list[DatabaseError] = field(default_factory=list)
    n: int = 0

    def token(self, kind: str) -> str:
        self.n += 1
        return f"{kind}-{self.n}"

    async def enqueue(self, store: Store, pad: str = PAD) -> bool:
        token = self.token("job")
        return await self._record(token, self.jobs, store.queue(QUEUE).enqueue, pad)

    async def publish(self, store: Store, pad: str = BIG) -> bool:
        token = self.token("event")
        return await self._record(token, self.events, store.stream(STREAM).publish, pad)

    async def _record(
        self, token: str, into: dict[str, int], call: Callable[[Any], Awaitable[int]], pad: str
    ) -> bool:
        try:
            into[token] = await call({"token": token, "pad": pad})
            return True
        except DatabaseError as exc:
            self.failed.add(token)
            self.errors.append(exc)
            return False


def assert_full(error: BaseException) -> None:
    """A clear DatabaseError with the sqlite3 error (SQLITE_FULL) chained."""
    assert isinstance(error, DatabaseError), repr(error)
    assert "full" in str(error), str(error)
    cause = error.__cause__
    assert isinstance(cause, sqlite3.Error), repr(cause)
    assert cause.sqlite_errorcode & 0xFF == sqlite3.SQLITE_FULL, cause.sqlite_errorname


async def fill(store: Store, ledger: Ledger) -> None:
    """Enqueue until the engine reports the disk full, then a few more tries."""
    with trio.fail_after(30):
        while await ledger.enqueue(store):
            pass
    assert_full(ledger.errors[-1])
    for pad in (PAD, BIG):
        if not await ledger.enqueue(store, pad):
            assert_full(ledger.errors[-1])


async def one_group(store: Store, ledger: Ledger, middle: str) -> None:
    """Small enqueues around one write that cannot fit, committed as one group:
    the writer slot is held (a caller's transaction) while they queue up."""
    held, release = trio.Event(), trio.Event()

    async def hold_writer() -> None:
        async with store.transaction() as tx:
            await tx.execute("SELECT 1", ())
            held.set()
            await release.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_writer)
        await held.wait()
        for i in range(9):
            if i == 4:
                if middle == "publish":
                    nursery.start_soon(ledger.publish, store)
                else:
                    nursery.start_soon(ledger.enqueue, store, BIG)
            else:
                nursery.start_soon(ledger.enqueue, store, "z" * 10)
            await trio.testing.wait_all_tasks_blocked(0.01)  # queued, in this order
        release.set()
    for error in ledger.errors:
        assert_full(error)


async def caller_transaction(store: Store, ledger: Ledger) -> None:
    """A transaction whose middle step cannot fit (it fails, and is caught, or
    the COMMIT fails): it commits all of its other steps or none of them, and
    says which."""
    a, big, b = ledger.token("job"), ledger.token("event"), ledger.token("job")
    ids: dict[str, int] = {}
    offsets: dict[str, int] = {}
    committed = False
    try:
        async with store.transaction() as tx:
            ids[a] = await tx.enqueue(QUEUE, {"token": a, "pad": "t"})
            try:
                offsets[big] = await tx.publish(STREAM, {"token": big, "pad": BIG})
            except DatabaseError as exc:
                assert_full(exc)
            ids[b] = await tx.enqueue(QUEUE, {"token": b, "pad": "t"})
        committed = True
    except DatabaseError as exc:
        assert_full(exc)
    if committed:
        ledger.jobs.update(ids)
        ledger.events.update(offsets)
        ledger.failed.update({big} - set(offsets))
    else:
        ledger.failed.update((a, big, b))


async def check_everything_there(store: Store, ledger: Ledger, gone: set[str]) -> None:
    """Every job and event reported committed is there (jobs: claimable now),
    nothing reported failed is; claims every job and acks it."""
    q = store.queue(QUEUE)
    claimed: dict[str, int] = {}
    while jobs := await q.claim_batch("drain", 200):
        for job in jobs:
            claimed[job.payload["token"]] = job.id
        assert await q.ack_batch([j.id for j in jobs], "drain") == len(jobs)
    expected = {t: i for t, i in ledger.jobs.items() if t not in gone}
    assert claimed == expected
    events = await store.stream(STREAM).read_since(0, 10_000)
    assert {e.payload["token"]: e.offset for e in events} == ledger.events
    stats = await q.stats()
    assert (stats.ready, stats.scheduled, stats.processing, stats.dead) == (0, 0, 0, 0)


async def test_a_full_database_fails_writes_cleanly_loses_nothing_and_recovers(
    tmp_path: Path,
) -> None:
    """max_page_count full: clear DatabaseError, reports match the data, space brings it back.

    Every write reported committed (alone, in a group commit beside a failing
    one, in a transaction) is there and claimable; every write reported failed
    is absent; cancelling jobs, or reopening with a higher cap, makes writes
    work again.
    """
    path = str(tmp_path / "full.db")
    ledger = Ledger()
    gone: set[str] = set()
    with no_thread_leak(), trio.fail_after(60):
        async with open_sqlite(path, options=capped(64)) as store:
            await fill(store, ledger)
            filled = dict(ledger.jobs)
            await one_group(store, ledger, middle="enqueue")
            await one_group(store, ledger, middle="publish")
            await caller_transaction(store, ledger)
            assert ledger.failed, "nothing failed: the database never filled up"

            # Free space by cancelling a third of the jobs: writes work again.
            q = store.queue(QUEUE)
            for token, job_id in list(filled.items())[: len(filled) // 3]:
                assert await q.cancel(job_id)
                gone.add(token)
            assert await ledger.enqueue(store)
            job = await q.claim_one("w")
            assert job is not None and await job.ack()
            gone.add(job.payload["token"])

            # Full again, then closed full.
            await fill(store, ledger)

        # Reopened with more room: works at once, and everything is there.
        async with open_sqlite(path, options=capped(64 * 100)) as store:
            assert await ledger.enqueue(store)
            assert await ledger.publish(store, "small")
            await check_everything_there(store, ledger, gone)


# -- a real full file system ------------------------------------------------------------
@contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where``; skips when mounting is refused."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs refused: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True, timeout=30).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


async def test_a_full_file_system_fails_writes_cleanly_loses_nothing_and_recovers(
    tmp_path: Path,
) -> None:
    """A real full tmpfs: clear DatabaseError, reports match the data, freed space heals it."""
    ledger = Ledger()
    with small_tmpfs(tmp_path / "disk", "1m") as disk:
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * 256 * 1024)
        with no_thread_leak(), trio.fail_after(60):
            async with open_sqlite(str(disk / "full.db")) as store:
                await fill(store, ledger)
                await one_group(store, ledger, middle="enqueue")
                await caller_transaction(store, ledger)

                ballast.unlink()
                assert await ledger.enqueue(store)
                assert await ledger.publish(store, "small")
                await check_everything_there(store, ledger, set())
