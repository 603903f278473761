"""Scheduler contract: cron/interval fire times, exactly-once per fire time, catch-up."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from alkstore import InvalidArgument, InvalidName, ManualClock, ReservedName, ScheduleInfo, Store
from tests.backends import Backend

from . import aio

US = 1_000_000


def align(clock: ManualClock, period_s: int) -> None:
    """Move the clock to just after a multiple of ``period_s`` (deterministic fire times)."""
    now = clock.now_us()
    clock.set((now // (period_s * US) + 1) * period_s * US + 1)


async def test_every_fires_once_per_interval(store: Store, clock: ManualClock) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s", {"k": 1})
    assert await store.run_schedules() == 0
    clock.advance(10)
    assert await store.run_schedules() == 1
    assert await store.run_schedules() == 0  # the same fire time never enqueues twice
    q = store.queue("jobs")
    job = await q.claim_one("w")
    assert job is not None and job.payload == {"k": 1}
    # The job is due at its fire time, not at the moment the tick ran.
    assert job.run_at.timestamp() * US % (10 * US) == 0


async def test_missed_fire_times_collapse_into_one(store: Store, clock: ManualClock) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s")
    clock.advance(3600)  # 360 fire times pass with nobody ticking
    assert await store.run_schedules() == 1
    assert (await store.queue("jobs").stats()).ready == 1
    clock.advance(10)
    assert await store.run_schedules() == 1  # and the schedule carries on from now


async def test_concurrent_tickers_enqueue_each_fire_time_once(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    align(clock, 10)
    async with backend.open(location, clock=clock) as a, backend.open(location, clock=clock) as b:
        await a.schedule("tick", "jobs", "@every 10s")
        counts: list[int] = []
        for _ in range(5):
            clock.advance(10)

            async def run(s: Store) -> None:
                counts.append(await s.run_schedules())

            async with aio.open_task_group() as nursery:
                for s in (a, b, a, b):
                    nursery.start_soon(run, s)
        assert sum(counts) == 5
        assert (await a.queue("jobs").stats()).ready == 5


async def test_cron_five_and_six_fields(store: Store, clock: ManualClock) -> None:
    align(clock, 300)
    await store.schedule("five", "jobs", "*/5 * * * *")
    await store.schedule("six", "jobs", "*/15 * * * * *")
    clock.advance(15)
    assert await store.run_schedules() == 1  # only the seconds schedule is due
    clock.advance(285)
    assert await store.run_schedules() == 2


async def test_reregistering_keeps_next_fire_and_changing_recomputes(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 3600)  # the hourly expression below cannot fire in this test's 2 minutes
    await store.schedule("s", "jobs", "@every 60s")
    clock.advance(59)
    await store.schedule("s", "jobs", "@every 60s")  # a process restarting
    clock.advance(1)
    assert await store.run_schedules() == 1
    await store.schedule("s", "jobs", "@every 1h")
    clock.advance(60)
    assert await store.run_schedules() == 0


async def test_unschedule(store: Store, clock: ManualClock) -> None:
    await store.schedule("s", "jobs", "@every 1s")
    assert await store.unschedule("s") is True
    assert await store.unschedule("s") is False
    clock.advance(5)
    assert await store.run_schedules() == 0


@pytest.mark.parametrize(
    "expr", ["", "   ", "@every", "@every 0s", "@every 10x", "61 * * * *", "* * *", "nonsense"]
)
async def test_bad_expressions_rejected(store: Store, expr: str) -> None:
    with pytest.raises(InvalidArgument):
        await store.schedule("s", "jobs", expr)


async def test_schedule_names_follow_the_name_rules(store: Store) -> None:
    with pytest.raises(ReservedName):
        await store.schedule("__alkstore_x", "jobs", "@every 1s")
    with pytest.raises(ReservedName):
        await store.schedule("s", "__alkstore_q", "@every 1s")
    with pytest.raises(InvalidName):
        await store.schedule("", "jobs", "@every 1s")


async def test_run_scheduler_loop_enqueues_over_time(backend: Backend, location: str) -> None:
    async with backend.open(location) as store:
        await store.schedule("fast", "jobs", "@every 100ms")
        started = time.monotonic()
        async with aio.open_task_group() as nursery:
            await nursery.start(store.run_scheduler)
            await aio.sleep(0.65)
            nursery.cancel()
        elapsed = time.monotonic() - started
        ready = (await store.queue("jobs").stats()).ready
        # At most one job per 100 ms fire time that passed; the loop sleeps
        # until each fire time rather than polling, so it keeps up.
        assert 2 <= ready <= int(elapsed / 0.1) + 1


def instant(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)


async def test_list_schedules_shows_each_schedule_and_its_last_fire(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    start = clock.now_us()  # 1 us past a multiple of 10 s
    await store.schedule("b", "jobs", "@every 10s", {"k": 1}, priority=2, max_attempts=5,
                         expires_after=timedelta(seconds=30))  # fmt: skip
    await store.schedule("a", "other", "*/15 * * * * *")
    first = start - 1 + 10 * US
    listed = await store.list_schedules()
    assert [s.name for s in listed] == ["a", "b"]
    assert listed[1] == ScheduleInfo(
        name="b", queue="jobs", expression="@every 10s", payload={"k": 1}, priority=2,
        max_attempts=5, expires_after=timedelta(seconds=30), next_fire_at=instant(first),
        last_fire_at=None, paused=False, created_at=instant(start),
    )  # fmt: skip
    assert listed[0].max_attempts is None and listed[0].expires_after is None
    clock.advance(10)
    assert await store.run_schedules() >= 1
    b = (await store.list_schedules())[1]
    assert b.last_fire_at == instant(first)  # the fire time it fired for
    assert b.next_fire_at == instant(first + 10 * US)


async def test_a_paused_schedule_fires_nothing_and_resumes_without_catch_up(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s")
    await store.schedule("other", "jobs", "@every 10s")
    assert await store.pause_schedule("tick") is True
    assert await store.pause_schedule("tick") is True  # pausing twice changes nothing
    pending = (await store.list_schedules())[1].next_fire_at
    clock.advance(35)  # three fire times pass while paused
    assert await store.run_schedules() == 1  # only the other one fires (once: catch-up)
    tick = (await store.list_schedules())[1]
    assert tick.paused is True and tick.next_fire_at == pending and tick.last_fire_at is None

    assert await store.resume_schedule("tick") is True
    tick = (await store.list_schedules())[1]
    # The first fire time after now (now is 5 s past one): no catch-up.
    assert tick.paused is False and tick.next_fire_at == instant(clock.now_us() - 1 + 5 * US)
    assert await store.run_schedules() == 0
    clock.advance(5)
    assert await store.run_schedules() == 2
    assert (await store.queue("jobs").stats()).ready == 3


async def test_resuming_a_running_schedule_changes_nothing(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s")
    clock.advance(10)  # due, and not ticked yet
    before = await store.list_schedules()
    assert await store.resume_schedule("tick") is True
    assert await store.list_schedules() == before
    assert await store.run_schedules() == 1  # the due fire time still fires


async def test_reregistering_a_paused_schedule_keeps_it_paused(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s")
    await store.pause_schedule("tick")
    await store.schedule("tick", "jobs", "@every 10s", {"new": "payload"})  # a restart
    await store.schedule("tick", "jobs", "@every 20s")  # a new expression
    (tick,) = await store.list_schedules()
    assert tick.paused is True and tick.expression == "@every 20s"
    clock.advance(60)
    assert await store.run_schedules() == 0


async def test_pausing_or_resuming_an_unknown_schedule_returns_false(store: Store) -> None:
    assert await store.pause_schedule("nope") is False
    assert await store.resume_schedule("nope") is False
    await store.schedule("s", "jobs", "@every 1s")
    assert await store.unschedule("s") is True
    assert await store.pause_schedule("s") is False
    for call in (store.pause_schedule, store.resume_schedule):
        with pytest.raises(ReservedName):
            await call("__alkstore_x")
        with pytest.raises(InvalidName):
            await call("")


async def test_run_now_enqueues_the_schedules_job_and_leaves_its_fire_times(
    store: Store, clock: ManualClock
) -> None:
    """Invariant: a run now is one job with the schedule's queue, payload and
    options, due now; next_fire_at, last_fire_at and the pause
    stay as they were."""
    align(clock, 60)
    await store.schedule(
        "report", "reports", "@every 1h", {"kind": "hourly"}, priority=7, max_attempts=2,
        expires_after=timedelta(minutes=5),
    )  # fmt: skip
    assert await store.pause_schedule("report")
    (before,) = await store.list_schedules()
    job_id = await store.run_schedule_now("report")
    assert isinstance(job_id, int)
    job = await store.queue("reports").claim_one("w")
    assert job is not None and job.id == job_id and job.payload == {"kind": "hourly"}
    assert (job.priority, job.max_attempts) == (7, 2)
    assert job.run_at.timestamp() * US == clock.now_us()
    assert job.expires_at is not None
    assert (job.expires_at - job.run_at) == timedelta(minutes=5)
    (after,) = await store.list_schedules()
    assert (after.next_fire_at, after.last_fire_at, after.paused) == (
        before.next_fire_at, before.last_fire_at, True
    )
    assert await store.run_schedules() == 0  # paused: the run now was the only job
    assert await store.run_schedule_now("no-such") is None
    with pytest.raises(InvalidName):
        await store.run_schedule_now("")
