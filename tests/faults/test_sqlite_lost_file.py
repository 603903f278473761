"""A SQLite file deleted or replaced under an open store (real file
operations). Invariant: once the file the store opened is gone, no
operation reports success for work that went to it: every one fails with
``DatabaseError``, and the store's wake receivers close."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from alkstore import DatabaseError
from alkstore.io_trio import open_sqlite

SOON = 5.0


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        target = Path(f"{path}{suffix}")
        if target.exists():
            target.unlink()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_every_operation_fails_once_the_file_is_gone(tmp_path: Path, how: str) -> None:
    path = tmp_path / "app.db"
    async with open_sqlite(str(path)) as store:
        q, s = store.queue("q"), store.stream("s")
        acked = await q.enqueue(1)
        job = await q.claim_one("w")
        assert job is not None and job.id == acked
        async with store.listen("ch") as wakes:
            if how == "deleted":
                _remove(path)
            else:
                other = tmp_path / "other.db"
                async with open_sqlite(str(other)):
                    pass
                os.replace(other, path)
            for op in (
                lambda: q.enqueue(2),
                lambda: q.stats(),
                lambda: q.get_job(acked),
                lambda: job.ack(),
                lambda: s.publish(1),
                lambda: s.read_since(0),
                lambda: store.notify("ch"),
                lambda: store.try_lock("L", "me", 10),
            ):
                with pytest.raises(DatabaseError, match=how):
                    await op()
            with pytest.raises(DatabaseError, match=how):
                async with store.transaction() as tx:
                    await tx.enqueue(q, 3)
            # Receivers close: nothing will ever wake them again.
            with trio.fail_after(SOON):
                assert await wakes.recv() is None


async def test_a_commit_that_raced_the_deletion_is_reported_failed(tmp_path: Path) -> None:
    """Writes that committed into the deleted file before the store noticed
    (one group commit, say) are not acknowledged: their callers get the error."""
    path = tmp_path / "race.db"
    async with open_sqlite(str(path)) as store:
        q = store.queue("q")
        await q.enqueue(0)
        _remove(path)
        results: list[object] = []

        async def enqueue(i: int) -> None:
            try:
                results.append(await q.enqueue(i))
            except DatabaseError as exc:
                results.append(exc)

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(enqueue, i)
        assert len(results) == 20
        assert all(isinstance(r, DatabaseError) for r in results), results
    # Another store at the path sees a fresh database, as SQLite must.
    async with open_sqlite(str(path)) as fresh:
        assert (await fresh.queue("q").stats()).ready == 0
