"""notify / listen: wakes, receiver methods, closing."""

from __future__ import annotations

import pytest

from alkstore import Closed, ManualClock, PayloadTooLarge, Store, Wake
from tests.backends import Backend

from . import aio
from .helpers import QUIET, SOON, wait_until


@pytest.mark.producer
async def test_notify_wakes_a_listener(store: Store) -> None:
    async with store.listen("ch") as wakes:
        assert wakes.try_recv() is None
        await store.notify("ch", {"ignored": "payload"})
        async with aio.fail_after(SOON):
            wake = await wakes.recv()
        assert wake == Wake("ch")
        assert wake.channel == "ch"


@pytest.mark.producer
async def test_a_wake_reaches_a_listener_already_waiting(store: Store) -> None:
    got: list[Wake | None] = []
    async with store.listen("ch") as wakes:

        async def wait() -> None:
            got.append(await wakes.recv())

        async with aio.fail_after(SOON), aio.open_task_group() as nursery:
            nursery.start_soon(wait)
            await aio.wait_all_tasks_blocked()
            assert got == []
            await store.notify("ch")
    assert got == [Wake("ch")]


@pytest.mark.producer
async def test_every_listener_of_the_channel_is_woken(store: Store) -> None:
    async with store.listen("ch") as one, store.listen("ch") as two:
        await store.notify("ch")
        async with aio.fail_after(SOON):
            assert await one.recv() == Wake("ch")
            assert await two.recv() == Wake("ch")


@pytest.mark.producer
async def test_listeners_of_other_channels_are_not_woken(store: Store) -> None:
    async with store.listen("a") as a, store.listen("b") as b:
        await store.notify("a")
        assert await a.recv_timeout(SOON) == Wake("a")
        assert await b.recv_timeout(QUIET) is None
        assert b.try_recv() is None


async def test_a_wake_sent_before_listening_is_not_delivered(store: Store) -> None:
    await store.notify("ch")
    async with store.listen("ch") as wakes:
        assert await wakes.recv_timeout(QUIET) is None


async def test_a_consumed_wake_is_gone(store: Store) -> None:
    async with store.listen("ch") as wakes:
        await store.notify("ch")
        assert await wakes.recv_timeout(SOON) == Wake("ch")
        assert wakes.try_recv() is None
        assert await wakes.recv_timeout(QUIET) is None


async def test_recv_timeout_returns_a_wake_or_none(store: Store) -> None:
    async with store.listen("ch") as wakes:
        assert await wakes.recv_timeout(0) is None
        assert await wakes.recv_timeout(QUIET) is None
        got: list[Wake | None] = []

        async def wait() -> None:
            got.append(await wakes.recv_timeout(SOON))

        async with aio.fail_after(SOON), aio.open_task_group() as nursery:
            nursery.start_soon(wait)
            await aio.wait_all_tasks_blocked()
            await store.notify("ch")
        assert got == [Wake("ch")]


async def test_async_for_yields_wakes_and_ends_when_the_receiver_closes(store: Store) -> None:
    got: list[Wake] = []
    async with store.listen("ch") as wakes:

        async def consume() -> None:
            async for wake in wakes:
                got.append(wake)

        async with aio.fail_after(SOON), aio.open_task_group() as nursery:
            nursery.start_soon(consume)
            await aio.wait_all_tasks_blocked()
            await store.notify("ch")
            await wait_until(lambda: len(got) == 1)
            wakes.close()  # the loop ends; the nursery can exit
    assert got == [Wake("ch")]


async def test_receiver_is_closed_after_its_block(store: Store) -> None:
    async with store.listen("ch") as wakes:
        pass
    await store.notify("ch")
    assert await wakes.recv() is None
    with pytest.raises(Closed):
        wakes.try_recv()
    with pytest.raises(Closed):
        await wakes.recv_timeout(0.01)
    with pytest.raises(Closed):
        async with wakes:
            pass
    with pytest.raises(StopAsyncIteration):
        await wakes.__anext__()


async def test_receiver_used_before_entering_raises_closed(store: Store) -> None:
    wakes = store.listen("ch")
    with pytest.raises(Closed):
        wakes.try_recv()
    with pytest.raises(Closed):
        await wakes.recv_timeout(0.01)


async def test_receivers_close_when_the_store_closes(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    got: list[Wake | None] = []
    async with (
        aio.fail_after(SOON),
        aio.open_task_group() as nursery,
        backend.open(location, clock=clock) as s,
    ):
        wakes = s.listen("ch")
        await wakes.__aenter__()

        async def wait() -> None:
            got.append(await wakes.recv())

        nursery.start_soon(wait)
        await aio.wait_all_tasks_blocked()
    assert got == [None]
    with pytest.raises(Closed):
        wakes.try_recv()
    with pytest.raises(Closed):
        await wakes.recv_timeout(0.01)


@pytest.mark.producer
async def test_wakes_cross_stores_on_one_database(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    async with (
        backend.open(location, clock=clock) as listener,
        backend.open(location, clock=clock) as notifier,
        listener.listen("ch") as wakes,
        listener.listen("other") as other,
    ):
        await notifier.notify("ch")
        assert await wakes.recv_timeout(SOON) == Wake("ch")
        assert other.try_recv() is None


@pytest.mark.producer
async def test_large_notify_payloads_follow_the_engine_limit(store: Store) -> None:
    """Postgres refuses NOTIFY payloads over 8000 bytes client-side; SQLite never does."""
    big = {"blob": "x" * 9000}
    async with store.listen("ch") as wakes:
        if store.engine == "postgres":
            with pytest.raises(PayloadTooLarge) as caught:
                await store.notify("ch", big)
            assert caught.value.limit == 8000
            async with store.transaction() as tx:
                with pytest.raises(PayloadTooLarge):
                    await tx.notify("ch", big)
            assert await wakes.recv_timeout(QUIET) is None
        else:
            await store.notify("ch", big)
            assert await wakes.recv_timeout(SOON) == Wake("ch")
            async with store.transaction() as tx:
                await tx.notify("ch", big)
            assert await wakes.recv_timeout(SOON) == Wake("ch")
