"""alkstore: durable messaging in the database you already have."""

from .api.locks import Lock
from .api.outbox import Outbox
from .api.queue import Job, Queue
from .api.store import Store
from .api.stream import EventReceiver, Stream
from .api.tx import Transaction
from .api.wakes import WakeReceiver
from .protocol.backoff import Backoff
from .protocol.errors import (
    AlkstoreError,
    Closed,
    CodecError,
    CommitUnknown,
    DatabaseError,
    InvalidArgument,
    InvalidName,
    LockLost,
    LockTimeout,
    PayloadTooLarge,
    ReservedName,
    TransactionConflict,
    UsageError,
)
from .protocol.names import LISTENER_RECONNECTED, RESERVED_PREFIX
from .protocol.types import JobInfo, QueueStats, StreamEvent, Wake

__version__ = "0.1.0"

__all__ = [
    "LISTENER_RECONNECTED",
    "RESERVED_PREFIX",
    "AlkstoreError",
    "Backoff",
    "Closed",
    "CodecError",
    "CommitUnknown",
    "DatabaseError",
    "EventReceiver",
    "InvalidArgument",
    "InvalidName",
    "Job",
    "JobInfo",
    "Lock",
    "LockLost",
    "LockTimeout",
    "Outbox",
    "PayloadTooLarge",
    "Queue",
    "QueueStats",
    "ReservedName",
    "Store",
    "Stream",
    "StreamEvent",
    "Transaction",
    "TransactionConflict",
    "UsageError",
    "Wake",
    "WakeReceiver",
]
