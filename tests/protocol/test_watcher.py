"""The SQLite watcher's pure decisions: ``LookFailures`` (when failing looks
give up) and ``WatchCadence``'s idle slowing, without a database."""

from __future__ import annotations

import pytest

from alkstore.protocol.watcher import (
    GiveUp,
    LookAgain,
    LookFailures,
    WatchCadence,
    WatcherOptions,
)


def test_failing_looks_are_retried_every_tenth_of_a_second_until_give_up_after() -> None:
    """Invariant: the watcher gives up only after failing continuously for
    ``give_up_after`` seconds; the first failure of a run is the one logged."""
    failures = LookFailures(give_up_after=0.5)
    assert failures.failed(10.0, file_lost=False) == LookAgain(0.1, warn=True)
    assert failures.failed(10.25, file_lost=False) == LookAgain(0.1, warn=False)
    assert failures.failed(10.375, file_lost=False) == LookAgain(0.1, warn=False)
    assert failures.failed(10.5, file_lost=False) == GiveUp(warn=False)


def test_a_successful_look_starts_the_count_over() -> None:
    failures = LookFailures(give_up_after=0.5)
    failures.failed(10.0, file_lost=False)
    failures.failed(10.25, file_lost=False)
    failures.succeeded()
    assert failures.failing_since is None
    assert failures.failed(10.5, file_lost=False) == LookAgain(0.1, warn=True)
    assert failures.failed(10.75, file_lost=False) == LookAgain(0.1, warn=False)
    assert failures.failed(11.0, file_lost=False) == GiveUp(warn=False)


def test_a_lost_database_file_gives_up_at_once() -> None:
    failures = LookFailures(give_up_after=30.0)
    assert failures.failed(0.0, file_lost=True) == GiveUp(warn=False)


def test_a_short_give_up_after_shortens_the_pause_and_zero_gives_up_at_once() -> None:
    assert LookFailures(0.05).failed(0.0, file_lost=False) == LookAgain(0.05, warn=True)
    assert LookFailures(0.0).failed(0.0, file_lost=False) == GiveUp(warn=True)


@pytest.mark.parametrize("inotify", [True, False])
def test_idle_looks_slow_down_geometrically_to_the_slowest(inotify: bool) -> None:
    """Invariant: past the active window, each idle look multiplies the
    cadence by ``growth`` up to the slowest; activity resets it."""
    options = WatcherOptions(use_inotify=inotify, fastest=0.001, slowest_poll=0.05, growth=2.0)
    c = WatchCadence.from_options(options, inotify=inotify)
    now = 100.0  # long after any activity
    seen = []
    for _ in range(12):
        c.unchanged(now)
        seen.append(c.current)
    assert seen[:4] == [0.002, 0.004, 0.008, 0.016]
    assert seen[-1] == c.slowest and max(seen) == c.slowest
    c.event(now)
    assert c.current == 0.001 and c.idle_looks == 0
    c.unchanged(now + 1.0)
    assert c.current == 0.002


def test_growth_one_keeps_the_fast_cadence() -> None:
    c = WatchCadence.from_options(WatcherOptions(use_inotify=False, growth=1.0), inotify=False)
    for i in range(5):
        c.unchanged(100.0 + i)
    assert c.next_wait(105.0) == (0.001, "sleep")
