"""Wakes on PostgreSQL: ``pg_notify`` on the channel's mapped identifier
(:mod:`.names`), delivered at commit, and the ``LISTEN`` the listener runs."""

from __future__ import annotations

from ...protocol.plan import Statement
from ..sql import Sql
from .names import channel_identifier, listen_sql, unlisten_sql


class Wakes:
    # The schema of a store outside the default one, whose channels are its own.
    _channel_scope: str

    # Delivered at commit, never on rollback; the payload is always empty
    # (wakes are opaque).
    _notify = Sql("SELECT pg_notify(:channel::text, '')")

    def notify(self, channel: str, origin: str, now_us: int) -> Statement:
        # ``origin`` and ``now_us`` are SQLite-watcher bookkeeping with no
        # use here: NOTIFY carries the sender's pid.
        return self._notify.bind(channel=self.channel_identifier(channel), wakes=(channel,))

    def notify_new_jobs(self, channel: str, origin: str, now_us: int) -> Statement | None:
        return self.notify(channel, origin, now_us)

    # Postgres only (the listener's, not the protocol's).
    def channel_identifier(self, channel: str) -> str:
        """The LISTEN/NOTIFY identifier of ``channel`` in this schema (see
        :mod:`.names`: stores in other schemas of the database do not hear it)."""
        return channel_identifier(channel, self._channel_scope)

    def listen(self, channel: str) -> str:
        """``LISTEN`` SQL for ``channel``; no parameters. Run it outside any
        transaction block on the listening connection (inside one it only
        takes effect at commit)."""
        return listen_sql(channel, self._channel_scope)

    def unlisten(self, channel: str) -> str:
        """``UNLISTEN`` SQL for ``channel``; no parameters."""
        return unlisten_sql(channel, self._channel_scope)
