"""The runtime seam's ``shield(timeout)``, identical on trio and asyncio:
the block is protected from the caller's cancellation, yet gives up after
``timeout`` seconds, reporting it in ``cancelled_caught``."""

from __future__ import annotations

import asyncio

import trio
import trio.lowlevel

from alkstore.io_asyncio.runtime import AsyncioRuntime
from alkstore.io_trio.runtime import TrioRuntime


async def test_trio_shield_outlives_the_callers_cancel_but_not_its_timeout() -> None:
    rt = TrioRuntime()
    finished: list[str] = []
    with trio.CancelScope() as outer:
        outer.cancel()
        with rt.shield(0.05) as quick:
            await trio.sleep(0.01)  # protected: the outer cancel waits
            finished.append("quick")
        with rt.shield(0.05) as slow:
            await trio.sleep(10)  # gives up after 0.05 s
            finished.append("slow")
        await trio.lowlevel.checkpoint()  # the caller's own cancel lands here
        finished.append("after")
    assert finished == ["quick"]
    assert not quick.cancelled_caught and slow.cancelled_caught


def test_asyncio_shield_gives_up_after_its_timeout() -> None:
    async def main() -> tuple[bool, bool, bool]:
        rt = AsyncioRuntime()
        with rt.shield(0.05) as quick:
            await rt.sleep(0.01)
        with rt.shield(0.05) as slow:
            await rt.sleep(10)
        task = asyncio.current_task()
        assert task is not None
        # The timeout's cancel was absorbed: nothing is left pending.
        await asyncio.sleep(0.01)
        return quick.cancelled_caught, slow.cancelled_caught, task.cancelling() == 0

    assert asyncio.run(main()) == (False, True, True)


def test_asyncio_shield_keeps_a_cancel_that_was_already_under_way() -> None:
    """A shutdown's cancel caught before the block (the worker settling a
    finished job) still ends the task afterwards; the timeout absorbs only
    its own."""

    async def worker(log: list[str]) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            rt = AsyncioRuntime()
            with rt.shield(0.05) as scope:
                await rt.sleep(10)  # settling that never gets an answer
            log.append(f"gave up={scope.cancelled_caught}")
            raise

    async def main() -> list[str]:
        log: list[str] = []
        task = asyncio.create_task(worker(log))
        await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            log.append("cancelled")
        return log

    assert asyncio.run(main()) == ["gave up=True", "cancelled"]
