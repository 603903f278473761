"""Scheduler contract extension (issue #12): a time zone per schedule, DST
changes in virtual time, and the catch-up policies latest, all and skip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from alkstore import InvalidArgument, ManualClock, Store
from tests.backends import Backend

from . import aio

US = 1_000_000
PARIS = ZoneInfo("Europe/Paris")


def us(dt: datetime) -> int:
    return round(dt.timestamp() * US)


def align(clock: ManualClock, period_s: int) -> None:
    """Move the clock to just after a multiple of ``period_s``."""
    clock.set((clock.now_us() // (period_s * US) + 1) * period_s * US + 1)


async def run_ats(store: Store, queue: str = "jobs") -> list[datetime]:
    """The fire times of the jobs enqueued so far (each claimed and acked)."""
    got = []
    while (job := await store.queue(queue).claim_one("w")) is not None:
        got.append(job.run_at)
        await job.ack()
    return sorted(got)


async def tick_through(store: Store, clock: ManualClock, hours: int, step_min: int = 20) -> None:
    for _ in range(hours * 60 // step_min):
        clock.advance(step_min * 60)
        await store.run_schedules()


async def test_a_zoned_daily_schedule_fires_once_a_day_across_both_dst_changes(
    store: Store, clock: ManualClock
) -> None:
    clock.set(us(datetime(2024, 3, 30, 12, tzinfo=PARIS)))
    await store.schedule("night", "jobs", "30 2 * * *", tz="Europe/Paris")
    await tick_through(store, clock, 48)  # a tick every 20 minutes, across 31 March
    spring = [t.astimezone(PARIS) for t in await run_ats(store)]
    # 02:30 does not exist on the 31st: that day it fires at 03:00, once
    assert [t.strftime("%d %H:%M%z") for t in spring] == ["31 03:00+0200", "01 02:30+0200"]

    assert await store.unschedule("night")
    clock.set(us(datetime(2024, 10, 26, 12, tzinfo=PARIS)))
    await store.schedule("night", "jobs", "30 2 * * *", tz="Europe/Paris")
    await tick_through(store, clock, 48)
    fall = [t.astimezone(PARIS) for t in await run_ats(store)]
    # the night 02:30 happens twice (summer, then winter time), it fires once
    assert [t.strftime("%d %H:%M%z") for t in fall] == ["27 02:30+0200", "28 02:30+0100"]


async def test_the_zone_is_listed_and_a_new_zone_recomputes_the_next_fire(
    store: Store, clock: ManualClock
) -> None:
    clock.set(us(datetime(2024, 6, 1, 12, tzinfo=UTC)))
    await store.schedule("r", "jobs", "0 9 * * *", tz="America/New_York")
    (info,) = await store.list_schedules()
    assert info.tz == "America/New_York"
    assert info.next_fire_at == datetime(2024, 6, 1, 13, tzinfo=UTC)  # 09:00 EDT
    await store.schedule("r", "jobs", "0 9 * * *", tz="America/New_York")  # same: kept
    assert (await store.list_schedules())[0].next_fire_at == info.next_fire_at
    await store.schedule("r", "jobs", "0 9 * * *", tz="Asia/Tokyo")  # a new zone: recomputed
    (info,) = await store.list_schedules()
    assert info.tz == "Asia/Tokyo" and info.next_fire_at == datetime(2024, 6 , 2, 0, tzinfo=UTC)


async def test_an_unknown_zone_is_invalid_and_every_ignores_the_zone(
    store: Store, clock: ManualClock
) -> None:
    for bad in ("Mars/Olympus", "", "localtime", "utc"):
        with pytest.raises(InvalidArgument):
            await store.schedule("s", "jobs", "0 3 * * *", tz=bad)
    assert await store.list_schedules() == []
    align(clock, 3600)
    await store.schedule("a", "jobs", "@every 1h", tz="Asia/Kolkata")  # UTC+05:30
    (info,) = await store.list_schedules()
    assert info.next_fire_at.timestamp() % 3600 == 0  # on the hour of UTC, as without a zone


async def test_latest_fires_once_for_the_latest_missed_fire_time(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    start = clock.now_us() - 1
    await store.schedule("tick", "jobs", "@every 10s")  # catch_up="latest", the default
    clock.advance(65)  # six fire times pass: +10 s .. +60 s
    assert await store.run_schedules() == 1
    (job_at,) = await run_ats(store)
    assert us(job_at) == start + 60 * US
    (info,) = await store.list_schedules()
    assert info.catch_up == "latest" and info.catch_up_max is None
    assert us(info.last_fire_at) == start + 60 * US  # type: ignore[arg-type]
    assert us(info.next_fire_at) == start + 70 * US


async def test_all_fires_each_missed_fire_time_up_to_the_cap(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    start = clock.now_us() - 1
    await store.schedule("tick", "jobs", "@every 10s", catch_up="all", catch_up_max=4)
    clock.advance(65)  # six missed: the latest four get a job
    assert await store.run_schedules() == 4
    assert await store.run_schedules() == 0
    assert [us(t) for t in await run_ats(store)] == [start + s * US for s in (30, 40, 50, 60)]
    clock.advance(20)  # two missed, under the cap: both
    assert await store.run_schedules() == 2
    assert [us(t) for t in await run_ats(store)] == [start + 70 * US, start + 80 * US]
    (info,) = await store.list_schedules()
    assert (info.catch_up, info.catch_up_max, info.catch_up_grace) == ("all", 4, None)
    assert us(info.last_fire_at) == start + 80 * US  # type: ignore[arg-type]


async def test_all_with_concurrent_tickers_enqueues_each_fire_time_once(
    backend: Backend, location: str, clock: ManualClock
) -> None:
    align(clock, 10)
    async with backend.open(location, clock=clock) as a, backend.open(location, clock=clock) as b:
        await a.schedule("tick", "jobs", "@every 10s", catch_up="all", catch_up_max=5)
        counts: list[int] = []
        for missed in (7, 3, 1):
            clock.advance(10 * missed)

            async def run(s: Store) -> None:
                counts.append(await s.run_schedules())

            async with aio.open_task_group() as nursery:
                for s in (a, b, a, b):
                    nursery.start_soon(run, s)
        assert sum(counts) == 5 + 3 + 1
        times = await run_ats(a)
        assert len(times) == len(set(times)) == 9


async def test_skip_fires_on_time_and_drops_what_it_sees_too_late(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    start = clock.now_us() - 1
    await store.schedule("tick", "jobs", "@every 10s", catch_up="skip", catch_up_grace=2)
    clock.advance(10)  # 1 us late: within the grace
    assert await store.run_schedules() == 1
    clock.advance(13)  # the +20 s fire time, seen 3 s late: missed
    assert await store.run_schedules() == 0
    (info,) = await store.list_schedules()
    assert us(info.last_fire_at) == start + 10 * US  # type: ignore[arg-type]  # unchanged
    assert us(info.next_fire_at) == start + 30 * US  # the next one in the future
    assert info.catch_up == "skip" and info.catch_up_grace == timedelta(seconds=2)
    clock.advance(3600)  # 360 fire times missed: none is enqueued
    assert await store.run_schedules() == 0
    (info,) = await store.list_schedules()
    clock.set(us(info.next_fire_at))  # a tick exactly on time
    assert await store.run_schedules() == 1
    assert [us(t) for t in await run_ats(store)] == [start + 10 * US, clock.now_us()]


async def test_reregistering_changes_the_policy_and_keeps_the_fire_time(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s", catch_up="all", catch_up_max=3)
    before = (await store.list_schedules())[0].next_fire_at
    await store.schedule("tick", "jobs", "@every 10s", catch_up="skip")
    (info,) = await store.list_schedules()
    assert info.next_fire_at == before
    assert (info.catch_up, info.catch_up_max, info.catch_up_grace) == (
        "skip", None, timedelta(seconds=60)
    )  # fmt: skip


async def test_resume_drops_the_paused_window_whatever_the_policy(
    store: Store, clock: ManualClock
) -> None:
    align(clock, 10)
    await store.schedule("tick", "jobs", "@every 10s", catch_up="all", catch_up_max=100)
    await store.pause_schedule("tick")
    clock.advance(60)  # six fire times pass while paused
    assert await store.resume_schedule("tick")
    assert await store.run_schedules() == 0
    clock.advance(10)
    assert await store.run_schedules() == 1  # the first fire time after the resume, alone


@pytest.mark.parametrize(
    "kwargs",
    [
        {"catch_up": "sometimes"},
        {"catch_up": "latest", "catch_up_max": 3},
        {"catch_up": "all", "catch_up_max": 0},
        {"catch_up": "all", "catch_up_max": True},
        {"catch_up": "all", "catch_up_grace": 5},
        {"catch_up": "skip", "catch_up_grace": -1},
    ],
)
async def test_bad_catch_up_settings_are_invalid(store: Store, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        await store.schedule("s", "jobs", "@every 1s", **kwargs)  # type: ignore[arg-type]
    assert await store.list_schedules() == []
