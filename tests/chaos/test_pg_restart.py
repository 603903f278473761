"""Rule: a PostgreSQL restart under load needs no restart of ours: worker
processes, subscribers and listeners resume by themselves, every receiver is
told to re-check, no job is lost and none is left stranded
(docs/reliability.md).

The test restarts a cluster of its own (``tests/postgres/private_cluster.py``),
never the shared server the rest of the suite is using at the same time.
Jobs whose handler ran while the server went away may run twice (an ack lost
with its connection); any other duplicate fails the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trio

from alkstore import LISTENER_RECONNECTED, CommitUnknown, DatabaseError
from alkstore.io_trio import PostgresOptions, open_postgres
from tests.faults.procs import STARTUP, process
from tests.postgres.pg import fresh_schema
from tests.postgres.private_cluster import Cluster, private_cluster

from . import pg_worker
from .logs import read_log, wait_for_lines

WORKERS = 2


@pytest.fixture
def server() -> Iterator[Cluster]:
    """A cluster of the test's own: restarting the shared one would fail the
    tests running beside this one."""
    with private_cluster() as cluster:
        yield cluster


async def test_workers_subscribers_and_listeners_resume_after_a_server_restart(
    tmp_path: Path, server: Cluster
) -> None:
    """Two worker processes under a steady enqueue load; the server restarts:
    each process gets the reconnect wake, works on, receives a stream event
    published afterwards; every acknowledged job runs, duplicates are at
    most the handlers in flight, and no job is left behind."""
    schema = fresh_schema()
    log = str(tmp_path / "log")
    argv = ["-m", "tests.chaos.pg_worker", server.dsn, schema, log]
    options = PostgresOptions(schema=schema, pool_size=1, connect_timeout=2.0)
    acked: set[int] = set()
    maybe: set[int] = set()
    async with open_postgres(server.dsn, options=options) as producer:
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
                back = await trio.to_thread.run_sync(server.restart)
            await produce(100)
            await producer.stream(pg_worker.STREAM).publish("after")

            def finished(lines):  # type: ignore[no-untyped-def]
                done = {int(x[1]) for x in lines.of("done")}
                return acked <= done and len(lines.of("event")) >= WORKERS

            await wait_for_lines(log, finished, 60)
            await trio.sleep(pg_worker.VISIBILITY_TIMEOUT + 1)  # any late re-run shows now
            lines = read_log(log)
        with psycopg.connect(server.dsn) as conn:
            stranded = conn.execute(f'SELECT id, state FROM "{schema}".jobs').fetchall()

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
