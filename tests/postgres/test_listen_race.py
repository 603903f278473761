"""Rule: a receiver hears its channel once ``listen()`` has returned, even
when another receiver's ``listen()`` on the same channel was cancelled
before its LISTEN reached the server (contract section 3, notify/listen).

The listening connection sends one command at a time, so a LISTEN can be
queued behind another; this test holds the queue, starts two receivers on
one channel, cancels the first while its LISTEN is still queued, and
checks the second one hears a NOTIFY from another store.
"""

from __future__ import annotations

import trio
import trio.testing

from alkstore import Wake

from .pg import SOON, open_pg
from .test_reconnect import wait_listener


async def test_second_receiver_hears_after_the_first_listen_is_cancelled(schema: str) -> None:
    async with open_pg(schema) as store, open_pg(schema, pool_size=1) as other:
        await wait_listener(store)
        command_lock = store._executor._listener._command_lock
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
