"""Read models: what a store holds, for the people and tools that operate it.

Every plan here only reads (``@reads``), so a read-only store runs all of
them, and each runs in one read transaction: what it returns is one
consistent snapshot. They list queues, a queue's jobs page by page, streams
with their consumers, and locks; the schedules' own are in ``schedule.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Final

from ..dialect import LIVE_FILTERS, Dialect
from ..plan import Plan, Row, fetch_all, fetch_row, reads
from ..rows import (
    dead_info,
    history_info,
    job_info,
    lock_info,
    queue_summary,
    stream_event,
    stream_info,
    waiting_info,
)
from ..values.errors import InvalidArgument, brief
from ..values.ints import check_int
from ..values.names import outbox_of
from ..values.timeconv import to_datetime
from ..values.types import JobInfo, LockInfo, QueueSummary, StreamEvent, StreamInfo, Throughput
from .queues import check_limit

# The states ``list_jobs`` filters by: the live ones (``LIVE_FILTERS``:
# pending is ready and scheduled together), dead letters, and the finished
# jobs a queue's history keeps.
JOB_STATES: Final = (*LIVE_FILTERS, "waiting", "dead", "acked", "cancelled")
# What ``list_jobs`` lists without a state: live, waiting and dead jobs.
_EVERY_STATE: Final = ("pending", "processing", "waiting", "dead")
# The offset ``list_events`` starts below when given none: above every
# offset a stream can hand out (a signed 64-bit column on both engines).
NEWEST: Final = 2**63 - 1
# ``throughput``'s bounds: a bucket of at least a second, at most this many
# buckets (each one a group of one statement's result, never a round trip).
MAX_BUCKETS: Final = 1440


def check_job_state(state: object) -> str | None:
    """``state`` if it is one ``list_jobs`` knows (or None: every live and
    dead job); ``InvalidArgument`` otherwise."""
    if state is None or (isinstance(state, str) and state in JOB_STATES):
        return state
    raise InvalidArgument(
        f"job state must be one of {', '.join(JOB_STATES)} (or None), got {brief(state)}"
    )


def check_after(after: object) -> int:
    """The id a page starts after: None (from the start) or a job id."""
    return 0 if after is None else check_int(after, "after", lo=0)


def sources(state: str | None) -> tuple[str, ...]:
    """The tables (and filters) a listing of ``state`` reads, one page each:
    a filter of ``LIVE_FILTERS`` (live jobs), ``waiting``, ``dead``, or an
    outcome of the history (``acked``, ``cancelled``)."""
    return _EVERY_STATE if state is None else (state,)


def first_ids(pages: Iterable[Sequence[JobInfo]], limit: int) -> list[JobInfo]:
    """The ``limit`` lowest ids of several pages, ascending. Each page holds
    the lowest ids of its own table above the same ``after``, at most
    ``limit``, so the lowest ``limit`` of them all are the lowest of the
    tables together: the next page starts after the last id returned."""
    merged = sorted((job for page in pages for job in page), key=lambda job: job.id)
    return merged[:limit]


@reads
def list_queues(d: Dialect, now_us: int) -> Plan[list[QueueSummary]]:
    """Every queue with live jobs, dead letters, history or settings, by name."""
    names = yield from fetch_all(d.queue_names())
    out = []
    for (name,) in names:
        out.append((yield from summarize_queue(d, name, now_us)))
    return out


@reads
def summarize_queue(d: Dialect, queue: str, now_us: int) -> Plan[QueueSummary]:
    """One queue as ``list_queues`` lists it (zeros for a queue never used)."""
    row = yield from fetch_row(d.queue_summary(queue, now_us))
    return queue_summary(queue, outbox_of(queue), row)


@reads
def list_jobs(
    d: Dialect, queue: str, state: str | None, after: int, limit: int, now_us: int
) -> Plan[list[JobInfo]]:
    """Up to ``limit`` jobs of ``queue`` in ``state`` with ids above
    ``after``, ascending (keyset paging: pass the last id as the next
    ``after``)."""
    state, after, limit = check_job_state(state), check_after(after), check_limit(limit)
    pages: list[list[JobInfo]] = []
    for source in sources(state):
        if source in LIVE_FILTERS:
            rows = yield from fetch_all(d.job_page(queue, source, after, limit, now_us))
            pages.append([job_info(r) for r in rows])
        elif source == "dead":
            rows = yield from fetch_all(d.dead_page(queue, after, limit))
            pages.append([dead_info(r) for r in rows])
        elif source == "waiting":
            rows = yield from fetch_all(d.waiting_page(queue, after, limit))
            pages.append([waiting_info(r) for r in rows])
        else:
            rows = yield from fetch_all(d.history_page(queue, source, after, limit))
            pages.append([history_info(r) for r in rows])
    return first_ids(pages, limit)


@reads
def stream_summary(d: Dialect, stream: str) -> Plan[StreamInfo]:
    """One stream, its consumers included (all zeros for a stream never used)."""
    summary = yield from fetch_row(d.stream_summary(stream))
    consumers = yield from fetch_all(d.stream_consumers(stream))
    return stream_info(stream, summary, consumers)


def check_before(before: object) -> int:
    """The offset a page of events ends below: None (the newest) or an offset."""
    return NEWEST if before is None else check_int(before, "before", lo=0)


@reads
def list_events(d: Dialect, stream: str, before: int, limit: int) -> Plan[list[StreamEvent]]:
    """Up to ``limit`` events of ``stream`` with offsets below ``before``,
    newest first (keyset paging: pass the last offset as the next
    ``before``); a walk of the events' primary key, backwards."""
    before, limit = check_before(before), check_limit(limit)
    rows = yield from fetch_all(d.events_before(stream, before, limit))
    return [stream_event(r) for r in rows]


def check_window(window_us: int, bucket_us: int) -> int:
    """How many buckets of ``bucket_us`` a window of ``window_us`` holds: a
    whole number, at least 1, at most ``MAX_BUCKETS``, of buckets of at
    least a second (``InvalidArgument`` otherwise)."""
    if bucket_us < 1_000_000:
        raise InvalidArgument("bucket must be at least 1 second")
    count, rest = divmod(window_us, bucket_us)
    if rest or count < 1:
        raise InvalidArgument("window must be a whole, positive number of buckets")
    if count > MAX_BUCKETS:
        raise InvalidArgument(f"window holds more than {MAX_BUCKETS} buckets")
    return count


def bucket_counts(rows: Iterable[Row], count: int) -> tuple[int, ...]:
    """``(bucket index, count)`` rows as a tuple of ``count`` counts (rows
    outside the window, which a clock skew could produce, are dropped)."""
    counts = [0] * count
    for index, n in rows:
        if 0 <= int(index) < count:
            counts[int(index)] += int(n)
    return tuple(counts)


@reads
def throughput(
    d: Dialect, queue: str, now_us: int, window_us: int, bucket_us: int
) -> Plan[Throughput]:
    """What ``queue`` finished (into history) and buried (still dead) in
    each bucket of the window ending at ``now_us`` (included): two range counts, on the
    history's and the dead letters' (queue, time) indexes."""
    count = check_window(window_us, bucket_us)
    since = now_us - window_us
    # The window is (since, now]: what finished at ``now`` itself counts, in
    # the last bucket. The statements count [lo, hi) from lo.
    lo, hi = since + 1, now_us + 1
    finished = yield from fetch_all(d.finished_per_bucket(queue, lo, hi, bucket_us))
    dead = yield from fetch_all(d.dead_per_bucket(queue, lo, hi, bucket_us))
    return Throughput(
        queue=queue,
        since=to_datetime(since),
        until=to_datetime(now_us),
        bucket=timedelta(microseconds=bucket_us),
        finished=bucket_counts(finished, count),
        dead=bucket_counts(dead, count),
    )


@reads
def list_streams(d: Dialect) -> Plan[list[StreamInfo]]:
    """Every stream with a counter row, events or saved offsets, by name."""
    names = yield from fetch_all(d.stream_names())
    out = []
    for (name,) in names:
        out.append((yield from stream_summary(d, name)))
    return out


@reads
def list_locks(d: Dialect, now_us: int) -> Plan[list[LockInfo]]:
    """Every lock ever taken, by name, held or not at ``now_us``."""
    rows = yield from fetch_all(d.list_locks(now_us))
    return [lock_info(r) for r in rows]
