"""Stream plans: publish, read, offsets, retention."""

from __future__ import annotations

from .dialect import Dialect
from .ints import check_int
from .names import stream_channel
from .plan import Plan, reads
from .queues import check_limit
from .rows import stream_event
from .types import StreamEvent


def publish(
    d: Dialect, stream: str, key: str | None, payload_json: str, origin: str, now_us: int
) -> Plan[int]:
    row = yield d.next_offset(stream)
    offset = int(row[0])
    yield d.insert_event(stream, offset, key, payload_json, now_us)
    yield d.notify(stream_channel(stream), origin, now_us)
    return offset


@reads
def read_since(d: Dialect, stream: str, offset: int, limit: int) -> Plan[list[StreamEvent]]:
    rows = yield d.read_since(stream, check_offset(offset), check_limit(limit))
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
    row = yield d.get_offset(stream, consumer)
    return 0 if row is None else int(row[0])


def trim_to(d: Dialect, stream: str, offset: int) -> Plan[int]:
    """Drop events with offsets below ``offset``; returns how many went."""
    count = yield d.trim(stream, check_offset(offset))
    return int(count)


def check_offset(offset: object) -> int:
    return check_int(offset, "offset", lo=0)
