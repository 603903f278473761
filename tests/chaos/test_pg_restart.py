"""Rule: a PostgreSQL restart under load needs no restart of ours: worker
processes, subscribers and listeners resume by themselves, every receiver is
told to re-check, no job is lost and none is left stranded
(docs/reliability.md).

The test restarts the developer's (or CI's) own cluster with
``pg_ctlcluster`` and waits until it answers again, so it leaves the server
running. Jobs whose handler ran while the server went away may run twice (an
ack lost with its connection); any other duplicate fails the test.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import trio

from alkstore import LISTENER_RECONNECTED, CommitUnknown, DatabaseError
from alkstore.io_trio import PostgresOptions, open_postgres
from tests.backends import PG_DSN
from tests.faults.procs import STARTUP, process
from tests.postgres.pg import fresh_schema, sql

from . import pg_worker
from .logs import read_log, wait_for_lines

WORKERS = 2


def cluster(dsn: str = PG_DSN) -> tuple[str, str]:
    """The (version, name) of the local cluster serving ``dsn``'s port."""
    port = str(urlsplit(dsn).port or 5432)
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        version, name, cluster_port = line.split()[:3]
        if cluster_port == port:
            return version, name
    raise AssertionError(f"no local cluster listens on port {port}: {out.stdout!r}")


def restart_server() -> float:
    """Restart the cluster; return the time.time() it answered again."""
    version, name = cluster()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart", "-m", "fast"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    wait_for_server(PG_DSN)
    return time.time()


def wait_for_server(dsn: str, timeout: float = 60.0) -> None:
    """Return once the server at ``dsn`` answers a query."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def test_workers_subscribers_and_listeners_resume_after_a_server_restart(
    tmp_path: Path,
) -> None:
    """Two worker processes under a steady enqueue load; the server restarts:
    each process gets the reconnect wake, works on, receives a stream event
    published afterwards; every acknowledged job runs, duplicates are at
    most the handlers in flight, and no job is left behind."""
    schema = fresh_schema()
    log = str(tmp_path / "log")
    argv = ["-m", "tests.chaos.pg_worker", PG_DSN, schema, log]
    options = PostgresOptions(schema=schema, pool_size=1, connect_timeout=2.0)
    acked: set[int] = set()
    maybe: set[int] = set()
    async with open_postgres(PG_DSN, options=options) as producer:
        queue = producer.queue(pg_worker.QUEUE)
        async with process(argv) as first, process(argv) as second:
            procs = {first.pid, second.pid}
            await wait_for_lines(log, lambda lines: len(lines.of("ready")) == WORKERS, STARTUP)

            n = 0

            async def produce(count: int) -> None:
                nonlocal n
                for _ in range(count):
                    n += 1
                    try:
                        await queue.enqueue(n)
                        acked.add(n)
                    except CommitUnknown:
                        maybe.add(n)
                    except DatabaseError:
                        await trio.sleep(0.05)
                    await trio.sleep(0.005)

            await produce(100)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce, 300)
                back = await trio.to_thread.run_sync(restart_server)
            await produce(100)
            await producer.stream(pg_worker.STREAM).publish("after")

            def finished(lines):  # type: ignore[no-untyped-def]
                done = {int(x[1]) for x in lines.of("done")}
                return acked <= done and len(lines.of("event")) >= WORKERS

            await wait_for_lines(log, finished, 60)
            await trio.sleep(pg_worker.VISIBILITY_TIMEOUT + 1)  # any late re-run shows now
            lines = read_log(log)
        stranded = sql(f'SELECT id, state FROM "{schema}".jobs')

    done = [int(x[1]) for x in lines.of("done")]
    assert acked <= set(done)
    assert set(done) <= acked | maybe  # nothing out of nowhere
    duplicates = len(done) - len(set(done))
    assert duplicates <= WORKERS * pg_worker.CONCURRENCY, duplicates
    assert stranded == []
    reconnected = {int(x[2]) for x in lines.of("wake") if x[1] == LISTENER_RECONNECTED}
    assert reconnected == procs
    assert {int(x[2]) for x in lines.of("event") if x[1] == "after"} == procs
    # Work resumed after the server was back (the figure is bench/chaos.py's).
    assert any(float(x[3]) > back for x in lines.of("done"))
