"""A job's attempt history (docs/queues.md, "Attempts"): each attempt that
ended without an ack, and each death, recorded with the settling change,
bounded, and gone with the job's record."""

from __future__ import annotations

from datetime import timedelta

import pytest

from alkstore import Job, ManualClock, Queue, Store

from .helpers import at, count_rows

# The bounds docs/queues.md states.
ATTEMPTS_KEPT, ERROR_CAP, TRACE_CAP = 20, 2_000, 8_000


async def claimed(q: Queue, worker: str = "w") -> Job:
    job = await q.claim_one(worker)
    assert job is not None
    return job


def raised(message: str) -> ValueError:
    """A ValueError that was raised (so it has a traceback)."""
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


async def test_each_failed_attempt_is_kept_with_its_worker_times_error_and_trace(
    store: Store, clock: ManualClock
) -> None:
    """Invariant: every retry and the death that ends them are in the job's
    history, oldest first, each as it happened."""
    q = store.queue("jobs", max_attempts=3)
    job_id = await q.enqueue("x")
    for n in (1, 2, 3):
        job = await claimed(q, f"w{n}")
        clock.advance(n)  # the handler runs n seconds
        assert await job.retry(delay=0, error=raised(f"boom {n}")) is True
        clock.advance(1)
    info = await q.get_job(job_id)
    assert info is not None and info.state == "dead"
    history = info.attempt_history
    assert [(a.attempt, a.outcome, a.worker) for a in history] == [
        (1, "retried", "w1"), (2, "retried", "w2"), (3, "max_attempts", "w3"),
    ]  # fmt: skip
    assert [a.duration for a in history] == [timedelta(seconds=n) for n in (1, 2, 3)]
    assert history[-1].finished_at == at(clock, -1)
    assert [a.died for a in history] == [False, False, True]
    for n, a in enumerate(history, 1):
        assert a.error == f"ValueError: boom {n}"
        assert a.trace is not None and a.trace.startswith("Traceback (most recent call last):")
        assert "in raised" in a.trace and a.trace.rstrip().endswith(a.error)


async def test_a_fail_is_kept_and_a_message_has_no_trace(store: Store) -> None:
    """Invariant: ``fail`` records one ``failed`` attempt; only an exception carries a trace."""
    q = store.queue("jobs")
    first, second = await q.enqueue(1), await q.enqueue(2)
    assert await (await claimed(q)).fail("bad input") is True
    assert await (await claimed(q)).fail(raised("worse")) is True
    one, two = await q.get_job(first), await q.get_job(second)
    assert one is not None and two is not None
    (a,) = one.attempt_history
    assert (a.outcome, a.error, a.trace, a.attempt) == ("failed", "bad input", None, 1)
    (b,) = two.attempt_history
    assert b.outcome == "failed" and b.error == "ValueError: worse" and b.trace is not None


async def test_the_sweeps_deaths_are_kept(store: Store, clock: ManualClock) -> None:
    """Invariant: a burial by the sweep is a death in the history too, with
    the worker whose claim lapsed (None for a job never claimed)."""
    q = store.queue("jobs", max_attempts=1, visibility_timeout=5)
    lapsed = await q.enqueue("lapses")
    await claimed(q, "gone-worker")
    expired = await q.enqueue("expires", expires=1)
    clock.advance(10)
    assert await q.sweep_expired() == 2
    for job_id, outcome, worker, attempt in (
        (lapsed, "claim_expired", "gone-worker", 1), (expired, "expired", None, 0),
    ):  # fmt: skip
        info = await q.get_job(job_id)
        assert info is not None
        (a,) = info.attempt_history
        assert (a.outcome, a.worker, a.attempt, a.started_at) == (outcome, worker, attempt, None)
        assert a.finished_at == at(clock) and a.duration is None and a.error is None


async def test_a_job_keeps_its_newest_attempts_each_capped(store: Store) -> None:
    """Invariant: at most ATTEMPTS_KEPT rows per job (its newest), an error
    capped at ERROR_CAP characters and a trace at TRACE_CAP."""
    q = store.queue("jobs", max_attempts=ATTEMPTS_KEPT + 5)
    job_id = await q.enqueue("x")
    for _ in range(ATTEMPTS_KEPT + 3):
        assert await (await claimed(q)).retry(delay=0, error="e" * (ERROR_CAP * 2)) is True
    info = await q.get_job(job_id)
    assert info is not None
    assert [a.attempt for a in info.attempt_history] == list(range(4, ATTEMPTS_KEPT + 4))
    error = info.attempt_history[-1].error
    assert error is not None and error.startswith("e" * ERROR_CAP)
    assert error.endswith(f"... [{ERROR_CAP} more characters]")
    assert await count_rows(store, "attempts") == ATTEMPTS_KEPT

    deep = raised("x" * (TRACE_CAP * 2))
    assert await (await claimed(q)).retry(delay=0, error=deep) is True
    info = await q.get_job(job_id)
    assert info is not None
    trace = info.attempt_history[-1].trace
    assert trace is not None and trace.startswith("[") and "outer frames cut" in trace
    assert trace.endswith("x" * 100 + "\n") and len(trace) < TRACE_CAP + 100


async def test_attempts_go_with_the_job_record(store: Store) -> None:
    """Invariant: no attempt row outlives its job's record: an ack or a
    cancel that keeps none, a purge of its dead letter."""
    q = store.queue("jobs", max_attempts=2)
    acked, cancelled, batched, _dies = [await q.enqueue(n) for n in range(4)]
    for job in [await claimed(q) for _ in range(4)]:
        assert await job.retry(delay=0, error="first") is True
    assert await count_rows(store, "attempts") == 4
    by_id = {}
    for _ in range(3):
        job = await claimed(q)
        by_id[job.id] = job
    assert await by_id[acked].ack() is True
    assert await q.cancel(cancelled) is True
    assert await q.ack_batch([batched], "w") == 1
    assert await count_rows(store, "attempts") == 1  # the one still live
    assert await (await claimed(q)).fail("second") is True
    assert await count_rows(store, "attempts") == 2
    assert await q.purge_dead() == 1
    assert await count_rows(store, "attempts") == 0


async def test_a_kept_record_keeps_its_attempts(store: Store) -> None:
    """Invariant: a job finished into history shows its failed attempts there."""
    q = store.queue("jobs")
    await q.set_retention(history=3600)
    job_id = await q.enqueue("x")
    assert await (await claimed(q)).retry(delay=0, error="once") is True
    assert await (await claimed(q)).ack() is True
    info = await q.get_job(job_id)
    assert info is not None and info.state == "acked"
    assert [(a.attempt, a.error) for a in info.attempt_history] == [(1, "once")]


async def test_a_requeued_letter_still_counts_as_a_death(store: Store, clock: ManualClock) -> None:
    """Invariant: throughput's deaths count every death whose job has a
    record, a letter requeued since (and its attempts) included."""
    q = store.queue("jobs", max_attempts=1)
    job_id = await q.enqueue("x")
    assert await (await claimed(q)).fail("first death") is True
    assert await q.requeue_dead(job_id) is True
    clock.advance(1)
    assert await (await claimed(q)).retry(delay=0, error="second death") is True
    clock.advance(1)
    seen = await q.throughput(window=60, bucket=60)
    assert sum(seen.dead) == 2
    info = await q.get_job(job_id)
    assert info is not None and info.state == "dead"
    assert [(a.attempt, a.outcome, a.error) for a in info.attempt_history] == [
        (1, "failed", "first death"), (1, "max_attempts", "second death"),
    ]  # fmt: skip
    # Requeued and acked at last: the record, its attempts and deaths go.
    assert await q.requeue_dead(job_id) is True
    assert await (await claimed(q)).ack() is True
    assert await count_rows(store, "attempts") == 0
    assert sum((await q.throughput(window=60, bucket=60)).dead) == 0


@pytest.mark.producer
async def test_a_job_never_failed_has_no_attempt_history(store: Store) -> None:
    """Invariant: an ack leaves no row behind (the hot path writes none)."""
    q = store.queue("jobs")
    job_id = await q.enqueue("x")
    assert (info := await q.get_job(job_id)) is not None and info.attempt_history == ()
    assert await (await claimed(q)).ack() is True
    assert await count_rows(store, "attempts") == 0
