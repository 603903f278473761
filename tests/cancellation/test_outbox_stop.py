"""An outbox run stopped part way settles each message it claimed by what
happened to it (the worker's settler and shutdown, alkstore/services/worker/):
delivered ones acked, failed ones retried, the rest handed back at once with
their attempt refunded.

test_operations.py cancels ``run_once`` at random moments; here each moment
is chosen, so every path is taken on every backend, every time.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from alkstore import Outbox, Store
from tests.contract import aio


class Stop(BaseException):
    """Not an ``Exception``: ends the run as a cancellation would."""


async def stopped_run(ob: Outbox, deliver: Callable[..., Awaitable[None]]) -> bool:
    """Run ``ob.run_once`` in a task that ``deliver(payload, group)`` may
    cancel; returns whether run_once returned."""
    returned = []

    async def run(group: Any) -> None:
        returned.append(await ob.run_once(functools.partial(deliver, group=group), batch=4))

    async with aio.fail_after(10), aio.open_task_group() as group:
        group.start_soon(run, group)
    return bool(returned)


async def states(ob: Outbox, ids: list[int]) -> list[tuple[str, int] | None]:
    """Each message's (state, attempts); ``None`` once acked. A ready
    message is ``pending`` and due now; a retried one is ``scheduled``."""
    out: list[tuple[str, int] | None] = []
    for job_id in ids:
        info = await ob.queue.get_job(job_id)
        if info is None:
            out.append(None)
        elif info.state == "pending" and info.last_error is not None:
            out.append(("retried", info.attempts))
        else:
            out.append((info.state, info.attempts))
    return out


async def test_cancelled_in_a_delivery(store: Store) -> None:
    """Cancelled while delivering the second message: the first is acked,
    the second and the two never reached are back, due now, attempt refunded."""
    ob = store.outbox("o")
    ids = await ob.queue.enqueue_batch([0, 1, 2, 3])
    calls: list[int] = []

    async def deliver(payload: Any, group: Any) -> None:
        calls.append(payload)
        if payload == 1:
            group.cancel()
            await aio.sleep(5)  # in flight when the cancel lands

    assert not await stopped_run(ob, deliver)
    assert calls == [0, 1]
    assert await states(ob, ids) == [None, ("pending", 0), ("pending", 0), ("pending", 0)]
    stats = await ob.stats()
    assert (stats.ready, stats.processing) == (3, 0)


async def test_cancelled_after_a_failure(store: Store) -> None:
    """Cancelled as a delivery fails, before its retry is recorded: the retry
    is still recorded, the one delivered before is acked, the rest handed back."""
    ob = store.outbox("o")
    ids = await ob.queue.enqueue_batch([0, 1, 2, 3])

    async def deliver(payload: Any, group: Any) -> None:
        if payload == 1:
            group.cancel()  # lands at the retry's start
            raise RuntimeError("refused")

    assert not await stopped_run(ob, deliver)
    assert await states(ob, ids) == [None, ("retried", 1), ("pending", 0), ("pending", 0)]
    info = await ob.queue.get_job(ids[1])
    assert info is not None and info.last_error == "RuntimeError: refused"


async def test_cancelled_before_the_ack(store: Store) -> None:
    """Every delivery returned, then the cancel landed before the ack: all
    four are acked all the same (handing them back would deliver them twice)."""
    ob = store.outbox("o")
    ids = await ob.queue.enqueue_batch([0, 1, 2, 3])

    async def deliver(payload: Any, group: Any) -> None:
        if payload == 3:
            group.cancel()  # lands at the ack's start

    assert not await stopped_run(ob, deliver)
    assert await states(ob, ids) == [None] * 4
    assert (await ob.stats()).processing == 0


async def test_stopped_by_a_base_exception(store: Store) -> None:
    """A delivery that raises a BaseException (not retried: it is not the
    message's fault) stops the run like a cancellation, and propagates."""
    ob = store.outbox("o")
    ids = await ob.queue.enqueue_batch([0, 1, 2, 3])

    async def deliver(payload: Any) -> None:
        if payload == 2:
            raise Stop

    with pytest.raises(Stop):
        await ob.run_once(deliver, batch=4)
    assert await states(ob, ids) == [None, None, ("pending", 0), ("pending", 0)]


async def test_a_finished_run_is_unchanged(store: Store) -> None:
    """Not stopped: successes acked, failures retried, the count returned."""
    ob = store.outbox("o")
    ids = await ob.queue.enqueue_batch([0, 1, 2, 3])

    async def deliver(payload: Any) -> None:
        if payload == 1:
            raise RuntimeError("refused")

    assert await ob.run_once(deliver, batch=4) == 3
    assert await states(ob, ids) == [None, ("retried", 1), None, None]
    assert await ob.run_once(deliver) == 0  # nothing due
