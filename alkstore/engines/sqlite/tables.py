"""The tables SQLite's statements name (created in :mod:`.schema`), each
under the ``__alkstore_`` prefix, so they can share a file with the
application's own."""

from __future__ import annotations

JOBS = "__alkstore_jobs"
DEAD = "__alkstore_dead"
HISTORY = "__alkstore_history"
QUEUES = "__alkstore_queues"
CLAIM_LOG = "__alkstore_claim_log"
STREAMS = "__alkstore_streams"
EVENTS = "__alkstore_events"
OFFSETS = "__alkstore_offsets"
SCHEDULES = "__alkstore_schedules"
LOCKS = "__alkstore_locks"
META = "__alkstore_meta"
NOTIFICATIONS = "__alkstore_notifications"
WAITING = "__alkstore_waiting"
DEPS = "__alkstore_deps"
WORKFLOWS = "__alkstore_workflows"
WORKFLOW_STEPS = "__alkstore_workflow_steps"
ATTEMPTS = "__alkstore_attempts"
