"""``SchedulerLoop``: when ``run_scheduler`` ticks and how long it sleeps;
and what pausing and resuming a schedule decide."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore.protocol.machines.scheduler import SchedulerLoop, Sleep, Tick
from alkstore.protocol.plan import Fetch, Statement, run_sync
from alkstore.protocol.plans.schedule import pause, resume, resumed_fire_time
from alkstore.protocol.values.errors import InvalidArgument
from alkstore.protocol.values.schedules import parse

S = 1_000_000
T0 = 1_700_000_000 * S


def test_it_ticks_first_then_sleeps_until_the_next_fire_time() -> None:
    loop = SchedulerLoop(max_sleep=60.0, retry_after=1.0)
    assert loop.next_action() == Tick()
    loop.ticked(T0, T0 + 2_500_000)
    assert loop.next_action() == Sleep(2.5)
    assert loop.next_action() == Sleep(2.5)  # until it has slept
    loop.slept()
    assert loop.next_action() == Tick()


def test_the_sleep_is_capped_by_max_sleep_and_never_negative() -> None:
    """Invariant: ``0 <= sleep <= max_sleep``: a schedule added elsewhere is
    seen within ``max_sleep``, one already due is ticked at once."""
    loop = SchedulerLoop(max_sleep=60.0, retry_after=1.0)
    loop.ticked(T0, None)  # no schedule at all
    assert loop.next_action() == Sleep(60.0)
    loop.slept()
    loop.ticked(T0, T0 + 3600 * S)
    assert loop.next_action() == Sleep(60.0)
    loop.slept()
    loop.ticked(T0, T0 - S)  # due while the tick ran (or a slow clock)
    assert loop.next_action() == Sleep(0.0)


def test_a_failed_tick_is_retried_after_retry_after_at_most_max_sleep() -> None:
    loop = SchedulerLoop(max_sleep=60.0, retry_after=1.0)
    assert loop.tick_failed() == 1.0
    assert loop.next_action() == Sleep(1.0)
    loop.slept()
    assert loop.next_action() == Tick()
    assert loop.tick_failed() == 1.0  # a constant pause: failures do not grow it
    short = SchedulerLoop(max_sleep=0.25, retry_after=1.0)
    assert short.tick_failed() == 0.25


def test_a_success_after_failures_sleeps_by_the_schedule_again() -> None:
    loop = SchedulerLoop(max_sleep=60.0, retry_after=1.0)
    loop.tick_failed()
    loop.slept()
    loop.ticked(T0, T0 + 10 * S)
    assert loop.next_action() == Sleep(10.0)
    assert loop.failures.failures == 0


@pytest.mark.parametrize(
    ("max_sleep", "retry_after"), [(0, 1.0), (-1, 1.0), (1.0, 0), (float("inf"), 1.0), (1.0, "1")]
)
def test_settings_are_checked(max_sleep: object, retry_after: object) -> None:
    with pytest.raises(InvalidArgument):
        SchedulerLoop(max_sleep, retry_after)  # type: ignore[arg-type]


# -- pausing and resuming ---------------------------------------------------------


def test_a_resumed_schedule_fires_next_at_its_first_fire_time_after_now() -> None:
    """Invariant: the fire time a resume sets is after now and is one of the
    expression's (the paused window's fire times are dropped, not caught up)."""
    every = parse("@every 10s")
    for now in (T0, T0 + 1, T0 + 9 * S, T0 + 10 * S, T0 + 10 * S + 1):
        nxt = resumed_fire_time("@every 10s", now)
        assert now < nxt <= now + 10 * S and nxt % (10 * S) == 0
        assert nxt == every.next_after(now)
    hourly = resumed_fire_time("0 * * * *", T0 + 1)
    assert T0 < hourly <= T0 + 3600 * S and hourly % (3600 * S) == 0


class _Rows:
    """A dialect stand-in that names each statement it is asked for."""

    def __getattr__(self, name: str) -> Any:
        def statement(*args: Any) -> Statement:
            fetch = Fetch.ONE if name == "schedule_state" else Fetch.ROWCOUNT
            return Statement(name, args, fetch)

        return statement


def _run(plan: Any, answers: dict[str, Any]) -> tuple[Any, list[Statement]]:
    seen: list[Statement] = []

    def execute(statement: Statement) -> Any:
        seen.append(statement)
        return answers[statement.sql]

    return run_sync(plan, execute), seen


def test_resume_moves_only_a_paused_schedule_and_compares_the_fire_time_it_read() -> None:
    d = _Rows()
    now = T0 + 35 * S
    # No such schedule: False, nothing written.
    value, seen = _run(resume(d, "s", now), {"schedule_state": None})
    assert value is False and [st.sql for st in seen] == ["schedule_state"]
    # Running: left as it is (a due fire time still fires).
    value, seen = _run(resume(d, "s", now), {"schedule_state": ("@every 10s", "UTC", T0, False)})
    assert value is True and [st.sql for st in seen] == ["schedule_state"]
    # Paused (SQLite's flag is 1): the next fire time after now, set only if
    # the row still holds the fire time read.
    value, seen = _run(
        resume(d, "s", now), {"schedule_state": ("@every 10s", "UTC", T0, 1), "resume_schedule": 1}
    )
    assert value is True
    assert seen[-1] == Statement("resume_schedule", ("s", T0, T0 + 40 * S), Fetch.ROWCOUNT)


def test_pause_says_whether_the_schedule_exists() -> None:
    assert _run(pause(_Rows(), "s"), {"pause_schedule": 1})[0] is True
    assert _run(pause(_Rows(), "s"), {"pause_schedule": 0})[0] is False
