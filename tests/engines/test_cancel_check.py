"""The worker's cancel check (``protocol.queues.cancelled_among``): which
of the jobs a worker holds were cancelled, asked in one statement for all of
them (``Dialect.cancelled_among``), on every backend. What the worker does
with the answer is ``tests/contract/test_cancel_running.py``'s; the
statement's plan on each engine is in ``test_sqlite_query_plans.py`` and
``test_postgres_dialect.py``."""

from __future__ import annotations

from alkstore import Store
from alkstore.protocol.plans.queues import cancelled_among


async def test_the_cancel_check_tells_a_cancelled_job_from_every_other_place(
    store: Store,
) -> None:
    # A job live (pending or processing), dead, or acked into history was
    # not cancelled; one cancelled into history, or gone from a queue that
    # keeps none, was (as is an id never seen: the worker only asks about
    # jobs it held).
    q = store.queue("q")
    await q.set_retention(history=3600, dead=None)
    pending = await q.enqueue("pending", delay=3600)
    running, dead, acked, cancelled = await q.enqueue_batch(["r", "d", "a", "c"])
    jobs = {job.id: job for job in await q.claim_batch("w", 4)}
    assert set(jobs) == {running, dead, acked, cancelled}
    assert await jobs[dead].fail("no") and await jobs[acked].ack()
    assert await q.cancel(cancelled)
    plain = store.queue("plain")  # keeps no history
    gone = await plain.enqueue("x")
    assert await plain.cancel(gone)

    async def check(queue: str, ids: list[int]) -> list[int]:
        return await store._core.run(cancelled_among(store._core.dialect, queue, ids))

    assert await check("q", [pending, running, dead, acked, cancelled]) == [cancelled]
    assert await check("plain", [10**12, gone]) == [10**12, gone]  # the caller's order
    assert await check("q", []) == []
