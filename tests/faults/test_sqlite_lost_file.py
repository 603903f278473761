"""A SQLite file deleted or replaced under an open store (real file
operations, and a real second process). Invariant: once the file the store
opened is gone, no operation reports success for work that went to it, and
none reads or writes the file now at the path: every one fails with
``DatabaseError``, and the store's wake receivers close.

Both drivers: the tests take the contract suite's ``backend`` fixture
(SQLite backends only), so each runs on trio and on asyncio
(``tests/conftest.py`` runs the asyncio ones on a loop of their own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from alkstore import DatabaseError, QueueStats
from tests.backends import BACKENDS, Backend, selected_backends
from tests.contract import aio

from .procs import ROOT, STARTUP, env

SOON = 5.0
# The store's message names what happened to its file; which of the two it
# saw first depends on when it looked (before or after another process
# created a new file at the path).
GONE = "deleted|replaced"


@pytest.fixture(params=[b for b in selected_backends() if BACKENDS[b].engine == "sqlite"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        target = Path(f"{path}{suffix}")
        if target.exists():
            target.unlink()


async def _outcomes(ops: list[Callable[[], Awaitable[object]]]) -> list[object]:
    """Run ``ops`` at once; each one's result or exception."""
    outcomes: list[object] = []

    async def attempt(op: Callable[[], Awaitable[object]]) -> None:
        try:
            outcomes.append(await op())
        except Exception as exc:
            outcomes.append(exc)

    async with aio.open_task_group() as group:
        for op in ops:
            group.start_soon(attempt, op)
    return outcomes


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_every_operation_fails_once_the_file_is_gone(
    backend: Backend, tmp_path: Path, how: str
) -> None:
    path = tmp_path / "app.db"
    async with backend.open(str(path)) as store:
        q, s = store.queue("q"), store.stream("s")
        acked = await q.enqueue(1)
        job = await q.claim_one("w")
        assert job is not None and job.id == acked
        # A reader connection onto the file, open before it goes.
        assert (await q.stats()).processing == 1
        async with store.listen("ch") as wakes:
            if how == "deleted":
                _remove(path)
            else:
                other = tmp_path / "other.db"
                async with backend.open(str(other)):
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
            # Reads at once: the reader connection already open, and new ones.
            for outcome in await _outcomes([q.stats, q.stats, q.stats, q.stats]):
                assert isinstance(outcome, DatabaseError), outcome
                assert how in str(outcome), outcome
            # Receivers close: nothing will ever wake them again.
            async with aio.fail_after(SOON):
                assert await wakes.recv() is None
            if how == "deleted":
                # Nor did the store create a new, empty database at the path.
                assert not path.exists()


async def test_a_commit_that_raced_the_deletion_is_reported_failed(
    backend: Backend, tmp_path: Path
) -> None:
    """Writes that committed into the deleted file before the store noticed
    (one group commit, say) are not acknowledged: their callers get the error."""
    path = tmp_path / "race.db"
    async with backend.open(str(path)) as store:
        q = store.queue("q")
        await q.enqueue(0)
        _remove(path)
        results: list[object] = []

        async def enqueue(i: int) -> None:
            try:
                results.append(await q.enqueue(i))
            except DatabaseError as exc:
                results.append(exc)

        async with aio.open_task_group() as group:
            for i in range(20):
                group.start_soon(enqueue, i)
        assert len(results) == 20
        assert all(isinstance(r, DatabaseError) for r in results), results
    # Another store at the path sees a fresh database, as SQLite must.
    async with backend.open(str(path)) as fresh:
        assert (await fresh.queue("q").stats()).ready == 0


# The other process: opens a store at PATH (a fresh database: the file was
# deleted) and, until DIR/stop exists, enqueues on "q", publishes on "s" and
# notifies "ch" over and over, writing how many of each it committed to
# DIR/written after each round.
WRITER = """
import os, sys, trio
from alkstore.io_trio import open_sqlite

async def main(path, folder):
    n = 0
    async with open_sqlite(path) as store:
        q, s = store.queue("q"), store.stream("s")
        while not os.path.exists(os.path.join(folder, "stop")):
            n += 1
            await q.enqueue({"by": "other", "n": n})
            await s.publish({"by": "other", "n": n})
            await store.notify("ch")
            part = os.path.join(folder, "written.part")
            with open(part, "w") as f:
                f.write(str(n))
            os.replace(part, os.path.join(folder, "written"))
            await trio.sleep(0.002)

trio.run(main, sys.argv[1], sys.argv[2])
"""


def _written(folder: Path) -> int:
    try:
        return int((folder / "written").read_text())
    except FileNotFoundError:
        return 0


@contextmanager
def writer_process(path: Path, folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``WRITER`` in another process, killed and reaped when the block ends
    (if it has not stopped by then); its stderr goes to ``folder/stderr``."""
    with open(folder / "stderr", "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(folder)],
            cwd=ROOT, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=stderr,
        )  # fmt: skip
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


async def _until(done: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float) -> None:
    async with aio.fail_after(timeout):
        while not done():
            assert proc.poll() is None, "the writing process died"
            await aio.sleep(0.01)


@pytest.mark.slow  # spawns a process
async def test_the_store_refuses_while_another_process_writes_the_new_file(
    backend: Backend, tmp_path: Path
) -> None:
    """The file is deleted and another process at once creates a new one at
    the path and keeps writing to it. The original store refuses every
    operation all along (reads on new reader connections included, which
    would open the new file), its receivers close although the new file
    keeps changing, and nothing it was asked to do reaches the new file."""
    path = tmp_path / "app.db"
    folder = tmp_path / "other"
    folder.mkdir()
    async with backend.open(str(path)) as store:
        q, s = store.queue("q"), store.stream("s")
        acked = await q.enqueue({"by": "original"})
        job = await q.claim_one("w")
        assert job is not None and job.id == acked
        # Two reader connections onto the file, open before it goes.
        for stats in await _outcomes([q.stats, q.stats]):
            assert isinstance(stats, QueueStats) and stats.processing == 1, stats
        ops: list[Callable[[], Awaitable[object]]] = [
            lambda: q.enqueue({"by": "original"}),
            lambda: job.ack(),
            lambda: s.publish({"by": "original"}),
            lambda: store.notify("ch"),
            lambda: store.try_lock("L", "original", 10),
            lambda: q.get_job(acked),
            lambda: q.claim_one("w2"),
            # More reads at once than the store has reader connections: the
            # two open ones (onto the old file) are used, and new ones are
            # opened meanwhile (onto the new file, were they allowed).
            *[lambda: q.stats() for _ in range(6)],
            *[lambda: s.read_since(0) for _ in range(6)],
        ]
        async with store.listen("ch") as wakes:
            _remove(path)
            with writer_process(path, folder) as proc:
                await _until(lambda: _written(folder) >= 3, proc, STARTUP)
                for _ in range(3):
                    seen = _written(folder)
                    for outcome in await _outcomes(ops):
                        assert isinstance(outcome, DatabaseError), outcome
                        assert re.search(GONE, str(outcome)), outcome
                    with pytest.raises(DatabaseError, match=GONE):
                        async with store.transaction() as tx:
                            await tx.enqueue(q, {"by": "original"})
                    # The other process went on writing meanwhile.
                    await _until(lambda: _written(folder) > seen + 2, proc, SOON)  # noqa: B023
                # Closed, although the file at the path keeps changing.
                async with aio.fail_after(SOON):
                    assert await wakes.recv() is None
                (folder / "stop").touch()
                async with aio.fail_after(STARTUP):
                    while proc.poll() is None:
                        await aio.sleep(0.01)
            assert proc.returncode == 0, (folder / "stderr").read_text()
    # The new file holds the other process's work, all of it, and nothing else.
    written = _written(folder)
    mine = [{"by": "other", "n": n} for n in range(1, written + 1)]
    async with backend.open(str(path)) as fresh:
        jobs = await fresh.queue("q").claim_batch("check", 100_000)
        assert sorted((j.payload for j in jobs), key=lambda p: p["n"]) == mine
        events = await fresh.stream("s").read_since(0, 100_000)
        assert [e.payload for e in events] == mine
        assert await fresh.try_lock("L", "someone", 10) is not None
