"""A store under steady traffic keeps its tables and its file bounded.

    python bench/housekeeping.py [--engine sqlite|postgres] [--seconds 3600]
                                 [--rate 200] [--report 60] [--retention 60]

One store runs, for ``--seconds`` (default an hour), what a busy service
does all day: ``--rate`` jobs a second enqueued (in batches every 100 ms)
and worked by ``queue.work`` (1% of them fail and go to the dead letters),
on a queue that keeps its finished jobs and its dead letters for
``--retention`` seconds; as many events a second published to a stream
kept for the same time (and at most ``--max-events``); a lock taken and
released under a new name every 100 ms (rows freed are pruned 10 minutes
later). Housekeeping is the store's own background task
(``housekeeping_interval``, ``--interval``); nothing else deletes anything.

Every ``--report`` seconds it prints the rows of each alkstore table and the
size on disk (SQLite: the database file and its WAL; Postgres: the
schema's tables with their indexes and TOAST). At the end, the growth since
the first report after warm-up (``2 x retention`` plus 10 minutes for the
lock rows, or half the run if shorter) for each figure: bounded means it
stops growing once every retention window has passed.

SQLite runs on a file in ``--dir`` (default a temporary directory, removed
afterwards); Postgres in a fresh schema ``alk_bench_<hex>``, dropped at the
end whatever happens. On Postgres the space of deleted rows comes back
through (auto)vacuum, which alkstore leaves to the server: on a server with
``autovacuum = off`` (CI servers often are) the bench says so and vacuums
the schema's tables itself once a minute, as autovacuum would (``--no-vacuum``
shows what happens without).
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import trio

from alkstore import AlkstoreError, Job, Store
from alkstore.io_trio import PostgresOptions, SqliteOptions, open_postgres, open_sqlite

TABLES = ("jobs", "history", "dead", "events", "offsets", "locks", "notifications")
DEFAULT_DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
LOCK_GRACE_S = 600


def options() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--engine", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--seconds", type=float, default=3600.0, help="how long (default an hour)")
    p.add_argument("--rate", type=float, default=200.0, help="jobs and events a second")
    p.add_argument("--report", type=float, default=60.0, help="seconds between reports")
    p.add_argument("--retention", type=float, default=60.0, help="history, dead, stream age")
    p.add_argument("--max-events", type=int, default=100_000)
    p.add_argument("--interval", type=float, default=10.0, help="housekeeping_interval")
    p.add_argument("--dsn", default=DEFAULT_DSN)
    p.add_argument("--dir", help="directory for the SQLite file (default: a temporary one)")
    p.add_argument(
        "--no-vacuum", action="store_true", help="Postgres: never vacuum, even with autovacuum off"
    )
    return p.parse_args()


@asynccontextmanager
async def opened(args: argparse.Namespace) -> AsyncIterator[tuple[Store, str]]:
    if args.engine == "sqlite":
        base = args.dir or tempfile.mkdtemp(prefix="alkstore-hk-")
        path = os.path.join(base, f"housekeeping-{secrets.token_hex(4)}.db")
        try:
            opts = SqliteOptions(housekeeping_interval=args.interval)
            async with open_sqlite(path, options=opts) as store:
                yield store, path
        finally:
            _remove(path, None if args.dir else base)
        return
    import psycopg

    schema = f"alk_bench_{secrets.token_hex(4)}"
    try:
        opts = PostgresOptions(schema=schema, housekeeping_interval=args.interval)
        async with open_postgres(args.dsn, options=opts) as store:
            yield store, schema
    finally:
        for attempt in range(30):  # the server may be restarting
            try:
                with psycopg.connect(args.dsn, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                break
            except psycopg.OperationalError:
                if attempt == 29:
                    print(f"could not drop schema {schema}: drop it by hand")
                await trio.sleep(1)


async def measure(store: Store, where: str) -> dict[str, int]:
    """Rows per table, and bytes on disk."""
    out: dict[str, int] = {}
    async with store.transaction() as tx:
        for table in TABLES:
            if store.engine == "postgres" and table == "notifications":
                continue  # LISTEN/NOTIFY: no table
            name = f"__alkstore_{table}" if store.engine == "sqlite" else f'"{where}"."{table}"'
            ((n,),) = await tx.execute(f"SELECT COUNT(*) FROM {name}")
            out[table] = int(n)
        if store.engine == "postgres":
            ((size,),) = await tx.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = $1 AND c.relkind = 'r'",
                (where,),
            )
            out["bytes"] = int(size)
    if store.engine == "sqlite":
        out["bytes"] = _file_bytes(where)
    return out


def _file_bytes(path: str) -> int:
    """The database file and its WAL (a moment's blocking stat: fine here)."""
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))


def _remove(path: str, directory: str | None) -> None:
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def autovacuum(dsn: str) -> bool:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    return row is not None and row[0] == "on"


def vacuum(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(f'VACUUM "{schema}"."{table}"')


def line(elapsed: float, sizes: dict[str, int], done: dict[str, int]) -> str:
    rows = " ".join(f"{k}={v}" for k, v in sizes.items() if k != "bytes")
    work = " ".join(f"{k}={v}" for k, v in done.items())
    return f"t={elapsed:7.0f}s  {rows}  size={sizes['bytes'] / 1e6:.2f} MB  ({work})"


async def run(args: argparse.Namespace) -> list[tuple[float, dict[str, int]]]:
    done = {"acked": 0, "failed": 0, "published": 0, "locks": 0, "errors": 0}
    reports: list[tuple[float, dict[str, int]]] = []
    async with opened(args) as (store, where):
        q = store.queue("steady", max_attempts=1)
        await q.set_retention(history=args.retention, dead=args.retention)
        stream = store.stream("steady")
        await stream.set_retention(max_age=args.retention, max_events=args.max_events)
        batch = max(1, round(args.rate / 10))

        async def handler(job: Job) -> None:
            if job.id % 100 == 0:
                done["failed"] += 1
                raise RuntimeError("one in a hundred fails")
            done["acked"] += 1

        async def producer() -> None:
            n = 0
            while True:
                with failures_counted():
                    await q.enqueue_batch([{"n": n + i} for i in range(batch)])
                    async with store.transaction() as tx:
                        for i in range(batch):
                            await tx.publish("steady", {"n": n + i})
                    n += batch
                    done["published"] += batch
                await trio.sleep(0.1)

        async def locker() -> None:
            i = 0
            while True:
                with failures_counted():
                    lock = await store.try_lock(f"order-{i}", "bench", 5)
                    if lock is not None:
                        await lock.release()
                        done["locks"] += 1
                i += 1
                await trio.sleep(0.1)

        @contextmanager
        def failures_counted() -> Iterator[None]:
            # A database that goes away for a while (a restart) is a gap in
            # the traffic, not the end of the run.
            try:
                yield
            except AlkstoreError:
                done["errors"] += 1

        async def vacuumer() -> None:
            # Autovacuum's work, where the server has it off: once a minute.
            while True:
                await trio.sleep(60)
                await trio.to_thread.run_sync(vacuum, args.dsn, where)
                done["vacuums"] += 1

        async def reporter(start: float) -> None:
            while True:
                await trio.sleep(args.report)
                elapsed = time.monotonic() - start
                try:
                    sizes = await measure(store, where)
                except AlkstoreError:
                    done["errors"] += 1
                    continue
                reports.append((elapsed, sizes))
                print(line(elapsed, sizes, done), flush=True)

        start = time.monotonic()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: q.work(handler, concurrency=10, poll_interval=1.0))
            nursery.start_soon(producer)
            nursery.start_soon(locker)
            nursery.start_soon(reporter, start)
            if store.engine == "postgres" and not args.no_vacuum and not autovacuum(args.dsn):
                print("the server has autovacuum off: vacuuming the schema once a minute instead",
                      flush=True)  # fmt: skip
                done["vacuums"] = 0
                nursery.start_soon(vacuumer)
            await trio.sleep(args.seconds)
            nursery.cancel_scope.cancel()
    return reports


def summary(args: argparse.Namespace, reports: list[tuple[float, dict[str, int]]]) -> None:
    if len(reports) < 2:
        print("too few reports to compare (run longer, or report more often)")
        return
    warm = min(2 * args.retention + LOCK_GRACE_S, args.seconds / 2)
    settled = [r for r in reports if r[0] >= warm] or reports[-1:]
    first, last = settled[0], reports[-1]
    peak = {k: max(r[1][k] for r in settled) for k in last[1]}
    print(f"\nafter warm-up (t >= {first[0]:.0f}s): first, peak and last of each figure")
    for key in last[1]:
        print(f"  {key:14} {first[1][key]:>12} {peak[key]:>12} {last[1][key]:>12}")


def main() -> None:
    args = options()
    # The one-in-a-hundred failures are the worker's to log, at ERROR, each.
    logging.getLogger("alkstore.worker").setLevel(logging.CRITICAL)
    print(f"housekeeping bench: {args.engine}, {args.seconds:.0f} s, {args.rate:g} jobs/s and "
          f"events/s, retention {args.retention:g} s, housekeeping every {args.interval:g} s",
          flush=True)  # fmt: skip
    reports = trio.run(run, args)
    summary(args, reports)


if __name__ == "__main__":
    main()
