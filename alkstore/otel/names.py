"""The names alkstore's spans and metrics use.

Attributes follow OpenTelemetry's semantic conventions for messaging where
one fits (``messaging.*``, ``error.type``); what they have no name for is
under ``alkstore.*``. docs/observability.md lists every span and metric.
"""

from __future__ import annotations

# -- messaging semantic conventions -------------------------------------------------
SYSTEM = "messaging.system"
SYSTEM_NAME = "alkstore"
DESTINATION = "messaging.destination.name"
OPERATION_TYPE = "messaging.operation.type"
OPERATION_NAME = "messaging.operation.name"
MESSAGE_ID = "messaging.message.id"
BATCH_COUNT = "messaging.batch.message_count"
CLIENT_ID = "messaging.client.id"
CONSUMER_GROUP = "messaging.consumer.group.name"
ERROR_TYPE = "error.type"

# messaging.operation.type values
SEND = "send"
RECEIVE = "receive"
PROCESS = "process"
SETTLE = "settle"

# -- alkstore's own ----------------------------------------------------------------
JOB_ATTEMPT = "alkstore.job.attempt"
# Whether the settling call still owned the job (False: it changed nothing).
JOB_OWNED = "alkstore.job.owned"
DEAD_REASON = "alkstore.job.dead_reason"
JOB_STATE = "alkstore.job.state"
ACKED_COUNT = "alkstore.jobs.acked"
FIRST_OFFSET = "alkstore.stream.first_offset"
LAST_OFFSET = "alkstore.stream.last_offset"
LOCK_NAME = "alkstore.lock.name"
LOCK_OWNER = "alkstore.lock.owner"
LOCK_ACQUIRED = "alkstore.lock.acquired"
LOCK_TOKEN = "alkstore.lock.token"

# -- metrics -----------------------------------------------------------------------
JOBS_ENQUEUED = "alkstore.jobs.enqueued"
JOBS_CLAIMED = "alkstore.jobs.claimed"
JOBS_ACKED = "alkstore.jobs.acked"
JOBS_RETRIED = "alkstore.jobs.retried"
JOBS_DEAD = "alkstore.jobs.dead"
JOB_DURATION = "alkstore.job.duration"
WAKE_LATENCY = "alkstore.wake.latency"
QUEUE_DEPTH = "alkstore.queue.depth"
QUEUE_OLDEST_READY_AGE = "alkstore.queue.oldest_ready.age"
CONSUMER_LAG = "alkstore.stream.consumer.lag"

# Seconds: from a millisecond to five minutes (handlers and wake latency
# both). The SDK's default boundaries are for milliseconds.
DURATION_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
)  # fmt: skip
