"""The asyncio driver runs the same facades over ``AsyncioRuntime``.

The contract suite runs on ``sqlite-asyncio`` and ``postgres-asyncio`` too
(tests/backends.py); these tests pin a few things from plain ``asyncio.run``:
every mechanism works, background tasks and their connections end with the
store, and cancellation is honoured.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from alkstore import Closed
from alkstore.io_asyncio import open_sqlite


def run(coro_fn, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    threads_before = threading.active_count()
    asyncio.run(coro_fn(str(tmp_path / "a.db")))
    # The writer thread and the executor's threads are gone with the store.
    assert threading.active_count() <= threads_before + 1


def test_queue_tx_and_wakes(tmp_path: Path) -> None:
    async def main(path: str) -> None:
        async with open_sqlite(path) as store:
            q = store.queue("q")
            async with store.listen("ch") as wakes:
                async with store.transaction() as tx:
                    await tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
                    await tx.execute("INSERT INTO orders DEFAULT VALUES")
                    await tx.enqueue(q, {"order": 1})
                    await tx.notify("ch")
                    assert wakes.try_recv() is None  # not before commit
                assert await wakes.recv_timeout(2) is not None
                with pytest.raises(KeyError):
                    async with store.transaction() as tx:
                        await tx.enqueue(q, {"order": 2})
                        await tx.notify("ch")
                        raise KeyError("rollback")
                assert await wakes.recv_timeout(0.1) is None
            with pytest.raises(Closed):
                wakes.try_recv()
            job = await q.claim_one("w")
            assert job is not None and job.payload == {"order": 1}
            assert await job.ack() is True
            assert await q.claim_one("w") is None

    run(main, tmp_path)


def test_stream_subscriber_wakes_on_publish(tmp_path: Path) -> None:
    async def main(path: str) -> None:
        async with open_sqlite(path) as store:
            stream = store.stream("s")

            async def publish_later() -> None:
                await asyncio.sleep(0.05)
                await stream.publish({"n": 1})

            publisher = asyncio.create_task(publish_later())
            async with stream.subscribe("c") as events:
                event = await asyncio.wait_for(events.recv(), 5)
                assert event is not None and event.offset == 1
                await events.save_offset()
            await publisher
            assert await stream.get_offset("c") == 1

    run(main, tmp_path)


def test_cancelled_caller_leaves_store_usable(tmp_path: Path) -> None:
    async def main(path: str) -> None:
        async with open_sqlite(path) as store:
            q = store.queue("q")

            async def hang_in_tx() -> None:
                async with store.transaction() as tx:
                    await tx.enqueue(q, 1)
                    await asyncio.sleep(10)

            task = asyncio.create_task(hang_in_tx())
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The cancelled transaction rolled back and released the writer.
            assert (await q.stats()).ready == 0
            await q.enqueue(2)
            assert (await q.stats()).ready == 1

    run(main, tmp_path)


def test_hold_lock_renews_and_releases(tmp_path: Path) -> None:
    async def main(path: str) -> None:
        async with open_sqlite(path) as store:
            # A TTL that a loaded CI machine's scheduling hiccups cannot
            # outlast (0.2 s once lost the lock under the full parallel run).
            async with store.hold_lock("L", "a", ttl=1.0) as lock:
                await asyncio.sleep(1.5)  # longer than the TTL: renewals keep it
                assert await store.try_lock("L", "b", 1) is None
            other = await store.try_lock("L", "b", 1)
            assert other is not None and other.token == lock.token + 1

    run(main, tmp_path)


def test_a_store_closed_before_its_watcher_ran_closes_every_connection(tmp_path: Path) -> None:
    """An asyncio task cancelled before its first step never runs, not even its
    ``finally``: the watcher's connection must be closed all the same."""

    async def main(path: str) -> None:
        async with open_sqlite(path):
            pass  # nothing awaited: the watcher task never started

    fds_before = set(os.listdir("/proc/self/fd"))
    run(main, tmp_path)
    assert set(os.listdir("/proc/self/fd")) <= fds_before
