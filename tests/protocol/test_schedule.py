"""``SchedulerLoop``: when ``run_scheduler`` ticks and how long it sleeps."""

from __future__ import annotations

import pytest

from alkstore.protocol.errors import InvalidArgument
from alkstore.protocol.schedule import SchedulerLoop, Sleep, Tick

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
