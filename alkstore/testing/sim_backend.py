"""What the simulation needs from a database engine, whichever it is.

The simulation (``stepping.py``) decides the interleaving; a backend runs
it on a real engine. Each actor owns a ``SimConn`` and sends one statement
per step. A statement may finish at once or wait on a lock another actor's
open transaction holds; after every step the backend *settles*: it waits
until each in-flight statement has either finished or is provably waiting on
a lock. Nothing is left running between steps, which is what makes a run
depend on its choices alone and so replay exactly (within the limit
``sim_postgres`` states for three or more waiters on one row).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..protocol.dialect import Dialect
from ..protocol.plan import Fetch, Statement


@dataclass
class Snapshot:
    """What has committed, as the invariants need it."""

    job_ids: set[int] = field(default_factory=set)  # pending, processing or dead
    job_markers: set[str] = field(default_factory=set)
    event_markers: set[str] = field(default_factory=set)  # stream 'events'
    woken_channels: set[str] = field(default_factory=set)  # every wake seen so far
    history_ids: set[int] = field(default_factory=set)  # finished jobs kept in history
    # the unique key of every live job that has one (a key twice: two holders)
    live_unique_keys: list[str] = field(default_factory=list)
    dead_ids: set[int] = field(default_factory=set)  # in the dead letters
    # Jobs waiting for their dependencies, and every row of history as
    # (id, outcome, result), a row twice if it is there twice.
    waiting_ids: list[int] = field(default_factory=list)
    history: list[tuple[int, str, str | None]] = field(default_factory=list)
    # The jobs with rows in the attempt history.
    attempt_job_ids: set[int] = field(default_factory=set)


class SimConn(Protocol):
    """One actor's connection. At most one statement is in flight."""

    in_flight: bool  # a statement was sent and its result not yet taken
    waiting: bool  # the in-flight statement waits on a lock (set by ``settle``)

    def begin(self, write: bool) -> bool:
        """Open a transaction; False when the engine refuses for now (busy)."""
        ...

    def send(self, statement: Statement) -> None: ...

    def result(self, fetch: Fetch) -> Any:
        """The finished statement's result; raises ``DatabaseError``."""
        ...

    def finish(self, commit: bool) -> None: ...

    def crash(self) -> None:
        """Drop the connection as a crashed process would: its open
        transaction rolls back and its locks are gone when this returns."""
        ...


class SimRun(Protocol):
    """One run's database: empty when opened, discarded when closed."""

    dialect: Dialect
    # True where one writer excludes all others (SQLite): a write BEGIN is
    # not offered while another actor holds the write lock.
    exclusive_writer: bool

    def connect(self) -> SimConn: ...

    def settle(self, conns: list[SimConn]) -> None:
        """Wait until every in-flight statement finished or waits on a lock."""
        ...

    def snapshot(self) -> Snapshot: ...

    def live_job_ids(self) -> list[int]:
        """Jobs still in the jobs table (not acked, not dead)."""
        ...

    def close(self) -> None:
        """End (or keep for the next run) every connection handed out."""
        ...


class SimBackend(Protocol):
    """Opens a fresh database for each run (a run may be one of thousands)."""

    name: str

    def open_run(self, channels: list[str]) -> SimRun:
        """An empty migrated database; wakes on ``channels`` are recorded."""
        ...

    def close(self) -> None:
        """Release what the backend holds across runs (connections, files)."""
        ...
