"""The floor: plain sqlite3 / psycopg doing the same row work, no library.

What any queue on the engine can at best approach (see common.py for the
workloads): one INSERT per transaction; batches of INSERTs; a batched claim
(``UPDATE ... LIMIT 100 RETURNING`` on SQLite, ``SKIP LOCKED`` on Postgres)
plus one DELETE by ids per batch. Synchronous, one connection, no event loop.
No worker runtime, so no ``idle`` or ``memory`` (nor the workloads of one).
Durability as alkstore's: SQLite in WAL with ``synchronous=NORMAL`` (a
commit survives a process crash, not necessarily an OS crash or power
loss); Postgres with ordinary tables at the server's ``synchronous_commit``
(on by default: survives both).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import orjson
from common import Timer, fresh_schema, parse, payload, report, skipped

SQLITE_DDL = (
    "CREATE TABLE jobs (id INTEGER PRIMARY KEY, queue TEXT NOT NULL, payload TEXT NOT NULL, "
    "priority INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL DEFAULT 0, "
    "visible_at INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX jobs_claim ON jobs (queue, priority DESC, visible_at, id) WHERE state = 0",
)
PG_DDL = (
    "CREATE TABLE jobs (id bigserial PRIMARY KEY, queue text NOT NULL, payload text NOT NULL, "
    "priority int NOT NULL DEFAULT 0, state int NOT NULL DEFAULT 0, "
    "visible_at bigint NOT NULL DEFAULT 0)",
    "CREATE INDEX jobs_claim ON jobs (queue, priority DESC, visible_at, id) WHERE state = 0",
)
BATCH = 100


def texts(n: int) -> list[str]:
    return [orjson.dumps(payload(i)).decode() for i in range(n)]


def sqlite_main(args: Any) -> None:
    path = os.path.join(args.dir, f"floor-{os.getpid()}.db")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        for sql in SQLITE_DDL:
            conn.execute(sql)
        n, w, items = args.jobs, args.workload, texts(args.jobs)
        insert = "INSERT INTO jobs (queue, payload) VALUES ('q', ?)"
        if w == "enqueue-single":
            with Timer() as t:
                for text in items:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute(insert, (text,))
                    conn.execute("COMMIT")
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w == "enqueue-batch":
            with Timer() as t:
                for start in range(0, n, args.batch):
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany(insert, [(x,) for x in items[start : start + args.batch]])
                    conn.execute("COMMIT")
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w in ("process", "process-batch"):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(insert, [(x,) for x in items])
            conn.execute("COMMIT")
            with Timer() as t:
                done = 0
                while done < n:
                    conn.execute("BEGIN IMMEDIATE")
                    rows = conn.execute(
                        "UPDATE jobs SET state = 1, visible_at = 1 WHERE id IN (SELECT id FROM "
                        "jobs WHERE queue = 'q' AND state = 0 ORDER BY priority DESC, "
                        "visible_at, id LIMIT ?) RETURNING id, payload",
                        (BATCH,),
                    ).fetchall()
                    conn.execute("COMMIT")
                    for _, text in rows:
                        orjson.loads(text)  # the handler's input, decoded
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute(
                        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?))",
                        (orjson.dumps([r[0] for r in rows]).decode(),),
                    )
                    conn.execute("COMMIT")
                    done += len(rows)
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        skipped(f"no floor for {w}")
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(path + suffix).unlink(missing_ok=True)


def pg_main(args: Any) -> None:
    import psycopg

    schema = fresh_schema("alk_floor")
    conn = psycopg.connect(args.dsn, autocommit=True)
    try:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path = "{schema}"')
        for sql in PG_DDL:
            conn.execute(sql)
        n, w, items = args.jobs, args.workload, texts(args.jobs)
        insert = "INSERT INTO jobs (queue, payload) VALUES ('q', %s)"
        cur = conn.cursor()
        if w == "enqueue-single":
            # With the wake a queue sends, as every Postgres queue here does.
            with Timer() as t:
                for text in items:
                    with conn.transaction():
                        cur.execute(insert, (text,))
                        cur.execute("SELECT pg_notify('q', '')")
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w == "enqueue-batch":
            with Timer() as t:
                for start in range(0, n, args.batch):
                    with conn.transaction():
                        cur.executemany(insert, [(x,) for x in items[start : start + args.batch]])
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        if w in ("process", "process-batch"):
            with conn.transaction():
                cur.executemany(insert, [(x,) for x in items])
            with Timer() as t:
                done = 0
                while done < n:
                    with conn.transaction():
                        rows = cur.execute(
                            "UPDATE jobs SET state = 1 WHERE id IN (SELECT id FROM jobs WHERE "
                            "queue = 'q' AND state = 0 ORDER BY priority DESC, visible_at, id "
                            "LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id, payload",
                            (BATCH,),
                        ).fetchall()
                    for _, text in rows:
                        orjson.loads(text)
                    with conn.transaction():
                        cur.execute("DELETE FROM jobs WHERE id = ANY(%s)", ([r[0] for r in rows],))
                    done += len(rows)
            return report(jobs=n, seconds=t.seconds, cpu=t.cpu)
        skipped(f"no floor for {w}")
    finally:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.close()


if __name__ == "__main__":
    a = parse()
    if a.workload in ("idle", "memory"):
        skipped("the floor has no worker runtime (a bare loop on one connection)")
    (sqlite_main if a.engine == "sqlite" else pg_main)(a)
