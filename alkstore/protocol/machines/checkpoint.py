"""When a SQLite store asks for a WAL checkpoint. Pure: counts in, a yes out.

The event-loop thread's connection never checkpoints (it would block the
loop); it asks the writer thread to, once the WAL holds about ``target``
frames, SQLite's own ``wal_autocheckpoint`` threshold. The WAL file's size
cannot tell when that is: SQLite starts the log over from its beginning after
a complete checkpoint and keeps the file as large as it ever grew. So the
cadence counts commits, and learns how many frames a commit writes from what
each checkpoint reports (``frames``: every frame in the log when it ran,
other processes' included, so their writes bring the next one sooner).
"""

from __future__ import annotations

from dataclasses import dataclass

# Before any checkpoint reported, ask after this many commits: the first
# report gives the frames per commit.
FIRST_AFTER = 64
# Bounds on the commits between two checkpoints, whatever a report says (a
# report of 0 frames: a WAL some other connection just checkpointed).
MIN_COMMITS = 8
MAX_COMMITS = 100_000


@dataclass
class CheckpointCadence:
    target: int  # frames; 0: never ask (the caller turned checkpoints off)
    commits: int = 0  # since the last ask
    every: int = FIRST_AFTER  # commits between asks, as last learned

    def committed(self) -> bool:
        """One more commit; True: ask for a checkpoint now."""
        if self.target <= 0:
            return False
        self.commits += 1
        if self.commits < self.every:
            return False
        self.commits = 0
        return True

    def checkpointed(self, frames: int, commits: int) -> None:
        """A checkpoint found ``frames`` frames in the log, ``commits`` of
        ours having landed since the one before (``frames < 0``: it failed;
        keep the cadence)."""
        if frames < 0 or commits <= 0:
            return
        per_commit = max(frames, 1) / commits
        self.every = max(MIN_COMMITS, min(MAX_COMMITS, int(self.target / per_commit)))
