"""The scheduler's loop: tick, then sleep until the next fire time (or a
wake), backing off after errors. Pure: ``services/scheduler.py`` performs it."""

from __future__ import annotations

from dataclasses import dataclass

from ..values.backoff import ErrorBackoff, exact
from ..values.timeconv import (
    MAX_DURATION_US,
    US_PER_S,
    check_seconds,
)


# -- the scheduler loop ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Tick:
    """Enqueue every due fire time (``tick`` until a batch comes back short),
    then read when the next one is."""


@dataclass(frozen=True, slots=True)
class Sleep:
    """Sleep this many seconds, then tick."""

    seconds: float


SchedulerAction = Tick | Sleep


class SchedulerLoop:
    """The decisions of ``run_scheduler``: tick, then sleep until the next
    fire time but at most ``max_sleep`` (schedules added elsewhere meanwhile
    are noticed by then), and tick again. A failed tick is tried again after
    ``retry_after`` (at most ``max_sleep``), not after a whole ``max_sleep``.

    The sleeps are durations, not instants: each one ends in a tick whatever
    the store's clock says, so a schedule added elsewhere is still seen
    within ``max_sleep`` of real time.
    """

    def __init__(self, max_sleep: float, retry_after: float) -> None:
        self.max_sleep = check_seconds(max_sleep, "max_sleep")
        retry_after = check_seconds(retry_after, "retry_after")
        pause_us = min(MAX_DURATION_US, round(min(retry_after, self.max_sleep) * US_PER_S))
        self.failures = ErrorBackoff(exact(pause_us, pause_us, factor=1.0))
        self._sleep: float | None = None  # None: tick next

    def next_action(self) -> SchedulerAction:
        return Tick() if self._sleep is None else Sleep(self._sleep)

    def ticked(self, now_us: int, next_fire_us: int | None) -> None:
        """A tick went through; the earliest next fire time (None: no schedule)."""
        self.failures.succeeded()
        wait = self.max_sleep
        if next_fire_us is not None:
            wait = min(self.max_sleep, max(0.0, (next_fire_us - now_us) / US_PER_S))
        self._sleep = wait

    def tick_failed(self) -> float:
        """A tick's round trip failed: seconds until the next try."""
        self._sleep = self.failures.failed() / US_PER_S
        return self._sleep

    def slept(self) -> None:
        self._sleep = None
