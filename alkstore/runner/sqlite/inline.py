"""Small SQLite plans run on the event-loop thread, committed in groups.

A hop to a thread and back costs more than the SQL of a typical operation
(about 230 us of CPU under trio on the reference machine, against about
80 us for an enqueue's INSERTs and COMMIT), so a store runs bounded plans
(point reads and writes, small batches) right on the event-loop thread, on
a connection of its own whose busy timeout is 0: SQLite's lock is the
arbiter. What callers submit in the same scheduling tick is committed as one
group (a savepoint per plan): each caller appends its plan, yields once, and
whichever resumes first runs everything pending. When ``BEGIN`` finds the
lock taken (a ``store.transaction()`` on the writer thread, another process)
nothing has run, and each caller hands its plan to the writer thread (or a
reader), which waits for the lock as long as ``busy_timeout`` allows.

The loop is blocked only while SQLite works on a bounded plan: checkpoints
never run here (``wal_autocheckpoint`` is 0 on this connection; the writer
thread checkpoints when the WAL grows), and plans whose work grows with
their input or with the data go to the threads instead (``bulk``).

A checkpoint copies the frames the WAL held when it began; commits landing
meanwhile leave it incomplete, and SQLite starts the log over only after a
complete one: a store that kept writing beside its checkpoints grew its WAL
without end (1.8 GB after 60,000 enqueues). So a checkpoint that came back
incomplete is followed by a second one with writes queued behind it on the
writer thread. The first did the slow part, syncing the WAL's frames to
disk, while commits went on here; the second syncs only what landed
meanwhile, and the log starts over.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ...protocol.machines.checkpoint import CheckpointCadence
from ...protocol.plan import Plan, is_read_only
from ..runtime import Runtime
from . import group as sqlite_group
from .file import DatabaseFile
from .writer import Checkpoint

T = TypeVar("T")

class _Item:
    __slots__ = ("outcome", "plan")

    def __init__(self, plan: Plan[Any]) -> None:
        self.plan = plan
        # None: pending; BUSY: not run, the owner sends it elsewhere.
        self.outcome: sqlite_group.Outcome | object | None = None


_BUSY = object()


class InlineRunner:
    def __init__(
        self,
        runtime: Runtime,
        conn: sqlite3.Connection,
        *,
        write_elsewhere: Callable[[Plan[Any]], Awaitable[tuple[Any, list[str]]]],
        read_elsewhere: Callable[[Plan[Any]], Awaitable[tuple[Any, list[str]]]],
        checkpoint: Callable[[], Checkpoint | None],
        checkpoint_frames: int,
        file: DatabaseFile | None,
    ) -> None:
        self._runtime = runtime
        self._conn = conn
        self._write_elsewhere = write_elsewhere
        self._read_elsewhere = read_elsewhere
        self._checkpoint = checkpoint
        self._cadence = CheckpointCadence(checkpoint_frames)
        self._file = file
        self._writes: list[_Item] = []
        self._reads: list[_Item] = []
        self._commits = 0  # here, ever
        self._asked_at = 0  # self._commits when the last checkpoint was asked
        self._checkpointing: Checkpoint | None = None

    async def run(self, plan: Plan[T]) -> tuple[T, list[str]]:
        read = is_read_only(plan)
        if not read and self._checkpointing is not None and self._held_back():
            return await self._write_elsewhere(plan)
        item = _Item(plan)
        (self._reads if read else self._writes).append(item)
        # Not a cancellation point: once submitted, the plan runs, and its
        # true outcome is returned (the cancel lands at the next checkpoint).
        await self._runtime.yield_now()
        if item.outcome is None:
            self._flush(read)
        outcome = item.outcome
        if outcome is _BUSY:
            elsewhere = self._read_elsewhere if read else self._write_elsewhere
            return await elsewhere(plan)
        if isinstance(outcome, sqlite_group.Failed):
            raise outcome.error
        assert isinstance(outcome, sqlite_group.Done)
        return outcome.value, outcome.wakes

    def _flush(self, read: bool) -> None:
        if read:
            batch, self._reads = self._reads, []
        else:
            batch, self._writes = self._writes, []
        try:
            outcomes = sqlite_group.run_group(
                self._conn, [i.plan for i in batch], write=not read, file=self._file
            )
        except sqlite_group.Busy:
            for item in batch:
                item.outcome = _BUSY
            return
        for item, outcome in zip(batch, outcomes, strict=True):
            item.outcome = outcome
        if not read:
            self._committed()

    def _committed(self) -> None:
        self._commits += 1
        if self._cadence.committed() and self._checkpointing is None:
            self._ask(blocking=False)

    def _ask(self, *, blocking: bool) -> None:
        item = self._checkpoint()
        if item is not None:
            item.blocking = blocking
            item.commits = self._commits - self._asked_at
        self._checkpointing = item
        self._asked_at = self._commits

    def _held_back(self) -> bool:
        """Whether a write waits behind the checkpoint under way."""
        item = self._checkpointing
        assert item is not None
        if not item.done:
            return item.blocking
        self._checkpointing = None
        if item.blocking:
            return False
        self._cadence.checkpointed(item.frames, item.commits)
        if item.complete and self._commits == self._asked_at:
            return False
        # Commits landed while it ran (its report counts only the frames it
        # found), and SQLite starts the log over only after a checkpoint that
        # left none behind: one more, with writes waiting behind it. It has
        # little left to sync.
        self._ask(blocking=True)
        return self._checkpointing is not None

    def close(self) -> None:
        self._conn.close()
