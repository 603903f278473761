"""Streams: dense ordered offsets, reads, monotonic consumer offsets, trim, subscribe."""

from __future__ import annotations

import pytest

from alkstore import Closed, InvalidArgument, InvalidName, ManualClock, Store, StreamEvent
from tests.backends import Backend

from . import aio
from .helpers import QUIET, SOON, at


@pytest.mark.producer
async def test_publish_returns_dense_increasing_offsets_per_stream(store: Store) -> None:
    a = store.stream("a")
    b = store.stream("b")
    assert [await a.publish(i) for i in range(3)] == [1, 2, 3]
    assert await b.publish("first of b") == 1
    assert await a.publish_with_key("k", "keyed") == 4
    assert await b.publish_with_key("k", "second of b") == 2


@pytest.mark.producer
async def test_events_carry_offset_stream_key_payload_and_created_at(
    store: Store, clock: ManualClock
) -> None:
    s = store.stream("orders")
    await s.publish({"id": 1})
    clock.advance(1.5)
    await s.publish_with_key("customer-7", [1, "two", 3.0, None, False])
    events = await s.read_since(0)
    assert events == [
        StreamEvent(1, "orders", None, {"id": 1}, at(clock, -1.5)),
        StreamEvent(2, "orders", "customer-7", [1, "two", 3.0, None, False], at(clock)),
    ]


@pytest.mark.producer
async def test_read_since_returns_later_events_ascending_up_to_limit(store: Store) -> None:
    s = store.stream("s")
    for i in range(1, 11):
        await s.publish(i)
    assert [e.offset for e in await s.read_since(0)] == list(range(1, 11))
    assert [e.payload for e in await s.read_since(4, limit=3)] == [5, 6, 7]
    assert [e.offset for e in await s.read_since(8, limit=100)] == [9, 10]
    assert await s.read_since(10) == []
    assert await s.read_since(50) == []
    assert await store.stream("empty").read_since(0) == []


@pytest.mark.producer
async def test_read_since_rejects_bad_arguments(store: Store) -> None:
    s = store.stream("s")
    await s.publish(1)
    with pytest.raises(InvalidArgument):
        await s.read_since(-1)
    with pytest.raises(InvalidArgument):
        await s.read_since(0, limit=0)


@pytest.mark.producer
async def test_get_offset_is_zero_when_never_saved(store: Store) -> None:
    s = store.stream("s")
    await s.publish(1)
    assert await s.get_offset("never") == 0


@pytest.mark.producer
async def test_save_offset_is_monotonic(store: Store) -> None:
    s = store.stream("s")
    for i in range(10):
        await s.publish(i)
    await s.save_offset("c", 5)
    assert await s.get_offset("c") == 5
    await s.save_offset("c", 3)  # never moves back
    assert await s.get_offset("c") == 5
    await s.save_offset("c", 5)
    assert await s.get_offset("c") == 5
    await s.save_offset("c", 8)
    assert await s.get_offset("c") == 8
    with pytest.raises(InvalidArgument):
        await s.save_offset("c", -1)
    assert await s.get_offset("c") == 8


@pytest.mark.producer
async def test_offsets_are_per_stream_and_per_consumer(store: Store) -> None:
    a = store.stream("a")
    b = store.stream("b")
    await a.save_offset("c1", 4)
    await a.save_offset("c2", 2)
    await b.save_offset("c1", 9)
    assert await a.get_offset("c1") == 4
    assert await a.get_offset("c2") == 2
    assert await b.get_offset("c1") == 9
    assert await b.get_offset("c2") == 0


@pytest.mark.producer
async def test_consumer_names_may_use_the_reserved_prefix(store: Store) -> None:
    s = store.stream("s")
    await s.publish(1)
    await s.save_offset("__alkstore_consumer", 1)
    assert await s.get_offset("__alkstore_consumer") == 1


@pytest.mark.producer
async def test_read_from_consumer_reads_after_the_saved_offset_without_moving_it(
    store: Store,
) -> None:
    s = store.stream("s")
    for i in range(1, 6):
        await s.publish(i)
    assert [e.offset for e in await s.read_from_consumer("c")] == [1, 2, 3, 4, 5]
    await s.save_offset("c", 2)
    assert [e.offset for e in await s.read_from_consumer("c", limit=2)] == [3, 4]
    assert [e.offset for e in await s.read_from_consumer("c")] == [3, 4, 5]
    assert await s.get_offset("c") == 2


async def test_trim_to_drops_events_below_the_offset_and_offsets_continue(store: Store) -> None:
    s = store.stream("s")
    for i in range(1, 6):
        await s.publish(i)
    assert await s.trim_to(4) == 3
    assert [e.offset for e in await s.read_since(0)] == [4, 5]
    assert await s.trim_to(4) == 0
    assert await s.publish(6) == 6  # offsets never restart
    assert await s.trim_to(100) == 3
    assert await s.read_since(0) == []
    assert await s.publish(7) == 7
    assert [e.offset for e in await s.read_since(0)] == [7]


async def test_trim_to_leaves_other_streams_alone(store: Store) -> None:
    a = store.stream("a")
    b = store.stream("b")
    await a.publish(1)
    await b.publish(1)
    assert await a.trim_to(10) == 1
    assert [e.offset for e in await b.read_since(0)] == [1]


@pytest.mark.producer
async def test_publish_with_key_rejects_an_empty_key(store: Store) -> None:
    s = store.stream("s")
    with pytest.raises(InvalidName):
        await s.publish_with_key("", "x")
    assert await s.read_since(0) == []


async def test_no_event_is_skipped_when_publishers_commit_out_of_order(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    """A reader that has seen offset N never later finds a committed offset below N.

    Publisher A takes an offset inside a transaction and holds it open while
    publisher B (another store) publishes; a third store keeps reading past the
    highest offset it has seen. Every committed event must reach the reader.
    """
    async with (
        backend.open(location, clock=clock) as a,
        backend.open(location, clock=clock) as b,
        backend.open(location, clock=clock) as reader,
    ):
        seen: list[int] = []
        done = aio.event()

        async def read_forever() -> None:
            last = 0
            while True:
                for event in await reader.stream("race").read_since(last):
                    seen.append(event.offset)
                    last = event.offset
                if done.is_set() and len(seen) >= 4:
                    return
                await aio.sleep(0.005)

        async with aio.fail_after(SOON * 2), aio.open_task_group() as nursery:
            nursery.start_soon(read_forever)
            for _ in range(2):
                # The nursery outlives the transaction: B's publish may
                # have to wait for A's commit.
                async with aio.open_task_group() as publishers, a.transaction() as tx:
                    await tx.publish("race", "slow")
                    publishers.start_soon(b.stream("race").publish, "fast")
                    await aio.sleep(0.1)  # B publishes while A is uncommitted
            done.set()
        everything = [e.offset for e in await reader.stream("race").read_since(0)]
        assert everything == [1, 2, 3, 4]
        assert seen == everything


# -- subscribe ------------------------------------------------------------------


async def test_subscribe_delivers_from_the_start_when_nothing_was_saved(store: Store) -> None:
    s = store.stream("s")
    for i in range(1, 4):
        await s.publish(i)
    async with s.subscribe("c") as events:
        assert events.offset == 0
        got = [await events.recv() for _ in range(3)]
        assert [e.offset for e in got if e is not None] == [1, 2, 3]
        assert events.offset == 3


async def test_subscribe_has_no_automatic_checkpoint_and_no_save_on_close(
    store: Store,
) -> None:
    s = store.stream("s")
    for i in range(1, 4):
        await s.publish(i)
    async with s.subscribe("c") as events:
        for _ in range(3):
            assert await events.recv() is not None
    assert await s.get_offset("c") == 0
    async with s.subscribe("c") as events:
        first = await events.recv()
        assert first is not None and first.offset == 1


async def test_subscribe_resumes_from_the_saved_offset(store: Store) -> None:
    s = store.stream("s")
    for i in range(1, 6):
        await s.publish(i)
    async with s.subscribe("c") as events:
        await events.recv()
        await events.recv()
        await events.save_offset()
        assert await s.get_offset("c") == 2
        await events.recv()  # handed out but never checkpointed
    async with s.subscribe("c") as events:
        assert events.offset == 2
        ev = await events.recv()
        assert ev is not None and ev.offset == 3
    await s.save_offset("c", 4)
    async with s.subscribe("c") as events:
        assert events.offset == 4
        ev = await events.recv()
        assert ev is not None and ev.payload == 5


@pytest.mark.producer
async def test_subscribe_receives_events_published_while_it_waits(store: Store) -> None:
    s = store.stream("s")
    got: list[StreamEvent | None] = []
    async with s.subscribe("c") as events:

        async def consume() -> None:
            got.append(await events.recv())
            got.append(await events.recv())

        # Well under the receiver's backstop poll: delivery must come from the wake.
        async with aio.fail_after(2), aio.open_task_group() as nursery:
            nursery.start_soon(consume)
            await aio.wait_all_tasks_blocked()
            assert got == []
            await s.publish("one")
            await aio.wait_all_tasks_blocked()
            await s.publish_with_key("k", "two")
    assert [(e.offset, e.key, e.payload) for e in got if e is not None] == [
        (1, None, "one"),
        (2, "k", "two"),
    ]


@pytest.mark.producer
async def test_subscribe_receives_events_published_by_another_store(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    got: list[StreamEvent | None] = []
    async with (
        backend.open(location, clock=clock) as sub_store,
        backend.open(location, clock=clock) as pub_store,
        sub_store.stream("s").subscribe("c") as events,
    ):

        async def consume() -> None:
            got.append(await events.recv())

        async with aio.fail_after(SOON), aio.open_task_group() as nursery:
            nursery.start_soon(consume)
            await aio.sleep(0.05)
            await pub_store.stream("s").publish({"from": "elsewhere"})
    assert [e.payload for e in got if e is not None] == [{"from": "elsewhere"}]


async def test_try_recv_hands_out_fetched_events_without_waiting(store: Store) -> None:
    s = store.stream("s")
    async with s.subscribe("c") as events:
        assert events.try_recv() is None
        for i in range(1, 4):
            await s.publish(i)
        first = await events.recv()
        assert first is not None and first.offset == 1
        # recv fetched a batch; the rest is available without IO.
        second = events.try_recv()
        third = events.try_recv()
        assert second is not None and second.offset == 2
        assert third is not None and third.offset == 3
        assert events.try_recv() is None
        assert events.offset == 3


async def test_recv_timeout_returns_an_event_or_none(store: Store) -> None:
    s = store.stream("s")
    async with s.subscribe("c") as events:
        assert await events.recv_timeout(QUIET) is None
        await s.publish("x")
        ev = await events.recv_timeout(SOON)
        assert ev is not None and ev.payload == "x"
        assert await events.recv_timeout(0) is None


@pytest.mark.producer
async def test_recv_timeout_wakes_on_publish(store: Store) -> None:
    s = store.stream("s")
    got: list[StreamEvent | None] = []
    async with s.subscribe("c") as events:

        async def consume() -> None:
            got.append(await events.recv_timeout(SOON))

        async with aio.fail_after(SOON), aio.open_task_group() as nursery:
            nursery.start_soon(consume)
            await aio.wait_all_tasks_blocked()
            await s.publish("x")
    assert [e.payload for e in got if e is not None] == ["x"]


async def test_async_iteration_yields_events_in_order(store: Store) -> None:
    s = store.stream("s")
    for i in range(1, 4):
        await s.publish(i)
    seen = []
    async with s.subscribe("c") as events:
        async for event in events:
            seen.append(event.offset)
            if len(seen) == 3:
                break
    assert seen == [1, 2, 3]


async def test_receiver_is_closed_after_its_block(store: Store) -> None:
    s = store.stream("s")
    await s.publish(1)
    receiver = s.subscribe("c")
    with pytest.raises(Closed):
        receiver.try_recv()  # not entered yet
    async with receiver as events:
        pass
    assert await events.recv() is None
    with pytest.raises(Closed):
        events.try_recv()
    with pytest.raises(Closed):
        await events.recv_timeout(0.01)
    with pytest.raises(Closed):
        await events.save_offset()
    with pytest.raises(Closed):
        async with events:
            pass
    assert await s.get_offset("c") == 0


async def test_receiver_closes_when_the_store_closes(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    got: list[object] = []
    async with (
        aio.fail_after(SOON),
        aio.open_task_group() as nursery,
        backend.open(location, clock=clock) as s,
    ):
        events = s.stream("s").subscribe("c")
        await events.__aenter__()

        async def consume() -> None:
            got.append(await events.recv())

        nursery.start_soon(consume)
        await aio.wait_all_tasks_blocked()
    assert got == [None]
    with pytest.raises(Closed):
        events.try_recv()


async def test_closing_the_receiver_ends_a_waiting_recv_with_none(store: Store) -> None:
    got: list[object] = []
    async with store.stream("s").subscribe("c") as events:

        async def consume() -> None:
            got.append(await events.recv())

        async with aio.fail_after(SOON), aio.open_task_group() as nursery:
            nursery.start_soon(consume)
            await aio.wait_all_tasks_blocked()
            events.close()
    assert got == [None]


async def test_head_offset_is_the_last_committed_offset_and_trimming_keeps_it(
    store: Store,
) -> None:
    """Invariant: head_offset is the highest offset handed out by a committed
    publish (0 before any); a rolled-back publish and a trim leave it."""
    s = store.stream("s")
    assert await s.head_offset() == 0
    for i in range(3):
        assert await s.publish(i) == i + 1
    assert await s.head_offset() == 3
    async with store.transaction() as tx:
        assert await tx.publish("s", "rolled back") == 4
        await tx.rollback()
    assert await s.head_offset() == 3
    await s.save_offset("c", 1)
    assert await s.head_offset() - await s.get_offset("c") == 2  # the consumer's lag
    assert await s.trim_to(3) == 2
    assert await s.head_offset() == 3
    assert await store.stream("other").head_offset() == 0
