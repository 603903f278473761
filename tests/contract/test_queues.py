"""Queues: enqueue options, claim order, ownership, retry/fail/cancel, expiry, sweep, stats."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import Backoff, InvalidArgument, Job, JobInfo, ManualClock, Queue, QueueStats, Store

from .helpers import at

# A backoff without jitter, so retry delays are exact: 2 s, 4 s, 8 s, ...
EXACT = Backoff.of(base=2.0, cap=100.0, factor=2.0, jitter=0.0)


async def claim(q: Queue, worker: str = "w1") -> Job:
    job = await q.claim_one(worker)
    assert job is not None
    return job


async def info(q: Queue, job_id: int) -> JobInfo:
    got = await q.get_job(job_id)
    assert got is not None
    return got


# -- enqueue and inspection ---------------------------------------------------


@pytest.mark.producer
async def test_enqueue_returns_an_id_and_get_job_reports_pending(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=4)
    job_id = await q.enqueue({"n": 1}, priority=7)
    got = await info(q, job_id)
    assert got.id == job_id
    assert got.queue == "jobs"
    assert got.state == "pending"
    assert got.payload == {"n": 1}
    assert got.priority == 7
    assert got.attempts == 0
    assert got.max_attempts == 4
    assert got.run_at == at(clock)
    assert got.created_at == at(clock)
    assert got.expires_at is None
    assert got.claimed_by is None
    assert got.claim_expires_at is None
    assert got.last_error is None
    assert got.dead_reason is None


@pytest.mark.producer
async def test_job_ids_are_distinct_and_increasing(store: Store) -> None:
    q = store.queue("jobs")
    ids = [await q.enqueue(i) for i in range(5)]
    assert ids == sorted(ids)
    assert len(set(ids)) == 5


async def test_claim_sets_owner_attempts_and_claim_expiry(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=30)
    job_id = await q.enqueue(["payload", 1, 2.5, True, None], priority=3)
    clock.advance(1)
    job = await claim(q, "worker-a")
    assert job.id == job_id
    assert job.queue == "jobs"
    assert job.payload == ["payload", 1, 2.5, True, None]
    assert job.priority == 3
    assert job.attempts == 1
    assert job.max_attempts == 3
    assert job.worker_id == "worker-a"
    assert job.run_at == at(clock, -1)
    assert job.created_at == at(clock, -1)
    assert job.expires_at is None
    assert job.claim_expires_at == at(clock, 30)
    assert job.store is store
    got = await info(q, job_id)
    assert got.state == "processing"
    assert got.attempts == 1
    assert got.claimed_by == "worker-a"
    assert got.claim_expires_at == at(clock, 30)


async def test_claim_on_an_empty_queue_returns_none(store: Store) -> None:
    q = store.queue("jobs")
    assert await q.claim_one("w") is None
    assert await q.claim_batch("w", 10) == []


async def test_a_claimed_job_is_not_claimed_again_while_the_claim_is_live(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    await q.enqueue(1)
    await claim(q, "w1")
    clock.advance(9.999)
    assert await q.claim_one("w2") is None


@pytest.mark.producer
async def test_queues_are_independent(store: Store) -> None:
    a = store.queue("a")
    b = store.queue("b")
    job_id = await a.enqueue("for a")
    assert await b.claim_one("w") is None
    assert await b.get_job(job_id) is None
    assert await b.cancel(job_id) is False
    assert await b.stats() == QueueStats(0, 0, 0, 0)
    job = await claim(a)
    assert job.id == job_id


async def test_ack_deletes_the_job_and_it_is_never_delivered_again(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=5)
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await job.ack() is True
    assert await q.get_job(job_id) is None
    clock.advance(3600)
    assert await q.claim_one("w2") is None
    assert await q.sweep_expired() == 0
    assert await q.stats() == QueueStats(0, 0, 0, 0)
    assert await q.dead_letters() == []


# -- claim order --------------------------------------------------------------


@pytest.mark.producer
async def test_claim_order_is_priority_desc_then_run_at_then_id(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    a = await q.enqueue("a")  # prio 0, run_at now
    b = await q.enqueue("b", priority=5)  # prio 5
    c = await q.enqueue("c", run_at=at(clock, -10))  # prio 0, earlier run_at
    d = await q.enqueue("d", priority=5)  # prio 5, later id than b
    e = await q.enqueue("e", priority=-1)
    f = await q.enqueue("f")  # prio 0, same run_at as a, later id
    order = [(await claim(q)).id for _ in range(6)]
    assert order == [b, d, c, a, f, e]
    assert await q.claim_one("w1") is None


async def test_claim_batch_returns_jobs_in_claim_order(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs")
    low = await q.enqueue("low", priority=1)
    high = await q.enqueue("high", priority=9)
    old = await q.enqueue("old", priority=1, run_at=at(clock, -5))
    rest = await q.enqueue("rest")
    jobs = await q.claim_batch("w", 3)
    assert [j.id for j in jobs] == [high, old, low]
    assert all(j.attempts == 1 and j.worker_id == "w" for j in jobs)
    more = await q.claim_batch("w", 10)
    assert [j.id for j in more] == [rest]
    for job in [*jobs, *more]:
        assert await job.ack() is True


async def test_delayed_jobs_are_claimed_in_run_at_order(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs")
    three = await q.enqueue(3, delay=3)
    one = await q.enqueue(1, delay=1)
    two = await q.enqueue(2, delay=2)
    clock.advance(5)
    assert [(await claim(q)).id for _ in range(3)] == [one, two, three]


async def test_claim_batch_rejects_a_non_positive_count(store: Store) -> None:
    q = store.queue("jobs")
    await q.enqueue(1)
    for n in (0, -1):
        with pytest.raises(InvalidArgument):
            await q.claim_batch("w", n)
    assert (await q.stats()).ready == 1


# -- delay and run_at -----------------------------------------------------------


@pytest.mark.producer
async def test_delay_makes_a_job_claimable_only_from_its_run_at(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("later", delay=10)
    assert (await info(q, job_id)).run_at == at(clock, 10)
    assert await q.stats() == QueueStats(ready=0, scheduled=1, processing=0, dead=0)
    clock.advance(9.999999)
    assert await q.claim_one("w") is None
    clock.advance(0.000001)  # run_at <= now: due exactly at run_at
    assert await q.stats() == QueueStats(ready=1, scheduled=0, processing=0, dead=0)
    assert (await claim(q)).id == job_id


@pytest.mark.producer
async def test_run_at_makes_a_job_claimable_only_from_then(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    when = at(clock, 60)
    job_id = await q.enqueue("at", run_at=when)
    assert (await info(q, job_id)).run_at == when
    clock.advance(59.5)
    assert await q.claim_one("w") is None
    clock.advance(0.5)
    job = await claim(q)
    assert job.id == job_id
    assert job.run_at == when


@pytest.mark.producer
async def test_run_at_in_the_past_is_due_now(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("past", run_at=at(clock, -3600))
    assert (await claim(q)).id == job_id


@pytest.mark.producer
async def test_sub_second_and_timedelta_delays_are_honoured(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    quarter = await q.enqueue("q", delay=0.25)
    td = await q.enqueue("td", delay=timedelta(milliseconds=1500))
    assert (await info(q, quarter)).run_at == at(clock, 0.25)
    assert (await info(q, td)).run_at == at(clock, 1.5)
    clock.advance(0.2)
    assert await q.claim_one("w") is None
    clock.advance(0.05)
    assert (await claim(q)).id == quarter
    clock.advance(1.2)
    assert await q.claim_one("w") is None
    clock.advance(0.05)
    assert (await claim(q)).id == td


@pytest.mark.producer
async def test_max_attempts_per_job_overrides_the_queue_default(store: Store) -> None:
    q = store.queue("jobs", max_attempts=3)
    default = await q.enqueue("d")
    custom = await q.enqueue("c", max_attempts=7)
    assert (await info(q, default)).max_attempts == 3
    assert (await info(q, custom)).max_attempts == 7


@pytest.mark.producer
async def test_enqueue_batch_adds_every_payload_in_order(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs")
    ids = await q.enqueue_batch([{"i": i} for i in range(4)], delay=1, priority=2)
    assert len(ids) == 4 and ids == sorted(ids)
    assert await q.enqueue_batch([]) == []
    assert await q.stats() == QueueStats(0, 4, 0, 0)
    clock.advance(1)
    jobs = await q.claim_batch("w", 10)
    assert [j.id for j in jobs] == ids
    assert [j.payload for j in jobs] == [{"i": i} for i in range(4)]
    assert {j.priority for j in jobs} == {2}


@pytest.mark.producer
async def test_each_batch_id_names_its_own_payload_across_statements(store: Store) -> None:
    """A batch larger than one INSERT (1,000 jobs) still hands back, in
    order, the id of each payload, with expiry set or not."""
    q = store.queue("jobs")
    await q.enqueue("before")
    payloads = [{"i": i} for i in range(2345)]
    ids = await q.enqueue_batch(payloads, expires=3600)
    more = await q.enqueue_batch(["x", "y"])
    assert len(set(ids)) == len(payloads) and ids == sorted(ids)
    assert ids[-1] < more[0] < more[1]
    for i in (0, 999, 1000, 1001, 2344):
        got = await info(q, ids[i])
        assert got.payload == payloads[i] and got.expires_at is not None
    assert (await info(q, more[1])).payload == "y"
    assert (await info(q, more[1])).expires_at is None


# -- ownership ------------------------------------------------------------------


async def test_settling_twice_returns_false(store: Store) -> None:
    q = store.queue("jobs")
    await q.enqueue(1)
    job = await claim(q)
    assert await job.ack() is True
    assert await job.ack() is False
    assert await job.retry(error="late") is False
    assert await job.fail("late") is False
    assert await job.heartbeat() is False
    assert await q.dead_letters() == []
    assert await q.stats() == QueueStats(0, 0, 0, 0)


async def test_handle_ops_after_claim_expiry_return_false_and_change_nothing(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10, max_attempts=5)
    job_id = await q.enqueue("x")
    job = await claim(q)
    before = await info(q, job_id)
    clock.advance(10.5)
    assert await job.heartbeat(30) is False
    assert await job.retry(delay=100, error="late retry") is False
    assert await job.fail("late fail") is False
    assert await job.ack() is False
    after = await info(q, job_id)
    assert after == before  # still processing by w1 with a lapsed claim, untouched
    assert after.state == "processing"
    assert after.last_error is None
    assert await q.dead_letters() == []
    # The lapsed claim is claimable again (at-least-once), with a new attempt.
    again = await claim(q, "w2")
    assert again.id == job_id
    assert again.attempts == 2
    assert await again.ack() is True


async def test_old_handle_gets_false_after_another_worker_reclaims(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10, max_attempts=5)
    job_id = await q.enqueue("x")
    old = await claim(q, "w1")
    clock.advance(11)
    new = await claim(q, "w2")
    assert new.id == job_id
    assert new.attempts == 2
    snapshot = await info(q, job_id)
    assert await old.ack() is False
    assert await old.retry(error="stale") is False
    assert await old.fail("stale") is False
    assert await old.heartbeat() is False
    assert await info(q, job_id) == snapshot
    assert snapshot.claimed_by == "w2"
    assert await new.ack() is True
    assert await q.get_job(job_id) is None


async def test_ownership_is_per_attempt_even_for_the_same_worker(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    await q.enqueue("x")
    first = await claim(q, "w")
    clock.advance(11)
    second = await claim(q, "w")
    assert second.attempts == 2
    assert await first.ack() is False
    assert await first.heartbeat() is False
    assert await second.ack() is True


async def test_handle_ops_after_retry_or_fail_return_false(store: Store) -> None:
    q = store.queue("jobs")
    retried_id = await q.enqueue("r")
    failed_id = await q.enqueue("f")
    retried = await claim(q)
    assert await retried.retry(delay=5) is True
    assert await retried.ack() is False
    assert await retried.heartbeat() is False
    failed = await claim(q)
    assert failed.id == failed_id
    assert await failed.fail("no") is True
    assert await failed.ack() is False
    assert await failed.retry() is False
    assert (await info(q, retried_id)).state == "pending"
    assert (await info(q, failed_id)).state == "dead"


# -- heartbeat ------------------------------------------------------------------


async def test_heartbeat_extends_the_claim(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    job_id = await q.enqueue("x")
    job = await claim(q)
    clock.advance(8)
    assert await job.heartbeat(20) is True
    assert job.claim_expires_at == at(clock, 20)
    assert (await info(q, job_id)).claim_expires_at == at(clock, 20)
    clock.advance(15)  # past the original claim expiry, within the extension
    assert await q.claim_one("w2") is None
    assert await job.ack() is True


async def test_heartbeat_defaults_to_the_visibility_timeout(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    await q.enqueue("x")
    job = await claim(q)
    clock.advance(6)
    assert await job.heartbeat() is True
    assert job.claim_expires_at == at(clock, 10)
    clock.advance(9)
    assert await q.claim_one("w2") is None
    clock.advance(1)
    assert await job.heartbeat() is False
    assert (await claim(q, "w2")).attempts == 2


# -- retry, fail ----------------------------------------------------------------


async def test_retry_with_a_delay_returns_the_job_to_pending(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=3)
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await job.retry(delay=30, error="try later") is True
    got = await info(q, job_id)
    assert got.state == "pending"
    assert got.attempts == 1
    assert got.run_at == at(clock, 30)
    assert got.claimed_by is None
    assert got.last_error == "try later"
    assert await q.stats() == QueueStats(0, 1, 0, 0)
    clock.advance(29.9)
    assert await q.claim_one("w") is None
    clock.advance(0.1)
    again = await claim(q)
    assert again.id == job_id
    assert again.attempts == 2


async def test_retry_without_a_delay_uses_the_queue_backoff(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=4, backoff=EXACT)
    job_id = await q.enqueue("x")
    expected = [2.0, 4.0, 8.0]  # base * 2 ** (attempts - 1)
    for attempt, delay in enumerate(expected, start=1):
        job = await claim(q)
        assert job.attempts == attempt
        assert await job.retry() is True
        assert (await info(q, job_id)).run_at == at(clock, delay)
        clock.advance(delay - 0.001)
        assert await q.claim_one("w") is None
        clock.advance(0.001)
    assert (await claim(q)).attempts == 4


async def test_backoff_is_capped(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", max_attempts=10, backoff=Backoff.of(base=1, cap=3, jitter=0))
    job_id = await q.enqueue("x")
    for attempt in range(1, 5):
        job = await claim(q)
        assert await job.retry() is True
        delay = min(3.0, 2.0 ** (attempt - 1))
        assert (await info(q, job_id)).run_at == at(clock, delay)
        clock.advance(delay)


async def test_jittered_backoff_stays_within_its_bounds(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", backoff=Backoff.of(base=10, cap=100, jitter=0.5))
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await job.retry() is True
    run_at = (await info(q, job_id)).run_at
    assert at(clock, 5) <= run_at <= at(clock, 10)


async def test_retry_keeps_the_error_text_of_an_exception(store: Store) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await job.retry(delay=0, error=ValueError("boom")) is True
    assert (await info(q, job_id)).last_error == "ValueError: boom"


async def test_retry_with_attempts_spent_moves_the_job_to_dead(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=2)
    job_id = await q.enqueue({"k": "v"})
    first = await claim(q)
    assert await first.retry(delay=0, error="first") is True
    second = await claim(q)
    assert second.attempts == 2
    assert await second.retry(delay=0, error="second") is True
    assert await q.claim_one("w") is None
    dead = await info(q, job_id)
    assert dead.state == "dead"
    assert dead.dead_reason == "max_attempts"
    assert dead.last_error == "second"
    assert dead.attempts == 2
    assert dead.payload == {"k": "v"}
    assert dead.died_at == at(clock)
    assert await q.stats() == QueueStats(0, 0, 0, 1)


async def test_fail_moves_the_job_straight_to_dead(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", max_attempts=10)
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await job.fail(RuntimeError("broken")) is True
    assert await q.claim_one("w") is None
    dead = await info(q, job_id)
    assert dead.state == "dead"
    assert dead.dead_reason == "failed"
    assert dead.last_error == "RuntimeError: broken"
    assert dead.attempts == 1
    assert dead.died_at == at(clock)
    assert await q.stats() == QueueStats(0, 0, 0, 1)


async def test_fail_keeps_the_last_retry_error_when_given_none(store: Store) -> None:
    q = store.queue("jobs", max_attempts=10)
    job_id = await q.enqueue("x")
    assert await (await claim(q)).retry(delay=0, error="earlier") is True
    assert await (await claim(q)).fail() is True
    assert (await info(q, job_id)).last_error == "earlier"


# -- cancel ---------------------------------------------------------------------


@pytest.mark.producer
async def test_cancel_a_pending_job(store: Store) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x", delay=5)
    assert await q.cancel(job_id) is True
    assert await q.get_job(job_id) is None
    assert await q.cancel(job_id) is False
    assert await q.stats() == QueueStats(0, 0, 0, 0)


async def test_cancel_a_processing_job_then_ack_returns_false(store: Store) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await q.cancel(job_id) is True
    assert await job.ack() is False
    assert await job.heartbeat() is False
    assert await job.retry() is False
    assert await job.fail("x") is False
    assert await q.get_job(job_id) is None
    assert await q.dead_letters() == []


@pytest.mark.producer
async def test_cancel_an_unknown_job_returns_false(store: Store) -> None:
    q = store.queue("jobs")
    assert await q.cancel(123456) is False


# -- expires --------------------------------------------------------------------


@pytest.mark.producer
async def test_expires_deadline_as_a_duration(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x", expires=10)
    assert (await info(q, job_id)).expires_at == at(clock, 10)
    clock.advance(9.9)
    job = await claim(q)
    assert job.expires_at == at(clock, 0.1)
    assert await job.ack() is True


async def test_a_job_is_never_claimed_after_its_deadline_and_sweep_buries_it(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    deadline = at(clock, 10)
    job_id = await q.enqueue("x", expires=deadline)
    clock.advance(10.001)
    assert await q.claim_one("w") is None
    assert await q.claim_batch("w", 5) == []
    assert await q.sweep_expired() == 1
    dead = await info(q, job_id)
    assert dead.state == "dead"
    assert dead.dead_reason == "expired"
    assert dead.expires_at == deadline
    assert dead.attempts == 0
    assert await q.stats() == QueueStats(0, 0, 0, 1)
    assert await q.sweep_expired() == 0


async def test_a_delayed_job_whose_deadline_comes_first_is_never_claimed(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x", delay=20, expires=10)
    clock.advance(25)
    assert await q.claim_one("w") is None
    assert await q.sweep_expired() == 1
    assert (await info(q, job_id)).dead_reason == "expired"


async def test_sweep_spares_a_live_claim_past_its_deadline(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=60)
    job_id = await q.enqueue("x", expires=10)
    job = await claim(q)
    clock.advance(20)
    assert await q.sweep_expired() == 0
    assert (await info(q, job_id)).state == "processing"
    assert await job.ack() is True


async def test_a_claimed_job_past_its_deadline_whose_claim_lapsed_is_swept(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=30, max_attempts=5)
    job_id = await q.enqueue("x", expires=10)
    job = await claim(q)
    clock.advance(31)
    assert await q.claim_one("w2") is None  # never reclaimed past the deadline
    assert await q.sweep_expired() == 1
    dead = await info(q, job_id)
    assert dead.dead_reason == "expired"
    assert dead.attempts == 1
    assert await job.ack() is False


async def test_a_job_retried_past_its_deadline_is_not_claimed_and_is_swept(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=5)
    job_id = await q.enqueue("x", expires=10)
    job = await claim(q)
    assert await job.retry(delay=20, error="again") is True
    clock.advance(25)
    assert await q.claim_one("w") is None
    assert await q.sweep_expired() == 1
    dead = await info(q, job_id)
    assert dead.dead_reason == "expired"
    assert dead.last_error == "again"


# -- sweep of lapsed claims -----------------------------------------------------


async def test_sweep_buries_a_lapsed_claim_with_no_attempts_left(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10, max_attempts=1)
    job_id = await q.enqueue("x")
    job = await claim(q)
    clock.advance(11)
    assert await q.claim_one("w2") is None  # no attempts left: never claimed again
    assert (await info(q, job_id)).state == "processing"
    assert await q.stats() == QueueStats(0, 0, 1, 0)
    assert await q.sweep_expired() == 1
    dead = await info(q, job_id)
    assert dead.state == "dead"
    assert dead.dead_reason == "claim_expired"
    assert dead.attempts == 1
    assert dead.claimed_by == "w1"
    assert await job.ack() is False
    assert await q.stats() == QueueStats(0, 0, 0, 1)


async def test_sweep_spares_a_live_claim_on_its_last_attempt(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", visibility_timeout=10, max_attempts=1)
    await q.enqueue("x")
    job = await claim(q)
    clock.advance(9)
    assert await q.sweep_expired() == 0
    assert await job.ack() is True


async def test_sweep_leaves_reclaimable_work_alone(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=10, max_attempts=3)
    await q.enqueue("pending")
    await q.enqueue("scheduled", delay=100)
    await q.enqueue("claimed")
    await claim(q)
    clock.advance(11)  # lapsed claim, but attempts remain: reclaim, not dead
    assert await q.sweep_expired() == 0
    assert await q.dead_letters() == []


async def test_sweep_is_scoped_to_its_queue(store: Store, clock: ManualClock) -> None:
    a = store.queue("a")
    b = store.queue("b")
    await a.enqueue("x", expires=1)
    clock.advance(2)
    assert await b.sweep_expired() == 0
    assert await a.sweep_expired() == 1
    assert (await b.stats()).dead == 0


# -- stats and get_job ----------------------------------------------------------


@pytest.mark.producer
async def test_stats_counts_each_state(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    assert await q.stats() == QueueStats(ready=0, scheduled=0, processing=0, dead=0)
    for i in range(5):
        await q.enqueue(i)
    await q.enqueue("s1", delay=100)
    await q.enqueue("s2", run_at=at(clock, 200))
    assert await q.stats() == QueueStats(ready=5, scheduled=2, processing=0, dead=0)
    a, b, c = await q.claim_batch("w", 3)
    assert await q.stats() == QueueStats(ready=2, scheduled=2, processing=3, dead=0)
    assert await a.ack() is True
    assert await b.fail("x") is True
    assert await c.retry(delay=50) is True
    assert await q.stats() == QueueStats(ready=2, scheduled=3, processing=0, dead=1)
    await q.claim_batch("w", 2)
    clock.advance(11)  # lapsed claims count as processing until reclaimed or swept
    assert await q.stats() == QueueStats(ready=0, scheduled=3, processing=2, dead=1)


@pytest.mark.producer
async def test_get_job_tracks_the_job_through_its_states(store: Store) -> None:
    q = store.queue("jobs", max_attempts=1)
    job_id = await q.enqueue("x")
    assert (await info(q, job_id)).state == "pending"
    job = await claim(q)
    assert (await info(q, job_id)).state == "processing"
    assert await job.retry() is True  # no attempts left: dead
    assert (await info(q, job_id)).state == "dead"
    assert await q.get_job(job_id + 1000) is None


# -- ack_batch --------------------------------------------------------------------


async def test_ack_batch_counts_only_jobs_still_owned(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    other = store.queue("other")
    ids = [await q.enqueue(i) for i in range(4)]
    foreign_id = await other.enqueue("not this queue")
    mine = await q.claim_batch("w1", 3)
    assert [j.id for j in mine] == ids[:3]
    theirs = await claim(q, "w2")
    assert theirs.id == ids[3]
    await claim(other, "w1")
    assert await q.cancel(ids[2]) is True
    acked = await q.ack_batch([*ids, foreign_id, 999_999], "w1")
    assert acked == 2  # ids[0], ids[1]; ids[2] cancelled, ids[3] owned by w2
    assert await q.get_job(ids[0]) is None
    assert await q.get_job(ids[1]) is None
    assert (await info(q, ids[3])).claimed_by == "w2"
    assert (await info(other, foreign_id)).state == "processing"
    assert await q.ack_batch([], "w1") == 0
    assert await q.ack_batch(ids[:2], "w1") == 0  # already acked


async def test_ack_batch_after_claim_expiry_acks_nothing(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=10)
    await q.enqueue(1)
    await q.enqueue(2)
    jobs = await q.claim_batch("w", 2)
    clock.advance(10.5)
    assert await q.ack_batch([j.id for j in jobs], "w") == 0
    assert (await q.stats()).processing == 2


# -- invalid options --------------------------------------------------------------


@pytest.mark.producer
async def test_invalid_enqueue_options_raise_before_writing(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs")
    naive = at(clock).replace(tzinfo=None)
    bad_options: list[dict[str, object]] = [
        {"delay": -1},
        {"delay": timedelta(seconds=-1)},
        {"delay": float("nan")},
        {"max_attempts": 0},
        {"max_attempts": -3},
        {"run_at": naive},
        {"delay": 1, "run_at": at(clock, 5)},
        {"expires": naive},
        {"expires": -1},
        {"priority": 1.5},
    ]
    for options in bad_options:
        with pytest.raises(InvalidArgument):
            await q.enqueue("x", **options)  # type: ignore[arg-type]
    assert await q.stats() == QueueStats(0, 0, 0, 0)
    assert await q.claim_one("w") is None


@pytest.mark.producer
async def test_invalid_queue_options_raise(store: Store) -> None:
    with pytest.raises(InvalidArgument):
        store.queue("jobs", max_attempts=0)
    with pytest.raises(InvalidArgument):
        store.queue("jobs", visibility_timeout=-1)
    with pytest.raises(InvalidArgument):
        store.queue("jobs", visibility_timeout=0)


async def test_invalid_retry_and_heartbeat_durations_raise_and_keep_ownership(
    store: Store,
) -> None:
    q = store.queue("jobs")
    job_id = await q.enqueue("x")
    job = await claim(q)
    with pytest.raises(InvalidArgument):
        await job.retry(delay=-1)
    with pytest.raises(InvalidArgument):
        await job.heartbeat(-5)
    assert (await info(q, job_id)).state == "processing"
    assert await job.ack() is True


async def test_sweep_reaches_expired_jobs_behind_a_page_of_live_claims(
    store: Store, clock: ManualClock
) -> None:
    """Live claims past their deadline are spared, and must not hide the rest."""
    q = store.queue("jobs", visibility_timeout=60)
    await q.enqueue_batch(list(range(1100)), expires=10)
    assert len(await q.claim_batch("w", 1100)) == 1100  # all live claims
    stranded = await q.enqueue("behind them", expires=10)
    clock.advance(11)
    assert await q.sweep_expired() == 1
    dead = await info(q, stranded)
    assert dead.dead_reason == "expired"
    assert (await q.stats()).processing == 1100


# -- release (hand a claim back) ------------------------------------------------


async def test_release_hands_the_job_back_due_now_with_the_attempt_refunded(
    store: Store, clock: ManualClock
) -> None:
    q = store.queue("jobs", max_attempts=1)
    job_id = await q.enqueue("x", delay=0)
    job = await claim(q)
    clock.advance(1)
    assert await job.release() is True
    assert await job.ack() is False
    got = await info(q, job_id)
    assert (got.state, got.attempts, got.claimed_by) == ("pending", 0, None)
    again = await claim(q, "w2")
    assert again.attempts == 1
    assert await again.ack() is True


async def test_release_without_refund_on_the_last_attempt_is_swept_not_stranded(
    store: Store,
) -> None:
    q = store.queue("jobs", max_attempts=1)
    job_id = await q.enqueue("x")
    job = await claim(q)
    assert await job.release(refund=False) is True
    assert await q.claim_one("w2") is None  # no attempts left
    assert await q.sweep_expired() == 1
    dead = await info(q, job_id)
    assert dead.dead_reason == "max_attempts"
    assert dead.attempts == 1


# -- times --------------------------------------------------------------------------


async def test_sub_second_visibility_timeout_is_honoured(store: Store, clock: ManualClock) -> None:
    q = store.queue("jobs", visibility_timeout=0.25)
    await q.enqueue("x")
    job = await claim(q)
    assert job.claim_expires_at == at(clock, 0.25)
    clock.advance(0.2)
    assert await q.claim_one("w2") is None
    clock.advance(0.05)
    assert await job.ack() is False
    assert (await claim(q, "w2")).attempts == 2


@pytest.mark.producer
async def test_run_at_in_another_timezone_is_the_same_instant(
    store: Store, clock: ManualClock
) -> None:
    from datetime import timezone

    q = store.queue("jobs")
    when = at(clock, 30).astimezone(timezone(timedelta(hours=-7)))
    job_id = await q.enqueue("x", run_at=when)
    assert (await info(q, job_id)).run_at == at(clock, 30)
    clock.advance(29)
    assert await q.claim_one("w") is None
    clock.advance(1)
    assert (await claim(q)).id == job_id
