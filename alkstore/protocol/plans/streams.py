"""Stream plans (publish, read, offsets, retention), and ``Subscriber``:
what an ``EventReceiver`` does next."""

from __future__ import annotations

from dataclasses import dataclass

from ..dialect import Dialect
from ..plan import Plan, Row, fetch_all, fetch_count, fetch_one, fetch_row, reads
from ..rows import _int, _opt_int, _shape, _str, stream_event
from ..values.ints import check_int
from ..values.names import stream_channel
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


