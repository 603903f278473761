"""Rule: a receiver hears its channel once ``listen()`` has returned, even
when another receiver's ``listen()`` on the same channel was cancelled
before its LISTEN reached the server, and even when it opened while the
listener was reconnecting (contract section 3, notify/listen).

The listening connection sends one command at a time, so a LISTEN can be
queued behind another; this test holds the queue, starts two receivers on
one channel, cancels the first while its LISTEN is still queued, and
checks the second one hears a NOTIFY from another store.
"""

from __future__ import annotations

import pytest
import trio
import trio.testing

from alkstore import LISTENER_RECONNECTED, Wake
from alkstore.runner.postgres.conn import PgConnection

from .pg import SOON, open_pg, terminate_backend
from .test_reconnect import wait_listener


async def test_second_receiver_hears_after_the_first_listen_is_cancelled(schema: str) -> None:
    async with open_pg(schema) as store, open_pg(schema, pool_size=1) as other:
        await wait_listener(store)
        command_lock = store._core.executor._listener._command_lock
        await command_lock.acquire()  # every LISTEN now queues behind us
        first_scope = trio.CancelScope()
        second_ready = trio.Event()
        second_heard = trio.Event()
        heard: list[Wake] = []

        async def first() -> None:
            with first_scope:
                async with store.listen("alpha"):
                    await trio.sleep_forever()

        async def second() -> None:
            async with store.listen("alpha") as receiver:
                second_ready.set()
                heard.append(await receiver.recv())
                second_heard.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            first_scope.cancel()  # its LISTEN was never sent
            await trio.testing.wait_all_tasks_blocked()
            command_lock.release()
            with trio.fail_after(SOON):
                await second_ready.wait()
            await other.notify("alpha")
            with trio.fail_after(SOON):
                await second_heard.wait()
        assert heard == [Wake("alpha")]


async def test_a_channel_listened_to_during_a_reconnect_is_heard_after_it(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reconnect LISTENs again on every channel; one whose receiver
    opened while those LISTENs were on their way is included."""
    gate, entered = trio.Event(), trio.Event()
    real_command = PgConnection.command

    async def held_command(self: PgConnection, sql: str) -> None:
        if sql.startswith("LISTEN") and not gate.is_set():
            entered.set()
            await gate.wait()
        await real_command(self, sql)

    async with (
        open_pg(schema) as store,
        open_pg(schema, pool_size=1) as other,
        store.listen("alpha") as alpha,
    ):
        old = await wait_listener(store)
        monkeypatch.setattr(PgConnection, "command", held_command)
        await terminate_backend(old)
        with trio.fail_after(SOON):
            await entered.wait()  # the reconnect is re-LISTENing on "alpha"
        async with store.listen("beta") as beta:
            gate.set()
            await wait_listener(store, not_pid=old)
            # Taken before any notify: wakes coalesce, and a notify landing
            # on a pending reconnect wake would be folded into it.
            assert await beta.recv_timeout(SOON) == Wake(LISTENER_RECONNECTED)
            assert await alpha.recv_timeout(SOON) == Wake(LISTENER_RECONNECTED)
            await other.notify("beta")
            assert await beta.recv_timeout(SOON) == Wake("beta")
        await other.notify("alpha")
        assert await alpha.recv_timeout(SOON) == Wake("alpha")
