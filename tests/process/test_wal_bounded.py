"""Rule: a store that never stops writing still keeps its WAL bounded. Its
checkpoints run on the writer thread while the event loop goes on
committing, so one alone never leaves the log empty, and SQLite starts the
log over only after one that did: a second, with writes queued behind it,
must (engines.md, "Checkpoints")."""

from __future__ import annotations

from pathlib import Path

from alkstore.engines.sqlite import control
from alkstore.io_trio import open_sqlite

JOBS = 3000  # about 7 frames each: 5 times the checkpoint threshold


async def test_the_wal_stays_bounded_under_a_stream_of_single_commits(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    async with open_sqlite(str(path)) as store:
        q = store.queue("q")
        for i in range(JOBS):
            await q.enqueue({"i": i})
        wal = (tmp_path / "busy.db-wal").stat().st_size
        assert (await q.stats()).ready == JOBS
    # The log holds about the threshold's frames when it starts over, plus
    # what commits wrote while the first checkpoint ran; without the second
    # checkpoint it held every frame of the run (about 5x this bound).
    assert wal < 3 * control.AUTOCHECKPOINT_PAGES * 4096, wal
