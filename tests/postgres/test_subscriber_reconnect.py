"""Rule: a stream subscriber rides out dropped connections. Invariant:
whatever backends of the subscriber's store the server terminates (pooled
ones mid-read included, the listening one too), ``async for`` over the
receiver never raises and never ends: every event published arrives, in
order, once."""

from __future__ import annotations

import trio

from .pg import SOON, app_name, asql, backends_of, open_pg

TRIALS = 20


async def _terminate_without_waiting(name: str) -> int:
    """``pg_terminate_backend`` on every backend of ``name``, not waiting for
    them to go: the store may take a connection whose end is still on its way."""
    pids = [pid for pid, _, _ in await backends_of(name)]
    for pid in pids:
        await asql("SELECT pg_terminate_backend(%s)", (pid,))
    return len(pids)


async def test_a_subscriber_rides_out_terminated_connections(schema: str) -> None:
    name = app_name()
    async with (
        open_pg(schema, application_name=name, pool_size=2) as store,
        open_pg(schema) as publisher,
    ):
        stream = publisher.stream("s")
        got: list[int] = []
        with trio.fail_after(SOON * TRIALS):
            async with store.stream("s").subscribe("c", backstop=0.2) as events:
                for trial in range(TRIALS):
                    killed = await _terminate_without_waiting(name)
                    assert killed >= 1
                    await stream.publish(trial)
                    with trio.fail_after(SOON):
                        event = await events.recv()
                    assert event is not None, "the receiver ended"
                    got.append(event.payload)
        assert got == list(range(TRIALS))


async def test_a_read_retries_once_on_a_fresh_connection(schema: str) -> None:
    """A read-only plan whose pooled connection turns out dead runs again on
    a new one, so the caller never sees the drop."""
    name = app_name()
    async with open_pg(schema, application_name=name, pool_size=1) as store:
        q = store.queue("q")
        await q.enqueue(1)
        for _ in range(5):
            await _terminate_without_waiting(name)
            assert (await q.stats()).ready == 1
