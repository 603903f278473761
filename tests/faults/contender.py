"""One contender of the SQLite write-contention test, in this or another process.

Run as ``python -m tests.faults.contender PATH TAG SECONDS TASKS DIR`` from
the repository root: opens its own store on the SQLite file PATH, writes
``DIR/TAG.ready``, waits for ``DIR/go`` to exist, then with TASKS concurrent
tasks enqueues, claims and acks on one shared queue as fast as it can for
SECONDS, closes the store and writes what it saw to ``DIR/TAG.json``
(a ``Tally``). Every exception is recorded, none is raised.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import trio

from alkstore import DatabaseError, Store
from alkstore.io_trio import SqliteOptions, open_sqlite

QUEUE = "contended"
# Long enough that no job is ever reclaimed during a test: each is claimed once.
VISIBILITY = 600.0


@dataclass
class Tally:
    """What one contender saw."""

    tag: str
    enqueued: list[list[Any]] = field(default_factory=list)  # [job id, token]
    enqueue_failed: list[str] = field(default_factory=list)  # tokens
    claimed: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)
    # DatabaseErrors: [operation, seconds the call took, message, cause type].
    database_errors: list[list[Any]] = field(default_factory=list)
    # Anything else that escaped the API: [operation, type, message].
    raw_errors: list[list[Any]] = field(default_factory=list)
    ops: int = 0
    slowest: float = 0.0


def qualname(exc: BaseException | None) -> str:
    return "None" if exc is None else f"{type(exc).__module__}.{type(exc).__qualname__}"


async def contend(store: Store, tally: Tally, seconds: float, tasks: int) -> None:
    """Enqueue, claim and ack on ``QUEUE`` from ``tasks`` tasks for ``seconds``."""
    q = store.queue(QUEUE, visibility_timeout=VISIBILITY)
    deadline = time.monotonic() + seconds

    async def timed(op: str, call: Any) -> tuple[bool, Any]:
        started = time.monotonic()
        try:
            return True, await call()
        except DatabaseError as exc:
            took = time.monotonic() - started
            tally.database_errors.append([op, took, str(exc), qualname(exc.__cause__)])
        except Exception as exc:  # recorded; the test fails on it
            tally.raw_errors.append([op, qualname(exc), str(exc)])
        finally:
            tally.ops += 1
            tally.slowest = max(tally.slowest, time.monotonic() - started)
        return False, None

    async def one_task(n: int) -> None:
        worker = f"{tally.tag}-w{n}"
        i = 0
        while time.monotonic() < deadline:
            i += 1
            token = f"{tally.tag}:{n}:{i}"
            ok, job_id = await timed("enqueue", partial(q.enqueue, {"token": token}))
            if ok:
                tally.enqueued.append([job_id, token])
            else:
                tally.enqueue_failed.append(token)
            ok, jobs = await timed("claim", lambda: q.claim_batch(worker, 2))
            for job in jobs or []:
                tally.claimed.append(job.id)
                ok, owned = await timed("ack", job.ack)
                if ok and owned:
                    tally.acked.append(job.id)

    async with trio.open_nursery() as nursery:
        for n in range(tasks):
            nursery.start_soon(one_task, n)


async def _main(path: str, tag: str, seconds: float, tasks: int, folder: Path) -> None:
    tally = Tally(tag)
    try:
        async with open_sqlite(path, options=SqliteOptions()) as store:
            (folder / f"{tag}.ready").touch()
            with trio.fail_after(60):
                while True:  # another process says go: poll the file system
                    if (folder / "go").exists():
                        break
                    await trio.sleep(0.005)
            await contend(store, tally, seconds, tasks)
    except Exception as exc:  # recorded; the test fails on it
        tally.raw_errors.append(["open/close", qualname(exc), str(exc)])
    partial = folder / f"{tag}.json.part"
    partial.write_bytes(orjson.dumps(asdict(tally)))
    os.replace(partial, folder / f"{tag}.json")


if __name__ == "__main__":
    path, tag, seconds, tasks, folder = sys.argv[1:]
    trio.run(_main, path, tag, float(seconds), int(tasks), Path(folder))
