"""Stream plans (publish, read, offsets, retention), and ``Subscriber``:
what an ``EventReceiver`` does next."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from ..dialect import Dialect
from ..plan import Plan, Row, fetch_all, fetch_count, fetch_one, fetch_row, reads
from ..rows import _int, _opt_int, _shape, _str, stream_event
from ..values.backoff import ROUND_TRIP_BACKOFF, Backoff, ErrorBackoff, Pause
from ..values.errors import Closed
from ..values.ints import check_int
from ..values.names import stream_channel
from ..values.timeconv import US_PER_S, check_seconds
from ..values.types import StreamEvent
from .queues import check_limit


def publish(
    d: Dialect, stream: str, key: str | None, payload_json: str, origin: str, now_us: int
) -> Plan[int]:
    row = yield from fetch_row(d.next_offset(stream))
    offset = int(row[0])
    yield d.insert_event(stream, offset, key, payload_json, now_us)
    yield d.notify(stream_channel(stream), origin, now_us)
    return offset


@reads
def read_since(d: Dialect, stream: str, offset: int, limit: int) -> Plan[list[StreamEvent]]:
    rows = yield from fetch_all(d.read_since(stream, check_offset(offset), check_limit(limit)))
    return [stream_event(r) for r in rows]


@reads
def read_from_consumer(
    d: Dialect, stream: str, consumer: str, limit: int
) -> Plan[list[StreamEvent]]:
    offset = yield from get_offset(d, stream, consumer)
    return (yield from read_since(d, stream, offset, limit))


def save_offset(d: Dialect, stream: str, consumer: str, offset: int) -> Plan[None]:
    """Monotonic: saving a lower offset than the stored one changes nothing."""
    yield d.save_offset(stream, consumer, check_offset(offset))


@reads
def get_offset(d: Dialect, stream: str, consumer: str) -> Plan[int]:
    row = yield from fetch_one(d.get_offset(stream, consumer))
    return 0 if row is None else int(row[0])


@reads
def head_offset(d: Dialect, stream: str) -> Plan[int]:
    """The last offset the stream has given out (0: never published to).
    Trimming leaves it: offsets are never given out again."""
    row = yield from fetch_one(d.head_offset(stream))
    return 0 if row is None else int(row[0])


@reads
def consumer_lag(d: Dialect, stream: str, consumer: str) -> Plan[int]:
    """How many offsets ``consumer``'s saved offset is behind the stream's
    head (``head_offset - get_offset``, never below 0), read together."""
    head = yield from head_offset(d, stream)
    saved = yield from get_offset(d, stream, consumer)
    return max(0, head - saved)


def trim_to(d: Dialect, stream: str, offset: int) -> Plan[int]:
    """Drop events with offsets below ``offset``; returns how many went."""
    count = yield from fetch_count(d.trim(stream, check_offset(offset)))
    return int(count)


def check_offset(offset: object) -> int:
    return check_int(offset, "offset", lo=0)


# -- retention -----------------------------------------------------------------
def set_retention(
    d: Dialect, stream: str, max_age_us: int | None, max_events: int | None
) -> Plan[None]:
    """Record ``stream``'s retention (in its counter row, for every process)."""
    yield d.set_stream_retention(stream, max_age_us, max_events)


def protect(d: Dialect, stream: str, consumer: str) -> Plan[None]:
    yield d.protect_consumer(stream, consumer)


def unprotect(d: Dialect, stream: str, consumer: str) -> Plan[bool]:
    count = yield from fetch_count(d.unprotect_consumer(stream, consumer))
    return bool(count)


@dataclass(frozen=True, slots=True)
class Retained:
    """A stream under a retention policy, as housekeeping read it."""

    name: str
    last_offset: int
    max_age_us: int | None
    max_events: int | None


def retained(row: Row) -> Retained:
    """A ``retained_streams`` row; a malformed one raises ``CodecError``."""
    _shape(row, 4, "retained stream")
    return Retained(
        _str(row[0], "name"),
        _int(row[1], "last_offset"),
        _opt_int(row[2], "max_age_us"),
        _opt_int(row[3], "max_events"),
    )


@reads
def retained_streams(d: Dialect, after: str, limit: int) -> Plan[list[Retained]]:
    """Streams under a retention policy named above ``after`` (a page)."""
    rows = yield from fetch_all(d.retained_streams(after, limit))
    return [retained(r) for r in rows]


def retention_cut(stream: Retained, first_young: int | None) -> int:
    """The highest offset retention drops (0: none): beyond the newest
    ``max_events``, or older than ``max_age`` (everything below the first
    event young enough to keep, ``first_young``: None when none is, so all
    are old). An event goes when either limit says so. Protected consumers
    are the engine's to honour, in the delete (``rules.protected_floor``);
    the counter (``head_offset``) is never touched."""
    cut = 0
    if stream.max_events is not None:
        cut = max(cut, stream.last_offset - stream.max_events)
    if stream.max_age_us is not None:
        cut = max(cut, stream.last_offset if first_young is None else first_young - 1)
    return cut


def prune_stream(d: Dialect, stream: Retained, now_us: int, limit: int) -> Plan[int]:
    """Drop one batch of ``stream``'s events past its retention; how many went."""
    first_young: int | None = None
    if stream.max_age_us is not None:
        cutoff = now_us - stream.max_age_us
        row = yield from fetch_one(d.first_young_event(stream.name, cutoff))
        first_young = None if row is None else _int(row[0], "offset")
    cut = retention_cut(stream, first_young)
    if cut <= 0:
        return 0
    count = yield from fetch_count(d.prune_events(stream.name, cut, limit))
    return int(count)


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
