"""Rule: stream offsets are handed out in commit order. A reader that has
seen offset N never later finds a newly committed event below N, so reading
``read_since(last_seen)`` never skips an event (contract section 3, streams).

Postgres sequences would hand out numbers at insert time, so two
transactions could commit out of order; these tests reproduce that race
through the driver and show the engine serialises it."""

from __future__ import annotations

import random

import trio
import trio.lowlevel

from alkstore import StreamEvent

from .pg import SOON, asql, open_pg, wait_until


class Reader:
    """Reads a stream the way a consumer does: ``read_since(last_seen)``,
    checking every batch continues the last one without a gap."""

    def __init__(self, stream) -> None:  # type: ignore[no-untyped-def]
        self.stream = stream
        self.seen: list[StreamEvent] = []

    @property
    def last(self) -> int:
        return self.seen[-1].offset if self.seen else 0

    async def poll(self) -> list[StreamEvent]:
        batch = await self.stream.read_since(self.last, 1000)
        expected = list(range(self.last + 1, self.last + 1 + len(batch)))
        assert [e.offset for e in batch] == expected, (self.last, [e.offset for e in batch])
        self.seen.extend(batch)
        return batch


async def _wait_for_lock_wait(pid: int) -> None:
    """Until backend ``pid`` waits on a lock (a row lock of the counter)."""
    with trio.fail_after(SOON):
        while True:
            rows = await asql("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
            if rows and rows[0][0] == "Lock":
                return
            await trio.sleep(0.01)


async def test_second_publisher_waits_for_first_commit(schema: str) -> None:
    """Two stores publish to one stream in explicit transactions. The first
    publishes and holds its transaction open; the second's publish blocks on
    the stream's counter row (pg_stat_activity shows it waiting on a lock)
    instead of taking a later offset and committing first. A reader polling
    in between sees nothing new; after the first commits it sees exactly the
    first's event, then the second's: offsets ascend in commit order and no
    poll ever skips one. A rolled-back publish gives its offset back."""
    async with (
        open_pg(schema, pool_size=2) as a,
        open_pg(schema, pool_size=2) as b,
        open_pg(schema, pool_size=1) as r,
    ):
        await a.stream("s").publish("before")
        reader = Reader(r.stream("s"))
        assert [e.payload for e in await reader.poll()] == ["before"]

        first_published = trio.Event()
        commit_first = trio.Event()
        second_pid: list[int] = []
        second_published = trio.Event()
        commit_second = trio.Event()
        offsets: dict[str, int] = {}

        async def first() -> None:
            async with a.transaction() as tx:
                offsets["first"] = await tx.publish("s", "first")
                first_published.set()
                await commit_first.wait()

        async def second() -> None:
            async with b.transaction() as tx:
                [(pid,)] = await tx.execute("SELECT pg_backend_pid()")
                second_pid.append(pid)
                await first_published.wait()
                offsets["second"] = await tx.publish("s", "second")
                second_published.set()
                await commit_second.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)
            await first_published.wait()
            await wait_until(lambda: bool(second_pid))
            await _wait_for_lock_wait(second_pid[0])
            assert not second_published.is_set()
            assert await reader.poll() == []  # nothing committed yet

            commit_first.set()
            with trio.fail_after(SOON):
                await second_published.wait()
            assert offsets["second"] > offsets["first"]
            # The first committed; the second has its offset but not yet committed.
            assert [e.payload for e in await reader.poll()] == ["first"]
            commit_second.set()
        assert [e.payload for e in await reader.poll()] == ["second"]
        assert [e.offset for e in reader.seen] == [1, 2, 3]
        assert offsets == {"first": 2, "second": 3}

        # A publisher that rolls back releases its offset to the one waiting.
        rolled_back = trio.Event()
        got: list[int] = []

        class Abort(Exception):
            pass

        async def doomed() -> None:
            try:
                async with a.transaction() as tx:
                    got.append(await tx.publish("s", "doomed"))
                    await rolled_back.wait()
                    raise Abort
            except Abort:
                pass

        async def waiter() -> None:
            got.append(await b.stream("s").publish("after-rollback"))  # auto-commit path

        async with trio.open_nursery() as nursery:
            nursery.start_soon(doomed)
            await wait_until(lambda: bool(got))
            nursery.start_soon(waiter)
            await trio.sleep(0.2)
            assert got == [4]  # the auto-commit publish is waiting
            assert await reader.poll() == []
            rolled_back.set()
        assert got == [4, 4]
        assert [e.payload for e in await reader.poll()] == ["after-rollback"]
        assert [e.offset for e in reader.seen] == [1, 2, 3, 4]


async def test_concurrent_publishers_never_make_a_reader_skip(schema: str) -> None:
    """Stress: six publisher tasks on two stores publish in transactions
    that stay open for random short times (and sometimes roll back), some
    with several events per transaction, some through auto-commit
    ``publish``; a concurrent reader polls ``read_since(last_seen)`` without
    pause. Every batch continues exactly where the previous one ended
    (offsets contiguous, never going back), and in the end the reader has
    seen every committed event exactly once and no rolled-back one."""
    rng = random.Random(7)
    committed: set[str] = set()
    async with (
        open_pg(schema, pool_size=4) as a,
        open_pg(schema, pool_size=4) as b,
        open_pg(schema, pool_size=1) as r,
    ):
        reader = Reader(r.stream("hot"))
        done = trio.Event()

        class Abort(Exception):
            pass

        async def publisher(store, tag: str, n: int) -> None:  # type: ignore[no-untyped-def]
            for i in range(n):
                payloads = [f"{tag}-{i}-{k}" for k in range(rng.choice((1, 1, 2, 3)))]
                hold = rng.random() * 0.01
                if rng.random() < 0.2:
                    await store.stream("hot").publish(payloads[0])
                    committed.add(payloads[0])
                    continue
                abort = rng.random() < 0.15
                try:
                    async with store.transaction() as tx:
                        for p in payloads:
                            await tx.publish("hot", p)
                        await trio.sleep(hold)
                        if abort:
                            raise Abort
                except Abort:
                    continue
                committed.update(payloads)

        async def read() -> None:
            while not done.is_set():
                await reader.poll()
                await trio.lowlevel.checkpoint()
            await reader.poll()

        with trio.fail_after(30):
            async with trio.open_nursery() as outer:
                outer.start_soon(read)
                async with trio.open_nursery() as nursery:
                    for i in range(6):
                        nursery.start_soon(publisher, a if i % 2 else b, f"p{i}", 40)
                done.set()
        payloads = [e.payload for e in reader.seen]
        assert len(payloads) == len(set(payloads))
        assert set(payloads) == committed
        assert [e.offset for e in reader.seen] == list(range(1, len(payloads) + 1))
