"""Where a single SQLite enqueue's time goes: alkstore's API against its own
statement on its own schema, and that schema without each write it pays for.

    python bench/sqlite_enqueue_cost.py [--jobs 20000] [--rounds 3]

Every row enqueues ``--jobs`` jobs one per transaction (``BEGIN IMMEDIATE``,
the INSERT, ``COMMIT``; WAL, ``synchronous=NORMAL``, as alkstore opens its
file) and reports microseconds per enqueue, the median of ``--rounds``:

- ``alkstore``: ``await queue.enqueue(payload)`` under trio (validation,
  the codec, the plan, the commit, the file check, the event loop);
- ``alkstore's SQL``: the INSERT alkstore sends, on a store alkstore made,
  by bare ``sqlite3``: what SQLite alone costs it;
- the same table rebuilt without ``AUTOINCREMENT`` (ids could then be
  reused once the newest job is deleted: history, dead letters and
  dependency edges keep ids) and without the listing index (``queue,
  state, id``: ``list_jobs`` pages by id per state), each alone and both;
- ``floor``: the suite's floor (bench/workloads/floor.py), a table with a
  primary key and one partial index;
- ``the core's Python alone``: validation, the codec and the statement for
  one job (``resolve_enqueue`` and the dialect's INSERT), no IO.

The floor-relative target of issue #25 (an enqueue at 0.5x the floor's
rate) needs alkstore's total under twice the floor's time; this shows how
much of that SQLite's pages take before any Python runs, and the last line
what that leaves for the Python around the statement.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

import orjson
import trio

from alkstore.engines.sqlite import SqliteDialect
from alkstore.io_trio import open_sqlite
from alkstore.protocol.values.types import QueueOptions, resolve_enqueue

PAYLOAD = {"i": 1, "pad": "x" * 80}
QUEUE = "bench"


def timed(n: int, step: Callable[[], None]) -> float:
    """Microseconds per call of ``step``, after a warm-up."""
    for _ in range(min(500, n)):
        step()
    start = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - start) / n * 1e6


def api(n: int, folder: str) -> float:
    result: list[float] = []

    async def main() -> None:
        async with open_sqlite(os.path.join(folder, "api.db")) as store:
            q = store.queue(QUEUE)
            for _ in range(min(500, n)):
                await q.enqueue(PAYLOAD)
            start = time.perf_counter()
            for _ in range(n):
                await q.enqueue(PAYLOAD)
            result.append((time.perf_counter() - start) / n * 1e6)

    trio.run(main)
    return result[0]


def made_by_alkstore(folder: str, name: str) -> str:
    path = os.path.join(folder, name)

    async def main() -> None:
        async with open_sqlite(path):
            pass

    trio.run(main)
    return path


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def insert_loop(
    conn: sqlite3.Connection, sql: str, params: tuple[object, ...]
) -> Callable[[], None]:
    def step() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(sql, params)
        conn.execute("COMMIT")

    return step


def alkstore_sql(n: int, folder: str, *, autoincrement: bool, list_index: bool) -> float:
    """alkstore's INSERT on alkstore's schema, the jobs table rebuilt without
    what is switched off."""
    conn = connect(made_by_alkstore(folder, f"sql-{autoincrement}-{list_index}.db"))
    if not autoincrement:
        (ddl,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = '__alkstore_jobs'"
        ).fetchone()
        indexes = [
            sql for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = '__alkstore_jobs' "
                "AND type = 'index' AND sql IS NOT NULL"
            )
        ]  # fmt: skip
        conn.execute("DROP TABLE __alkstore_jobs")
        conn.execute(ddl.replace("AUTOINCREMENT", ""))
        for sql in indexes:
            conn.execute(sql)
    if not list_index:
        conn.execute("DROP INDEX __alkstore_jobs_list")
    now = time.time_ns() // 1000
    job = resolve_enqueue(QUEUE, PAYLOAD, now, QueueOptions())
    statement = SqliteDialect().enqueue_waking(job, "q", "o", now)
    try:
        return timed(n, insert_loop(conn, statement.sql, tuple(statement.params)))
    finally:
        conn.close()


def floor(n: int, folder: str) -> float:
    conn = connect(os.path.join(folder, "floor.db"))
    conn.execute(
        "CREATE TABLE jobs (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL, "
        "priority INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL DEFAULT 0, "
        "visible_at INTEGER NOT NULL DEFAULT 0)"
    )
    conn.execute(
        "CREATE INDEX jobs_claim ON jobs (queue, priority DESC, visible_at, id) WHERE state = 0"
    )
    insert = "INSERT INTO jobs (queue, payload) VALUES ('q', ?)"
    try:
        return timed(n, insert_loop(conn, insert, (orjson.dumps(PAYLOAD).decode(),)))
    finally:
        conn.close()


def core_only(n: int, folder: str) -> float:
    """What the sans-IO core computes for one enqueue, with no IO."""
    dialect, options = SqliteDialect(), QueueOptions()

    def step() -> None:
        now = time.time_ns() // 1000
        dialect.enqueue_waking(resolve_enqueue(QUEUE, PAYLOAD, now, options), "q", "o", now)

    return timed(n, step)


ROWS: list[tuple[str, Callable[[int, str], float]]] = [
    ("alkstore (await queue.enqueue)", api),
    ("alkstore's SQL on its schema", lambda n, f: alkstore_sql(n, f, autoincrement=True,
                                                               list_index=True)),
    ("  without AUTOINCREMENT", lambda n, f: alkstore_sql(n, f, autoincrement=False,
                                                          list_index=True)),
    ("  without the listing index", lambda n, f: alkstore_sql(n, f, autoincrement=True,
                                                              list_index=False)),
    ("  without both", lambda n, f: alkstore_sql(n, f, autoincrement=False, list_index=False)),
    ("floor (one partial index)", floor),
    ("the core's Python alone (no IO)", core_only),
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    seen: dict[str, list[float]] = {label: [] for label, _ in ROWS}
    for _ in range(args.rounds):
        for label, run in ROWS:  # interleaved: each round measures every row once
            with tempfile.TemporaryDirectory() as folder:
                seen[label].append(run(args.jobs, folder))
    medians = {label: statistics.median(values) for label, values in seen.items()}
    base = medians["floor (one partial index)"]
    print(f"{'':34s} {'us/enqueue':>10s} {'jobs/s':>9s} {'x floor rate':>12s}")
    for label, us in medians.items():
        print(f"{label:34s} {us:10.1f} {1e6 / us:9,.0f} {base / us:12.2f}")
    sql = medians["alkstore's SQL on its schema"]
    print(
        f"0.5x the floor's rate allows {2 * base:.1f} us an enqueue; SQLite alone takes "
        f"{sql:.1f} of them on alkstore's schema, which leaves {2 * base - sql:.1f} us for "
        f"all the Python around it (alkstore spends {medians[ROWS[0][0]] - sql:.1f})"
    )


if __name__ == "__main__":
    main()
