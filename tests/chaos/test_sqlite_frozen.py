"""Rule: a process frozen (SIGSTOP) while it holds SQLite's write lock makes
others wait a bounded time and fail with a clear DatabaseError, never hang;
reads go on; when it is resumed, or killed, everyone carries on and nothing
it committed is lost (docs/reliability.md)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import trio

from alkstore import DatabaseError
from alkstore.io_trio import SqliteOptions, open_sqlite
from tests.faults.procs import STARTUP, no_thread_leak, process

from . import sqlite_writer
from .logs import read_log, wait_for_lines

BUSY = 1.0


def holds_write_lock(path: str) -> bool:
    """Whether someone holds the write lock now (a write lock we cannot get
    at once)."""
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        assert "locked" in str(exc), exc
        return True
    finally:
        conn.close()


async def freeze_holding_the_lock(pid: int, path: str, rng: random.Random) -> None:
    """SIGSTOP the writer at a moment it holds the write lock."""
    for _ in range(2000):
        await trio.sleep(rng.uniform(0, 0.01))
        os.kill(pid, signal.SIGSTOP)
        await trio.sleep(0.01)  # the stop has landed
        if holds_write_lock(path):
            return
        os.kill(pid, signal.SIGCONT)
    raise AssertionError("never caught the writer holding the write lock")


async def blocked_write_fails_in_bounded_time(store, token: str) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    try:
        await store.queue("mine").enqueue({"token": token})
    except DatabaseError as exc:
        assert "locked" in str(exc), exc
    else:
        raise AssertionError("a write went through while another process held the lock")
    took = time.monotonic() - started
    assert BUSY * 0.9 <= took <= BUSY + 4.0, took


def committed_tokens(path: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = conn.execute(
            "SELECT json_extract(payload, '$.token') FROM __alkstore_jobs WHERE queue = ?",
            (sqlite_writer.QUEUE,),
        ).fetchall()
    finally:
        conn.close()
    return {r[0] for r in rows}


def logged_tokens(log: str) -> set[str]:
    return {t for row in read_log(log).of("ok") for t in row[1:]}


async def test_a_frozen_lock_holder_blocks_writes_boundedly_and_is_survived(
    tmp_path: Path,
) -> None:
    """Frozen holding the lock: our writes fail after about busy_timeout,
    reads succeed; resumed: writes succeed again; frozen again and killed:
    writes succeed, the file is intact and holds every transaction the writer
    reported committed."""
    path = str(tmp_path / "frozen.db")
    log = str(tmp_path / "log")
    rng = random.Random(7)
    options = SqliteOptions(busy_timeout=BUSY)
    with no_thread_leak(), trio.fail_after(STARTUP + 120):
        async with open_sqlite(path, options=options) as store:
            mine = store.queue("mine")
            await mine.enqueue({"token": "before"})
            argv = ["-m", "tests.chaos.sqlite_writer", path, log]
            async with process(argv, stdout=subprocess.DEVNULL) as writer:
                await wait_for_lines(log, lambda lines: len(lines.of("ok")) >= 20, STARTUP)

                await freeze_holding_the_lock(writer.pid, path, rng)
                await blocked_write_fails_in_bounded_time(store, "while-frozen")
                assert (await mine.stats()).ready == 1  # reads go on (WAL)
                os.kill(writer.pid, signal.SIGCONT)
                with trio.fail_after(BUSY + 10):
                    await mine.enqueue({"token": "after-resume"})
                seen = len(read_log(log).of("ok"))
                await wait_for_lines(log, lambda lines: len(lines.of("ok")) > seen + 5, 30)

                await freeze_holding_the_lock(writer.pid, path, rng)
                await blocked_write_fails_in_bounded_time(store, "frozen-again")
                writer.kill()  # SIGKILL: the kernel drops its locks
                await writer.wait()
                with trio.fail_after(BUSY + 10):
                    await mine.enqueue({"token": "after-kill"})
                assert (await mine.stats()).ready == 3
    reported = logged_tokens(log)
    assert reported  # the writer did commit work
    committed = committed_tokens(path)
    assert reported <= committed
    # Transactions come whole: at most the one being committed when the
    # writer died is there without its "ok" line.
    assert len(committed - reported) <= 5
