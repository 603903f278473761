"""The tables PostgreSQL's statements name (created in :mod:`.schema`), each
qualified by the dialect's schema: ``SCHEMA`` becomes the quoted schema when
a dialect is made for it."""

from __future__ import annotations

from ..sql import SCHEMA


def _table(name: str) -> str:
    return f'{SCHEMA}."{name}"'


JOBS = _table("jobs")
DEAD = _table("dead")
HISTORY = _table("history")
QUEUES = _table("queues")
CLAIM_LOG = _table("claim_log")
STREAMS = _table("streams")
EVENTS = _table("events")
OFFSETS = _table("offsets")
SCHEDULES = _table("schedules")
LOCKS = _table("locks")
META = _table("meta")
WAITING = _table("waiting")
DEPS = _table("deps")
WORKFLOWS = _table("workflows")
WORKFLOW_STEPS = _table("workflow_steps")
ATTEMPTS = _table("attempts")
