"""Wakes on SQLite: a row per wake in the notifications table, which the
other processes' watchers read back (``NotificationLog``)."""

from __future__ import annotations

from ...protocol.dialect import STATE_PENDING
from ...protocol.plan import Fetch, Statement
from ..sql import Sql
from .tables import JOBS, NOTIFICATIONS


class Wakes:
    _notify = Sql(
        f"INSERT INTO {NOTIFICATIONS} (channel, origin, created_at) "
        "VALUES (:channel, :origin, :now)"
    )

    def notify(self, channel: str, origin: str, now_us: int) -> Statement:
        return self._notify.bind(channel=channel, origin=origin, now=now_us, wakes=(channel,))

    def notify_new_jobs(self, channel: str, origin: str, now_us: int) -> Statement | None:
        # No row: the new jobs are the log (``pending_job_after``). A row
        # was a page more for every enqueue to write, 20-28 us of its ~95.
        return None

    # New jobs as other processes' watchers read them: job ids come from
    # AUTOINCREMENT and one writer at a time, so they grow in commit order
    # and are never reused; a watcher remembers the newest it saw.
    _last_job_id = Sql(f"SELECT COALESCE(MAX(id), 0) FROM {JOBS}", Fetch.ONE)

    def last_job_id(self) -> Statement:
        return self._last_job_id.bind()

    # A pending job: one claimed already needs no wake. One probe
    # of the jobs_list index (queue, state, id).
    _pending_job_after = Sql(
        f"SELECT 1 FROM {JOBS} WHERE queue = :queue AND state = {STATE_PENDING} AND id > :after "
        "LIMIT 1",
        Fetch.ONE,
    )

    def pending_job_after(self, queue: str, after_id: int) -> Statement:
        return self._pending_job_after.bind(queue=queue, after=after_id)

    _notifications_since = Sql(
        f"SELECT id, channel, origin FROM {NOTIFICATIONS} "
        "WHERE id > :after ORDER BY id LIMIT :limit",
        Fetch.ALL,
    )

    def notifications_since(self, after_id: int, limit: int) -> Statement:
        return self._notifications_since.bind(after=after_id, limit=limit)

    _last_notification_id = Sql(f"SELECT COALESCE(MAX(id), 0) FROM {NOTIFICATIONS}", Fetch.ONE)

    def last_notification_id(self) -> Statement:
        return self._last_notification_id.bind()

    # Rows older than the retention among the oldest ``limit`` by id (the
    # primary key: ids follow commit order, so these are the oldest rows
    # within a clock's skew); see docs/wakes.md for why no live watcher still
    # needs them. A young row among them (a skewed clock) stays, and so may
    # old ones behind it until it ages: the batch comes back short.
    _prune_notifications = Sql(
        f"DELETE FROM {NOTIFICATIONS} WHERE id IN (SELECT id FROM (SELECT id, created_at "
        f"FROM {NOTIFICATIONS} ORDER BY id LIMIT :limit) WHERE created_at < :before)",
        Fetch.ROWCOUNT,
    )

    def prune_notifications(self, before_us: int, limit: int) -> Statement:
        return self._prune_notifications.bind(before=before_us, limit=limit)
