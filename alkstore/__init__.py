"""alkstore: durable messaging in the database you already have.

The public surface is this module, the drivers ``alkstore.io_trio`` and
``alkstore.io_asyncio``, and ``alkstore.testing``: the names in their
``__all__``, listed in docs/api.md. Every other module is internal and may
change without notice.
"""

from .api.core.wakes import WakeReceiver
from .api.drain import Drain
from .api.job import Job, StoreHandle
from .api.locks import Lock
from .api.outbox import Outbox
from .api.queue import Queue
from .api.store import Store
from .api.stream import EventReceiver, Stream
from .api.tx import Transaction
from .api.workflow import Step, StepStatus, Workflow, WorkflowRun, WorkflowStatus
from .protocol.plans.housekeeping import PruneReport
from .protocol.plans.workflows import WorkflowSummary
from .protocol.values.attempts import Attempt
from .protocol.values.backoff import Backoff
from .protocol.values.errors import (
    AlkstoreError,
    ClaimRulesChanged,
    Closed,
    CodecError,
    CommitUnknown,
    DatabaseError,
    InvalidArgument,
    InvalidName,
    JobCancelled,
    JobFailed,
    LockLost,
    LockTimeout,
    PayloadTooLarge,
    ReservedName,
    ResultTimeout,
    SchemaMismatch,
    TransactionConflict,
    UsageError,
)
from .protocol.values.names import LISTENER_RECONNECTED, RESERVED_PREFIX
from .protocol.values.types import (
    ConsumerInfo,
    Enqueued,
    EnqueueOptions,
    JobInfo,
    LockInfo,
    QueueLimits,
    QueueStats,
    QueueSummary,
    Rate,
    ScheduleInfo,
    StreamEvent,
    StreamInfo,
    Throughput,
    Wake,
    WorkerReport,
)
from .runner.runtime import Clock, ManualClock, SystemClock

__version__ = "0.1.0"

__all__ = [
    "LISTENER_RECONNECTED",
    "RESERVED_PREFIX",
    "AlkstoreError",
    "Attempt",
    "Backoff",
    "ClaimRulesChanged",
    "Clock",
    "Closed",
    "CodecError",
    "CommitUnknown",
    "ConsumerInfo",
    "DatabaseError",
    "Drain",
    "EnqueueOptions",
    "Enqueued",
    "EventReceiver",
    "InvalidArgument",
    "InvalidName",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobInfo",
    "Lock",
    "LockInfo",
    "LockLost",
    "LockTimeout",
    "ManualClock",
    "Outbox",
    "PayloadTooLarge",
    "PruneReport",
    "Queue",
    "QueueLimits",
    "QueueStats",
    "QueueSummary",
    "Rate",
    "ReservedName",
    "ResultTimeout",
    "ScheduleInfo",
    "SchemaMismatch",
    "Step",
    "StepStatus",
    "Store",
    "StoreHandle",
    "Stream",
    "StreamEvent",
    "StreamInfo",
    "SystemClock",
    "Throughput",
    "Transaction",
    "TransactionConflict",
    "UsageError",
    "Wake",
    "WakeReceiver",
    "WorkerReport",
    "Workflow",
    "WorkflowRun",
    "WorkflowStatus",
    "WorkflowSummary",
]


def _report_public_module() -> None:
    """Errors and handles report ``alkstore`` as their module, so a
    traceback says ``alkstore.DatabaseError``, the name users import, not
    the internal module that defines it (trio does the same). Values
    (dataclasses) keep their defining module: their fields' annotations name
    types of it, which ``typing.get_type_hints`` (FastAPI, pydantic)
    resolves there."""
    import dataclasses

    for name in __all__:
        obj = globals()[name]
        if (
            isinstance(obj, type)
            and obj.__module__.startswith(f"{__name__}.")
            and not dataclasses.is_dataclass(obj)
        ):
            obj.__module__ = __name__


_report_public_module()
