"""Sweeping more rows than one sweep batch holds, against the reference model.

The state machines stay far below the engine's sweep batch (1000 rows), so
these check the batching itself: every row due for the sweep is buried by one
``sweep_expired()``, and rows it must leave alone (a passed deadline under a
live claim) never hide the rows behind them.
"""

from __future__ import annotations

from datetime import timedelta

from alkstore.api.queue import Queue
from alkstore.api.store import Store
from alkstore.runner.runtime import ManualClock
from tests.model import QueueModel

US = 1_000_000
BATCH = 1000  # the engine's sweep batch; these tests need more rows than that


async def enqueue_expiring(q: Queue, model: QueueModel, n: int, now: int) -> list[int]:
    """``n`` jobs with a 5 s deadline, in the store and in the model."""
    payloads = [{"i": i} for i in range(n)]
    ids = await q.enqueue_batch(payloads, expires=timedelta(seconds=5))
    for job_id, payload in zip(ids, payloads, strict=True):
        model.enqueue(q.name, payload, now_us=now, expires_at_us=now + 5 * US, job_id=job_id)
    return ids


async def test_one_sweep_buries_more_than_a_batch(store: Store, clock: ManualClock) -> None:
    q = store.queue("bulk")
    model = QueueModel()
    await enqueue_expiring(q, model, BATCH + 7, clock.now_us())
    clock.advance(10)
    assert await q.sweep_expired() == model.sweep(clock.now_us(), "bulk") == BATCH + 7
    assert await q.stats() == model.stats("bulk", clock.now_us())


async def test_live_claims_past_deadline_do_not_hide_expired_jobs(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("bulk", visibility_timeout=60)
    model = QueueModel()
    await enqueue_expiring(q, model, BATCH + 5, clock.now_us())
    # All of them claimed: live claims for 60 s, which the sweep must respect.
    assert len(await q.claim_batch("w", BATCH + 5)) == BATCH + 5
    assert len(model.claim("bulk", "w", BATCH + 5, clock.now_us(), 60 * US)) == BATCH + 5
    # Later jobs that nobody claims before their deadline.
    late = await enqueue_expiring(q, model, 3, clock.now_us())
    clock.advance(10)  # every deadline passed; the claims are still live
    assert await q.sweep_expired() == model.sweep(clock.now_us(), "bulk") == 3
    assert [await q.get_job(i) for i in late] == [model.get_job("bulk", i) for i in late]
    assert await q.stats() == model.stats("bulk", clock.now_us())
    clock.advance(60)  # the claims lapse: now they go too
    assert await q.sweep_expired() == model.sweep(clock.now_us(), "bulk") == BATCH + 5
    assert await q.stats() == model.stats("bulk", clock.now_us())
