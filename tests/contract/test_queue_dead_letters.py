"""Dead letters: inspect, requeue with fresh attempts, purge."""

from __future__ import annotations

import pytest

from alkstore import InvalidArgument, ManualClock, Queue, QueueStats, Store

from .helpers import at


async def bury(q: Queue, payload: object, error: str = "boom") -> int:
    """Enqueue, claim and fail one job; returns its id."""
    job_id = await q.enqueue(payload)
    job = await q.claim_one("w")
    assert job is not None and job.id == job_id
    assert await job.fail(error) is True
    return job_id


@pytest.mark.producer
async def test_dead_letters_lists_dead_jobs_with_reason_and_error(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=1)
    failed = await bury(q, {"a": 1}, "bad input")
    clock.advance(1)
    exhausted = await q.enqueue({"b": 2}, priority=4)
    job = await q.claim_one("w")
    assert job is not None
    assert await job.retry(error="still failing") is True
    clock.advance(1)
    expired = await q.enqueue({"c": 3}, expires=0.5)
    clock.advance(1)
    assert await q.sweep_expired() == 1

    dead = await q.dead_letters()
    assert [d.id for d in dead] == [failed, exhausted, expired]
    assert [d.state for d in dead] == ["dead", "dead", "dead"]
    assert [d.dead_reason for d in dead] == ["failed", "max_attempts", "expired"]
    assert [d.last_error for d in dead] == ["bad input", "still failing", None]
    assert [d.payload for d in dead] == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert [d.attempts for d in dead] == [1, 1, 0]
    assert [d.queue for d in dead] == ["jobs"] * 3
    assert dead[1].priority == 4
    assert [d.died_at for d in dead] == [at(clock, -3), at(clock, -2), at(clock)]
    assert all(d.claim_expires_at is None for d in dead)
    assert await q.stats() == QueueStats(0, 0, 0, 3)


@pytest.mark.producer
async def test_dead_letters_respects_limit_and_order(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs")
    ids = []
    for i in range(5):
        ids.append(await bury(q, i))
        clock.advance(1)
    assert [d.id for d in await q.dead_letters(limit=2)] == ids[:2]
    assert [d.id for d in await q.dead_letters(limit=100)] == ids
    with pytest.raises(InvalidArgument):
        await q.dead_letters(limit=0)


@pytest.mark.producer
async def test_dead_letters_are_scoped_to_their_queue(store: Store) -> None:
    a = store.queue("a")
    b = store.queue("b")
    a_id = await bury(a, "a")
    assert await b.dead_letters() == []
    assert await b.requeue_dead(a_id) is False
    assert await b.purge_dead() == 0
    assert await b.get_job(a_id) is None
    assert (await b.stats()).dead == 0
    assert [d.id for d in await a.dead_letters()] == [a_id]


@pytest.mark.producer
async def test_requeue_dead_gives_fresh_attempts_and_makes_it_claimable(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=2)
    job_id = await q.enqueue({"x": 1}, priority=3)
    for _ in range(2):
        job = await q.claim_one("w")
        assert job is not None
        assert await job.retry(delay=0, error="nope") is True
    assert (await q.get_job(job_id)).state == "dead"  # type: ignore[union-attr]
    clock.advance(60)

    assert await q.requeue_dead(job_id) is True
    assert await q.dead_letters() == []
    got = await q.get_job(job_id)
    assert got is not None
    assert got.state == "pending"
    assert got.attempts == 0
    assert got.max_attempts == 2
    assert got.run_at == at(clock)
    assert got.payload == {"x": 1}
    assert got.priority == 3
    assert await q.stats() == QueueStats(1, 0, 0, 0)

    # The full attempt budget is available again.
    job = await q.claim_one("w")
    assert job is not None and job.id == job_id
    assert job.attempts == 1
    assert await job.retry(delay=0) is True
    job = await q.claim_one("w")
    assert job is not None and job.attempts == 2
    assert await job.ack() is True
    assert await q.get_job(job_id) is None


@pytest.mark.producer
async def test_requeue_dead_of_an_expired_job_drops_the_deadline(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x", expires=1)
    clock.advance(2)
    assert await q.sweep_expired() == 1
    assert await q.requeue_dead(job_id) is True
    got = await q.get_job(job_id)
    assert got is not None and got.expires_at is None
    job = await q.claim_one("w")
    assert job is not None and job.id == job_id


@pytest.mark.producer
async def test_requeue_dead_returns_false_for_unknown_or_live_jobs(store: Store) -> None:
    q = store.queue("jobs")
    dead = await bury(q, "dead")
    live = await q.enqueue("live")
    assert await q.requeue_dead(live) is False
    assert await q.requeue_dead(987_654) is False
    assert await q.requeue_dead(dead) is True
    assert await q.requeue_dead(dead) is False  # already live again
    assert await q.stats() == QueueStats(2, 0, 0, 0)


@pytest.mark.producer
async def test_purge_dead_removes_every_dead_letter(store: Store) -> None:
    q = store.queue("jobs")
    ids = [await bury(q, i) for i in range(3)]
    live = await q.enqueue("live")
    assert await q.purge_dead() == 3
    assert await q.dead_letters() == []
    for job_id in ids:
        assert await q.get_job(job_id) is None
    assert await q.get_job(live) is not None
    assert await q.purge_dead() == 0
    assert await q.stats() == QueueStats(1, 0, 0, 0)


@pytest.mark.producer
async def test_purge_dead_before_removes_only_older_letters(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    old = await bury(q, "old")
    clock.advance(10)
    cutoff = at(clock)
    clock.advance(10)
    new = await bury(q, "new")
    assert await q.purge_dead(before=cutoff) == 1
    assert [d.id for d in await q.dead_letters()] == [new]
    assert await q.get_job(old) is None
    with pytest.raises(InvalidArgument):
        await q.purge_dead(before=cutoff.replace(tzinfo=None))
    assert [d.id for d in await q.dead_letters()] == [new]


@pytest.mark.producer
async def test_purge_dead_by_ids_removes_only_those_dead_letters_of_the_queue(
    store: Store, clock: ManualClock
) -> None:
    q, other = store.queue("jobs"), store.queue("other")
    first, second, third = [await bury(q, i) for i in range(3)]
    elsewhere = await bury(other, "x")
    live = await q.enqueue("live")
    # Ids that are not dead letters here (live, another queue's, unknown) are left alone.
    assert await q.purge_dead(ids=[first, third, live, elsewhere, 999_999]) == 2
    assert [d.id for d in await q.dead_letters()] == [second]
    assert [d.id for d in await other.dead_letters()] == [elsewhere]
    assert await q.get_job(live) is not None
    assert await q.purge_dead(ids=[]) == 0
    with pytest.raises(InvalidArgument):
        await q.purge_dead(before=at(clock), ids=[second])
    with pytest.raises(InvalidArgument):
        await q.purge_dead(ids=["1"])  # type: ignore[list-item]
    assert [d.id for d in await q.dead_letters()] == [second]
