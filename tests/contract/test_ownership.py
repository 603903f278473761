"""Ownership tokens, run_at as "when the job last became due", and what
``stats().ready`` counts."""

from __future__ import annotations

from alkstore import ManualClock, Store

US = 1_000_000


async def test_a_released_handle_never_owns_a_later_claim_by_the_same_worker(
    store: Store,
) -> None:
    q = store.queue("q", visibility_timeout=30)
    await q.enqueue("x")
    first = await q.claim_one("w")
    assert first is not None and first.attempts == 1
    assert await first.release(refund=True) is True
    second = await q.claim_one("w")
    # The refund gave the attempt back, so worker and attempts match the old
    # handle's; the claim number does not.
    assert second is not None and second.attempts == first.attempts
    assert await first.ack() is False
    assert await first.heartbeat() is False
    assert await first.fail("stale") is False
    assert await second.ack() is True


async def test_a_requeued_dead_letter_does_not_revive_old_handles(store: Store) -> None:
    q = store.queue("q")
    job_id = await q.enqueue("x")
    first = await q.claim_one("w")
    assert first is not None and await first.fail("boom") is True
    assert await q.requeue_dead(job_id) is True
    again = await q.claim_one("w")
    assert again is not None and again.id == job_id and again.attempts == 1
    assert await first.ack() is False
    assert await again.ack() is True


async def test_run_at_is_when_the_job_last_became_due(store: Store, clock: ManualClock) -> None:
    q = store.queue("q", visibility_timeout=10)
    old = await q.enqueue("old")
    clock.advance(1)
    await q.enqueue("newer")
    first = await q.claim_one("w")
    assert first is not None and first.id == old
    lapse = first.claim_expires_at
    clock.advance(11)  # the claim lapses: the job became due again at `lapse`
    jobs = await q.claim_batch("w2", 2)
    # "newer" has been due since t=1, "old" only since its claim lapsed at t=10.
    assert [j.payload for j in jobs] == ["newer", "old"]
    assert jobs[1].run_at == lapse
    clock.advance(1)
    assert await jobs[0].release() is True
    info = await q.get_job(jobs[0].id)
    assert info is not None and info.state == "pending"
    assert info.run_at.timestamp() * US == clock.now_us()


async def test_ready_counts_only_jobs_claimable_now(store: Store, clock: ManualClock) -> None:
    q = store.queue("q", max_attempts=1)
    await q.enqueue("spent")
    spent = await q.claim_one("w")
    assert spent is not None and await spent.release(refund=False) is True
    # "spent" is pending again with no attempts left: never claimable.
    await q.enqueue("expiring", expires=5)
    assert (await q.stats()).ready == 1  # "expiring" is still claimable
    clock.advance(6)
    stats = await q.stats()
    assert stats.ready == 0 and stats.scheduled == 0
    assert await q.sweep_expired() == 2
    assert (await q.stats()).dead == 2
