"""A stream subscriber's decisions: when to hand out the next event, read
the next batch, wait for a wake, pause after an error, or stop. Pure:
``EventReceiver`` (``api/stream.py``) performs them."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from ..plans.queues import check_limit
from ..values.backoff import ROUND_TRIP_BACKOFF, Backoff, ErrorBackoff, Pause
from ..values.errors import Closed
from ..values.timeconv import US_PER_S, check_seconds
from ..values.types import StreamEvent


# -- a subscriber ------------------------------------------------------------------
class ReceiverState(enum.Enum):
    NEW = "new"  # made, not entered yet
    OPEN = "open"  # entered: delivering
    CLOSED = "closed"  # closed (or left): delivers nothing more


@dataclass(frozen=True, slots=True)
class HandOut:
    """Give the caller this event (it is the receiver's offset now)."""

    event: StreamEvent


@dataclass(frozen=True, slots=True)
class Read:
    """Read up to ``limit`` events after ``after`` (taking the pending wake
    first: a wake from then on means news)."""

    after: int
    limit: int


@dataclass(frozen=True, slots=True)
class AwaitWake:
    """Nothing new: wait for a wake, at most ``seconds`` (the backstop)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Stop:
    """The receiver (or its wake source) is closed: deliver nothing more."""


SubscriberAction = HandOut | Read | AwaitWake | Pause | Stop


class _Step(enum.Enum):
    READ = "read"
    WAIT = "wait"
    PAUSE = "pause"


class Subscriber:
    """What an ``EventReceiver`` does next, and what it has: the events read
    and not yet handed out, the offset of the last one handed out
    (``offset``, what ``save_offset`` saves) and of the last one read.

    ``recv`` follows ``next_action``: hand out what was read; otherwise read;
    a read that found nothing waits for a wake (or the backstop) before the
    next; a read that failed pauses (``ErrorBackoff``: 50 ms doubling to
    5 s) and reads again, so a database that fails for a while is ridden out.
    Pure: the caller reads, waits and sleeps.
    """

    def __init__(
        self, batch: int, backstop: float, backoff: Backoff = ROUND_TRIP_BACKOFF
    ) -> None:
        self.batch = check_limit(batch, "batch")
        self.backstop = check_seconds(backstop, "timeout", allow_zero=True)
        self.state = ReceiverState.NEW
        self.offset = 0
        self.fetched = 0
        self.buffer: deque[StreamEvent] = deque()
        self._failures = ErrorBackoff(backoff)
        self._step = _Step.READ
        self._pause_us = 0

    # -- the receiver's life ----------------------------------------------------
    def entering(self) -> None:
        """About to be entered: refused unless new."""
        if self.state is not ReceiverState.NEW:
            raise Closed("an EventReceiver can be entered once")

    def opened(self) -> None:
        """Entered (its wake source open): delivering from now on."""
        self.state = ReceiverState.OPEN

    def start_at(self, offset: int) -> None:
        """Deliver from after ``offset`` (the consumer's saved offset)."""
        self.offset = self.fetched = offset

    def close(self) -> None:
        self.state = ReceiverState.CLOSED

    def is_closed(self, source_closed: bool) -> bool:
        """Closed, not entered, or its wake source (``source_closed``) gone."""
        return self.state is not ReceiverState.OPEN or source_closed

    def check_open(self, source_closed: bool) -> None:
        if self.state is ReceiverState.NEW:
            raise Closed("EventReceiver used outside its 'async with' block")
        if self.is_closed(source_closed):
            raise Closed("event receiver is closed")

    # -- delivering ---------------------------------------------------------------
    def take(self) -> StreamEvent | None:
        """The next event already read, handed out now; None if there is none."""
        if not self.buffer:
            return None
        event = self.buffer.popleft()
        self.offset = event.offset
        return event

    def receiving(self) -> None:
        """A ``recv`` starts: it reads first (unless events are waiting), and
        its failures are its own."""
        self._step = _Step.READ
        self._failures.succeeded()

    def next_action(self, source_closed: bool) -> SubscriberAction:
        if self.is_closed(source_closed):
            return Stop()
        event = self.take()
        if event is not None:
            return HandOut(event)
        if self._step is _Step.WAIT:
            return AwaitWake(self.backstop)
        if self._step is _Step.PAUSE:
            return Pause(self._pause_us / US_PER_S)
        return self.read_request()

    def read_request(self) -> Read:
        return Read(self.fetched, self.batch)

    def read(self, events: list[StreamEvent]) -> bool:
        """A read came back with ``events``; whether it found any."""
        self._failures.succeeded()
        if events:
            self.buffer.extend(events)
            self.fetched = events[-1].offset
            self._step = _Step.READ
            return True
        self._step = _Step.WAIT
        return False

    def read_failed(self) -> float:
        """A read's round trip failed: seconds to pause before the next."""
        self._pause_us = self._failures.failed()
        self._step = _Step.PAUSE
        return self._pause_us / US_PER_S

    def waited(self) -> None:
        """A wake came, or the backstop passed: read again."""
        self._step = _Step.READ

    def paused(self) -> None:
        self._step = _Step.READ
