"""Rule: a checkpoint that finds the disk full loses nothing and stops
nothing: the WAL keeps every committed page, reads go on, writes that find
no room fail with DatabaseError, and once space is freed the next
checkpoint completes and everything is there (docs/reliability.md).

The writer checkpoints once the WAL holds about 1000 pages (4 MB), and the
main file must grow to take the new ones, which a nearly full tmpfs
refuses: the checkpoint then fails, the WAL cannot start over, and it grows
until the disk is full.
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
    with small_tmpfs(tmp_path / "disk", "32m") as disk, no_thread_leak():
        path = disk / "ckpt.db"
        wal = Path(str(path) + "-wal")
        with trio.fail_after(120):
            async with open_sqlite(str(path)) as store:
                q = store.queue("q")
                # Past a few checkpoints: the writer has learned its cadence
                # and the WAL file its high-water mark.
                while size(path) < 2 * THRESHOLD:
                    ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                # Leave less room than one checkpoint's worth of new pages:
                # the main file cannot take the WAL's pages for long.
                wal_before = size(wal)
                ballast = disk / "ballast"
                ballast.write_bytes(b"\0" * max(0, free_bytes(disk) - int(THRESHOLD * 0.4)))
                errors: list[DatabaseError] = []
                for _ in range(2000):
                    try:
                        ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                    except DatabaseError as exc:
                        errors.append(exc)
                        break
                assert errors, "the disk never filled"
                # The checkpoints could not copy the WAL into the main file,
                # so the WAL never started over: it grew past its high water.
                assert size(wal) > wal_before, f"the disk filled before the WAL grew: {errors[0]}"
                assert "full" in str(errors[0]).lower() or "disk" in str(errors[0]).lower()
                assert (await q.stats()).ready == len(ok)  # reads go on
                main_full = size(path)

                ballast.unlink()
                for _ in range(3):
                    ok.append(await q.enqueue({"n": len(ok), "pad": PAD}))
                # The writer's next checkpoint moves the WAL's pages in.
                with trio.fail_after(30):
                    while size(path) <= main_full:
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
