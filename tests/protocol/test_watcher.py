"""The SQLite watcher's pure decisions, without a database."""

from __future__ import annotations

import pytest

from alkstore.protocol.watcher import WatchCadence, WatcherOptions


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
