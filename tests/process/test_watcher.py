"""The SQLite watcher: commits by other stores on the same file become wakes.

Two stores opened on one file in one process stand in for two processes here
(each has its own watcher and origin); ``test_cross_process.py`` does it
with a real second process.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from alkstore import DatabaseError, Wake
from alkstore.io_trio import SqliteOptions, WatcherOptions, open_sqlite
from alkstore.runner.sqlite import conn as sqlite_conn
from alkstore.runner.sqlite import watcher as sqlite_watcher
from tests.contract.helpers import wait_until

SOON = 5.0


@pytest.fixture(params=["inotify", "polling"])
def options(request: pytest.FixtureRequest) -> SqliteOptions:
    return SqliteOptions(watcher=WatcherOptions(use_inotify=request.param == "inotify"))


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "watched.db")


async def test_a_commit_by_another_store_wakes_a_listener(path: str, options: Any) -> None:
    async with (
        open_sqlite(path) as other,
        open_sqlite(path, options=options) as store,
        store.listen("ch") as wakes,
    ):
        await other.notify("ch")
        with trio.fail_after(SOON):
            assert await wakes.recv() == Wake("ch")
        assert store._core.executor.watcher.inotify is options.watcher.use_inotify  # type: ignore[attr-defined]


async def test_more_notifications_than_a_page_are_all_read(
    path: str, options: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_watcher, "_PAGE", 2)
    channels = [f"ch{i}" for i in range(7)]
    async with open_sqlite(path) as other, open_sqlite(path, options=options) as store:
        receivers = [store.listen(ch) for ch in channels]
        for r in receivers:
            await r.__aenter__()
        try:
            async with other.transaction() as tx:
                for ch in channels:
                    await tx.notify(ch)
            with trio.fail_after(SOON):
                for r in receivers:
                    assert await r.recv() is not None
        finally:
            for r in receivers:
                await r.__aexit__(None, None, None)


async def test_transient_read_failures_are_retried(
    path: str, options: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite_conn.data_version
    failures = {"left": 0}

    def flaky(conn: Any) -> int:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise DatabaseError("SQLite: disk I/O error (injected)")
        return real(conn)

    async with (
        open_sqlite(path) as other,
        open_sqlite(path, options=options) as store,
        store.listen("ch") as wakes,
    ):
        monkeypatch.setattr(sqlite_conn, "data_version", flaky)
        failures["left"] = 3
        await other.notify("ch")
        with trio.fail_after(SOON):
            assert await wakes.recv() == Wake("ch")
        assert failures["left"] == 0
        assert not wakes.closed


async def test_a_watcher_that_keeps_failing_gives_up_and_closes_receivers(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(conn: Any) -> int:
        raise DatabaseError("SQLite: disk I/O error (injected)")

    options = SqliteOptions(watcher=WatcherOptions(give_up_after=0.3))
    async with open_sqlite(path, options=options) as store, store.listen("ch") as wakes:
        monkeypatch.setattr(sqlite_conn, "data_version", broken)
        with trio.fail_after(SOON):
            assert await wakes.recv() is None  # closed: the contract on SQLite
        # The store itself still works.
        await store.queue("q").enqueue(1)


async def test_the_watcher_never_waits_long_for_a_lock(path: str) -> None:
    """The watcher reads on the event-loop thread, so its connection waits at
    most WATCHER_BUSY_TIMEOUT for a lock; the store's writer keeps the full
    busy_timeout."""
    from alkstore.runner.sqlite.opening import WATCHER_BUSY_TIMEOUT

    async with open_sqlite(path, options=SqliteOptions(busy_timeout=5.0)) as store:
        watcher = store._core.executor.watcher  # type: ignore[attr-defined]
        (waited_ms,) = watcher._conn.execute("PRAGMA busy_timeout").fetchone()
        assert waited_ms == int(WATCHER_BUSY_TIMEOUT * 1000) < 5000


def test_a_paused_inotify_raises_no_events_and_a_resumed_one_does(tmp_path: Path) -> None:
    """While the watcher rests it drops its watches (every write would raise
    an event, its own store's included); resumed, writes raise events again."""
    from alkstore.runner.sqlite.inotify import open_inotify

    notifier = open_inotify()
    if notifier is None:
        pytest.skip("no inotify on this platform")
    file = tmp_path / "watched"
    file.write_bytes(b"")
    try:
        assert notifier.watch(str(file)) and not notifier.paused
        file.write_bytes(b"a")
        assert notifier.drain()
        notifier.pause()
        assert notifier.paused
        file.write_bytes(b"b")
        assert not notifier.drain()
        assert notifier.resume() and not notifier.paused
        file.write_bytes(b"c")
        assert notifier.drain()
    finally:
        notifier.close()


async def test_a_watcher_with_no_receiver_parks_and_wakes_for_what_follows_attach(
    path: str, options: Any
) -> None:
    """Rule: with no receiver open the watcher looks at nothing (commits,
    ours or another store's, cost it no look); a receiver opened later is
    woken for every commit after its ``listen`` returned and for none from
    before it."""
    async with open_sqlite(path) as other, open_sqlite(path, options=options) as store:
        watcher = store._core.executor.watcher  # type: ignore[attr-defined]
        await wait_until(lambda: watcher.parked, SOON)
        checks = watcher.checks
        for i in range(20):
            await other.notify("ch")
            await store.queue("q").enqueue(i)
        await trio.sleep(0.2)  # a watching watcher would have looked by now
        assert watcher.checks == checks and watcher.parked

        async with store.listen("ch") as wakes:
            assert not watcher.parked
            await trio.sleep(0.2)  # the resumed watcher has looked
            assert watcher.checks > checks
            assert wakes.try_recv() is None  # nothing from before listen
            await other.notify("ch")
            with trio.fail_after(SOON):
                assert await wakes.recv() == Wake("ch")
        # The last receiver gone, it parks again (at its next look).
        await other.notify("ch")
        await wait_until(lambda: watcher.parked, SOON)


async def test_an_enqueue_wakes_other_stores_workers_without_a_notification_row(
    path: str, options: Any
) -> None:
    """Rule: another store's enqueue (single or batch) wakes this store's
    waiting worker of that queue (at once, not at its 60 s poll) though it
    wrote no notification row: job ids only grow, so the watcher reads the
    new pending jobs of the queues waited on here."""
    handled: list[str] = []
    three = trio.Event()

    async def handler(job: Any) -> None:
        handled.append(job.payload)
        if len(handled) == 3:
            three.set()

    async with open_sqlite(path) as other, open_sqlite(path, options=options) as store:
        watcher = store._core.executor.watcher  # type: ignore[attr-defined]
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(store.queue("q").work, handler, poll_interval=60.0))
            await wait_until(lambda: not watcher.parked, SOON)  # its receiver is open
            await trio.sleep(0.3)  # its first claim found nothing: it waits
            before = notification_rows(path)
            await other.queue("q").enqueue("one")
            await other.queue("q").enqueue_batch(["two", "three"])
            with trio.fail_after(SOON):
                await three.wait()
            assert sorted(handled) == ["one", "three", "two"]
            assert notification_rows(path) == before
            nursery.cancel_scope.cancel()


def notification_rows(path: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        (count,) = conn.execute("SELECT count(*) FROM __alkstore_notifications").fetchone()
    return int(count)
