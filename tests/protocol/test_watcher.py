"""The SQLite watcher's pure decisions: ``LookFailures`` (when failing looks
give up) and ``WatchCadence`` (idle slowing, and how it looks after file
events and commits), without a database."""

from __future__ import annotations

import pytest

from alkstore.protocol.machines.watcher import (
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


# -- the SQLite watcher's cadence ----------------------------------------------------------
def looks_after(c: WatchCadence, now: float, until: float) -> list[tuple[float, str]]:
    """Drive the cadence as the watcher does, with no commit and no event."""
    waits: list[tuple[float, str]] = []
    while now < until:
        wait, kind = c.next_wait(now)
        waits.append((wait, kind))
        now += wait
        if kind != "rest":
            c.unchanged(now)
    return waits


def test_inotify_cadence_looks_on_events_then_backs_off_then_sleeps() -> None:
    c = WatchCadence.from_options(WatcherOptions(), inotify=True)
    assert c.next_wait(0.0) == (1.0, "fd")  # idle: the backstop, on the descriptor
    c.event(10.0)  # a file event: the loop looks at once ...
    c.unchanged(10.0)  # ... too early: the commit is not visible yet
    assert c.next_wait(10.0001) == (0.0, "sleep")  # yield, look again
    c.changed(10.0002)
    waits = looks_after(c, 10.0002, 11.5)
    looks = [w for w in waits if w[1] != "rest"]
    # Found: rest a moment whatever the file events say, then look at a
    # growing cadence on the descriptor (a new event cuts the wait short)
    # until the window closes ...
    assert waits[0][0] == pytest.approx(0.001) and waits[0][1] == "rest"
    gaps = [w for w, kind in looks[:-1]]
    assert gaps == sorted(gaps) and all(kind == "fd" for _, kind in looks)
    assert len(looks) <= 7  # about 10 ms of data_version reads in all
    # ... then the backstop.
    assert looks[-1] == (1.0, "fd")


def test_spinning_ends_when_the_commit_is_in_or_soon_after_the_event() -> None:
    c = WatchCadence.from_options(WatcherOptions(spin=0.0005), inotify=True)
    c.event(0.0)
    now, spins = 0.0, 0
    while c.next_wait(now) == (0.0, "sleep"):
        c.unchanged(now)
        spins += 1
        now += 0.00002
    assert 0.0005 - 1e-9 <= now < 0.0006 and spins >= 20
    assert c.next_wait(now)[1] == "fd"


def test_looks_are_rate_limited_under_a_stream_of_commits() -> None:
    c = WatchCadence.from_options(WatcherOptions(), inotify=True)
    now, looks = 0.0, 0
    while now < 0.1:  # a file event before every look, and a commit found each time
        c.event(now)
        c.changed(now)
        looks += 1
        wait, kind = c.next_wait(now)
        assert kind == "rest" and wait == pytest.approx(0.001)
        now += wait
    assert looks <= 101


def test_polling_cadence_lingers_then_backs_off_to_the_slowest() -> None:
    c = WatchCadence.from_options(WatcherOptions(use_inotify=False), inotify=False)
    c.changed(0.0)
    now = 0.001
    for _ in range(50):  # the first 100 ms after a change: 1 ms looks
        c.unchanged(now)
        assert c.next_wait(now) == (0.001, "sleep")
        now += 0.001
    now = 0.2
    for _ in range(20):
        c.unchanged(now)
        now += c.next_wait(now)[0]
    assert c.next_wait(now) == (0.05, "sleep")
