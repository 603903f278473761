"""What every unit of one worker shares: the narrow port to the store, the
queue (its name and its jobs' options, as values), the worker's id, its
policies, its telemetry hooks and its task state. A unit that calls
another is handed it when it is made, and calls its public methods only."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ...api.core.handle import StoreCore
from ...api.core.telemetry import WorkerTelemetry
from ...protocol.machines.leases import Leases
from ...protocol.machines.worker import WorkerPolicy
from ...protocol.values.errors import AlkstoreError, Closed
from ...protocol.values.types import QueueOptions
from .state import WorkerState

J = TypeVar("J")

log = logging.getLogger("alkstore.worker")


@dataclass(eq=False)
class WorkerContext(Generic[J]):
    core: StoreCore
    queue: str
    options: QueueOptions
    worker_id: str
    policy: WorkerPolicy
    leases: Leases
    state: WorkerState[J]
    telemetry: WorkerTelemetry


async def guard(awaitable: Awaitable[Any], what: str) -> Any:
    """A worker outlives a failed round trip: log it; the job's claim will
    lapse and it will be claimed again. A closed store ends the worker."""
    try:
        return await awaitable
    except Closed:
        raise
    except AlkstoreError:
        log.exception("worker %s failed", what)
        return None
