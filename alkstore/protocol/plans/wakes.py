"""Wake bookkeeping: which receivers listen to which channel.

Pure: the router maps channels to receiver ids and tells the driver whom to
wake; ``foreign_notifications`` decides, from the rows the SQLite watcher
read back, which channels another process notified, and ``new_jobs`` which
waited queues gained jobs (when to look again is
``protocol/machines/watcher.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..dialect import Dialect, NotificationLog
from ..plan import Plan, fetch_all, fetch_one, fetch_row


def notify(d: Dialect, channel: str, origin: str, now_us: int) -> Plan[None]:
    """Wake ``channel``'s receivers here and in other processes, once the
    enclosing transaction commits (the channel is checked by the caller)."""
    yield d.notify(channel, origin, now_us)


@dataclass(frozen=True, slots=True)
class ForeignNotifications:
    last_id: int
    channels: frozenset[str]


def foreign_notifications(
    d: NotificationLog, after_id: int, origin: str, limit: int = 10_000
) -> Plan[ForeignNotifications]:
    """Channels notified by other stores since ``after_id``.

    Our own notifications already woke local receivers at commit, so they are
    skipped here rather than delivered twice.
    """
    rows = yield from fetch_all(d.notifications_since(after_id, limit))
    last = after_id
    channels: set[str] = set()
    for row_id, channel, row_origin in rows:
        last = max(last, int(row_id))
        if row_origin != origin:
            channels.add(str(channel))
    return ForeignNotifications(last, frozenset(channels))


def last_notification_id(d: NotificationLog) -> Plan[int]:
    row = yield from fetch_row(d.last_notification_id())
    return int(row[0])


def last_job_id(d: NotificationLog) -> Plan[int]:
    row = yield from fetch_row(d.last_job_id())
    return int(row[0])


@dataclass(frozen=True, slots=True)
class NewJobs:
    last_id: int
    queues: frozenset[str]


def new_jobs(d: NotificationLog, after_id: int, queues: Iterable[str]) -> Plan[NewJobs]:
    """Which of ``queues`` gained a pending job since the job id ``after_id``
    (the wake an enqueue writes no row for), and the newest job id now.

    The newest id is read first: a job committed after that read and found
    by a probe is found again by the next look, a wake too many (wakes are
    hints), while reading it last could step over a job no probe saw. Our
    own new jobs are among them (they woke local receivers at commit
    already): a job id says nothing of who inserted it."""
    newest = yield from last_job_id(d)
    found: set[str] = set()
    if newest > after_id:
        for queue in queues:
            row = yield from fetch_one(d.pending_job_after(queue, after_id))
            if row is not None:
                found.add(queue)
    return NewJobs(max(newest, after_id), frozenset(found))
