"""Rule: a checkpoint that finds the disk full loses nothing and stops
nothing: the WAL keeps every committed page, reads go on, writes that find
no room fail with DatabaseError, and once space is freed the next
checkpoint completes and everything is there (docs/reliability.md).

The WAL is checkpointed into the main file once it passes about 4 MB
(1000 pages): the main file must grow by about that
much, which a nearly full tmpfs refuses.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import trio

from alkstore import DatabaseError
from alkstore.io_trio import open_sqlite
from tests.faults.procs import no_thread_leak
from tests.faults.test_sqlite_disk_full import small_tmpfs

PAD = "p" * 8000  # two pages a job
# The writer checkpoints past 1000 pages of WAL (engines/sqlite/control.py's
# AUTOCHECKPOINT_PAGES, at SQLite's default 4 KiB page size).
THRESHOLD = 1000 * 4096


def size(file: Path) -> int:
    return file.stat().st_size if file.exists() else 0


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


async def test_a_checkpoint_on_a_full_disk_loses_nothing_and_completes_once_freed(
    tmp_path: Path,
) -> None:
    """The WAL crosses the checkpoint threshold with too little room for the
    main file to grow: the checkpoint fails quietly (the WAL stays), reads
    work, writes fail cleanly once even the WAL has no room; ballast deleted,
    writes work, a checkpoint moves the pages into the main file, and a
    reopened store has every job that was reported enqueued."""
    ok: list[int] = []
    with small_tmpfs(tmp_path / "disk", "12m") as disk, no_thread_leak():
        path = disk / "ckpt.db"
        wal = Path(str(path) + "-wal")
        with trio.fail_after(120):
            async with open_sqlite(str(path)) as store:
                q = store.queue("q")
                # Most of a WAL's worth, still below the threshold.
                while size(wal) < THRESHOLD * 0.8:
                    ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                main_before = size(path)
                # Leave room for the WAL to cross the threshold, not for the
                # main file to take the WAL's pages.
                ballast = disk / "ballast"
                ballast.write_bytes(b"\0" * max(0, free_bytes(disk) - int(THRESHOLD * 0.4)))
                errors: list[DatabaseError] = []
                for _ in range(400):
                    try:
                        ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                    except DatabaseError as exc:
                        errors.append(exc)
                        break
                # The WAL crossed the threshold, the checkpoint could not
                # copy it: the main file did not take the pages.
                assert size(wal) > THRESHOLD
                assert size(path) < main_before + THRESHOLD / 2
                assert errors, "the disk never filled"
                assert "full" in str(errors[0]).lower() or "disk" in str(errors[0]).lower()
                assert (await q.stats()).ready == len(ok)  # reads go on

                ballast.unlink()
                for _ in range(3):
                    ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                # The writer's checkpoint, after the WAL is past the threshold.
                with trio.fail_after(30):
                    while size(path) < main_before + THRESHOLD / 2:
                        ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                        await trio.sleep(0.01)
            async with open_sqlite(str(path)) as store:
                stats = await store.queue("q").stats()
                assert stats.ready == len(ok)
                jobs = await store.queue("q").claim_batch("w", len(ok) + 10)
                assert sorted(j.id for j in jobs) == sorted(ok)
        conn = sqlite3.connect(str(path))
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            conn.close()
