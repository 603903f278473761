"""Wake bookkeeping: which receivers listen to which channel.

Pure: the router maps channels to receiver ids and tells the driver whom to
wake; ``foreign_notifications`` decides, from the rows the SQLite watcher
read back, which channels another process notified (when to look again is
``protocol/machines/watcher.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dialect import Dialect, NotificationLog
from ..plan import Plan, fetch_all, fetch_row


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
