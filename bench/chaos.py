"""Faults against a steady load, with figures: how fast alkstore notices a
broken path to PostgreSQL (or a frozen SQLite writer), how fast work
resumes, and what was lost (must be 0) or run twice.

    python bench/chaos.py [--dsn DSN] [--only NAME,...] [--quick]

Every PostgreSQL fault but the restart goes through ``tests/chaos/proxy.py``
(a loopback proxy that can go mute, slow or reset); the restart restarts
the local cluster serving DSN with ``pg_ctlcluster`` and leaves it running,
so point DSN at a server nothing else is using. A producer enqueues about
200 jobs/s throughout; a worker (``work()``, concurrency 4) runs them.

- detection: fault to the store noticing (the listener's reconnect wake, or
  the first failed operation);
- recovery: fault (or heal / server back) to the first job run that was
  enqueued after it;
- lost: jobs whose enqueue returned and that never ran; duplicates: runs
  beyond one per job (an ack lost with its connection re-runs that job).

Defaults are the library's own (listener probe 5 s + 5 s, response_timeout
15 s); ``--quick`` uses the tests' small bounds. docs/reliability.md
records a run.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from alkstore import (  # noqa: E402
    LISTENER_RECONNECTED,
    CommitUnknown,
    DatabaseError,
    Job,
    Store,
    Wake,
)
from alkstore.io_trio import (  # noqa: E402
    ListenerOptions,
    PostgresOptions,
    SqliteOptions,
    open_postgres,
    open_sqlite,
)
from tests.chaos.proxy import FaultyProxy, faulty_proxy  # noqa: E402
from tests.chaos.test_pg_connection_limit import every_free_connection  # noqa: E402
from tests.postgres.private_cluster import wait_for_server  # noqa: E402

DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")


async def poll_until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Whether ``predicate()`` came true within ``timeout`` (polled: the books
    are plain lists, filled by other tasks)."""
    with trio.move_on_after(timeout):
        while not predicate():  # noqa: ASYNC110
            await trio.sleep(0.01)
        return True
    return False


@dataclass
class Row:
    fault: str
    detection: float | None
    recovery: float | None
    lost: int
    duplicates: int
    note: str = ""


class Load:
    """A producer at a steady rate and a worker, with the books to tell
    what ran, when, and how often."""

    def __init__(self, producer: Store, worker: Store, queue: str = "chaos") -> None:
        self.producer = producer.queue(queue)
        self.worker = worker.queue(queue)
        self.acked: dict[int, float] = {}  # n -> when its enqueue returned
        self.maybe: set[int] = set()
        self.runs: list[tuple[int, float]] = []  # (n, when it ran)
        self.n = 0

    async def produce(self, rate: float = 200.0) -> None:
        while True:
            self.n += 1
            n = self.n
            try:
                await self.producer.enqueue(n)
                self.acked[n] = time.monotonic()
            except CommitUnknown:
                self.maybe.add(n)
            except DatabaseError:
                await trio.sleep(0.05)
            await trio.sleep(1 / rate)

    async def handle(self, job: Job) -> None:
        self.runs.append((int(job.payload), time.monotonic()))  # type: ignore[arg-type]

    def first_run_after(self, t: float) -> float | None:
        """When the first job enqueued after ``t`` ran (seconds after ``t``)."""
        later = [ran for n, ran in self.runs if self.acked.get(n, 0) > t]
        return min(later) - t if later else None

    async def settle(self, timeout: float = 60.0) -> None:
        await poll_until(lambda: set(self.acked) <= {n for n, _ in self.runs}, timeout)

    def lost(self) -> int:
        return len(set(self.acked) - {n for n, _ in self.runs})

    def duplicates(self) -> int:
        return len(self.runs) - len({n for n, _ in self.runs})


def options(schema: str, quick: bool) -> PostgresOptions:
    if not quick:
        return PostgresOptions(schema=schema, pool_size=5)
    return PostgresOptions(
        schema=schema,
        pool_size=5,
        connect_timeout=2.0,
        response_timeout=1.0,
        listener=ListenerOptions(
            probe_interval=0.3, probe_timeout=0.3, connect_timeout=2.0, reconnect_cap=0.5
        ),
    )


@asynccontextmanager
async def pg_pair(
    dsn: str, proxy: FaultyProxy | None, quick: bool
) -> AsyncIterator[tuple[Store, Store]]:
    """(producer straight to the server, worker's store through ``proxy``)."""
    schema = f"alk_chaos_{uuid.uuid4().hex[:8]}"
    try:
        async with (
            open_postgres(dsn, options=PostgresOptions(schema=schema, pool_size=2)) as producer,
            open_postgres(
                proxy.dsn(dsn) if proxy else dsn, options=options(schema, quick)
            ) as worker,
        ):
            yield producer, worker
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def under_load(
    load: Load, worker: Store, inject: Callable[[], Awaitable[float]], timeout: float = 90
) -> tuple[float, float | None, float | None]:
    """Run the load, ``inject`` the fault (it returns the time recovery is
    counted from), then settle every job. Returns (when the fault began,
    detection, recovery)."""
    async with worker.listen("probe") as rx, trio.open_nursery() as nursery:
        await nursery.start(partial(load.worker.work, load.handle, concurrency=4))
        nursery.start_soon(load.produce)
        await trio.sleep(2.0)
        started = time.monotonic()
        base = await inject()
        detected: float | None = None
        with trio.move_on_after(timeout):
            while await rx.recv() != Wake(LISTENER_RECONNECTED):
                pass
            detected = time.monotonic() - started
        await poll_until(lambda: load.first_run_after(base) is not None, timeout)
        recovered = load.first_run_after(base)
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    async with trio.open_nursery() as nursery:
        await nursery.start(partial(load.worker.work, load.handle, concurrency=4))
        await load.settle()
        nursery.cancel_scope.cancel()
    return started, detected, recovered


async def network_fault(
    dsn: str,
    quick: bool,
    name: str,
    fault: Callable[[FaultyProxy], None],
    heal: Callable[[FaultyProxy], None] | None = None,
    hold: float = 0.0,
) -> Row:
    with faulty_proxy(dsn) as proxy:
        async with pg_pair(dsn, proxy, quick) as (producer, worker):
            load = Load(producer, worker)

            async def inject() -> float:
                fault(proxy)
                if not hold:
                    return time.monotonic()
                await trio.sleep(hold)
                assert heal is not None
                heal(proxy)
                return time.monotonic()

            _, detected, recovered = await under_load(load, worker, inject)
    note = f"held {hold:.0f} s, then healed" if hold else ""
    return Row(name, detected, recovered, load.lost(), load.duplicates(), note)


def cluster(dsn: str) -> tuple[str, str]:
    """The (version, name) of the local Debian cluster serving ``dsn``'s port."""
    port = str(urlsplit(dsn).port or 5432)
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, check=True)
    for line in out.stdout.splitlines():
        version, name, cluster_port = line.split()[:3]
        if cluster_port == port:
            return version, name
    raise SystemExit(f"no local cluster listens on port {port}: {out.stdout!r}")


async def pg_restart(dsn: str, quick: bool) -> Row:
    version, name = cluster(dsn)
    back = 0.0
    async with pg_pair(dsn, None, quick) as (producer, worker):
        load = Load(producer, worker)

        async def inject() -> float:
            nonlocal back
            argv = ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart"]
            await trio.run_process([*argv, "-m", "fast"], capture_stdout=True)
            await trio.to_thread.run_sync(wait_for_server, dsn)
            back = time.monotonic()
            return back

        started, detected, recovered = await under_load(load, worker, inject, 60)
    return Row(
        "server restart", detected, recovered, load.lost(), load.duplicates(),
        f"server down {back - started:.1f} s; recovery from server back",
    )  # fmt: skip


async def pg_full(dsn: str, quick: bool, hold: float = 3.0) -> Row:
    with faulty_proxy(dsn) as proxy:
        async with pg_pair(dsn, proxy, quick) as (producer, worker):
            load = Load(producer, worker)
            async with trio.open_nursery() as nursery:
                await nursery.start(partial(load.worker.work, load.handle, concurrency=4))
                await trio.sleep(0.5)
                # The worker's connections go; their slots are taken by others.
                proxy.refuse = True
                proxy.cut()
                await trio.sleep(0.5)
                with every_free_connection(dsn) as hogs:
                    hogs.pop().close()  # one slot for the producer
                    proxy.refuse = False
                    before = proxy.accepted
                    for i in range(5):
                        await load.producer.enqueue(-1 - i)
                        load.acked[-1 - i] = time.monotonic()
                    await trio.sleep(hold)
                    attempts = proxy.accepted - before
                freed = time.monotonic()
                await poll_until(lambda: any(n < 0 for n, _ in load.runs), 60)
                recovered = min((t for n, t in load.runs if n < 0), default=None)
                await load.settle()
                nursery.cancel_scope.cancel()
    return Row(
        "max_connections reached", None, None if recovered is None else recovered - freed,
        load.lost(), load.duplicates(),
        f"{attempts / hold:.1f} connection attempts/s while full; recovery from slots freed",
    )  # fmt: skip


async def pg_latency(dsn: str, quick: bool, jobs: int = 2000) -> list[Row]:
    rows = []
    base_rate = None
    for ms, concurrency in ((0, 10), (5, 10), (10, 10), (20, 10), (20, 50)):
        with faulty_proxy(dsn) as proxy:
            proxy.delay = ms / 2000  # each direction: half the round trip
            async with pg_pair(dsn, proxy, quick) as (producer, worker):
                load = Load(producer, worker)
                await load.producer.enqueue_batch(list(range(1, jobs + 1)))
                for n in range(1, jobs + 1):
                    load.acked[n] = 0.0
                started = time.monotonic()
                async with trio.open_nursery() as nursery:
                    work = partial(load.worker.work, load.handle, concurrency=concurrency)
                    await nursery.start(work)
                    await load.settle(300)
                    nursery.cancel_scope.cancel()
                rate = jobs / (time.monotonic() - started)
                base_rate = base_rate or rate
                rows.append(Row(
                    f"+{ms} ms per round trip", None, None, load.lost(), load.duplicates(),
                    f"work(concurrency={concurrency}): {rate:,.0f} jobs/s, "
                    f"{rate / base_rate:.2f} of no added latency",
                ))  # fmt: skip
    return rows


def log_size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


async def sqlite_frozen() -> Row:
    from tests.chaos.test_sqlite_frozen import freeze_holding_the_lock

    busy = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "frozen.db")
        log = os.path.join(tmp, "log")
        async with open_sqlite(path, options=SqliteOptions(busy_timeout=busy)) as store:
            await store.queue("mine").enqueue(0)
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "tests.chaos.sqlite_writer", path, log], cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            try:
                await poll_until(lambda: log_size(log) >= 2000, 60)
                await freeze_holding_the_lock(proc.pid, path, random.Random(1))
                started = time.monotonic()
                try:
                    await store.queue("mine").enqueue(1)
                    detected = None
                except DatabaseError:
                    detected = time.monotonic() - started
                proc.kill()
                await proc.wait()
                killed = time.monotonic()
                await store.queue("mine").enqueue(2)
                recovered = time.monotonic() - killed
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        conn = sqlite3.connect(path)
        intact = conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        conn.close()
    return Row(
        "SQLite writer frozen holding the lock", detected, recovered, 0, 0,
        f"busy_timeout {busy} s; frozen then SIGKILLed; file intact: {intact}",
    )  # fmt: skip


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f} s"


async def main(args: argparse.Namespace) -> None:
    dsn, quick = args.dsn, args.quick
    def partition(p: FaultyProxy) -> None:
        p.blackhole(new=True)

    def heal(p: FaultyProxy) -> None:
        p.cut()  # the partition's flows are lost
        p.heal()

    faults: dict[str, Callable[[], object]] = {
        "half-open": lambda: network_fault(
            dsn, quick, "half-open connections", FaultyProxy.blackhole
        ),
        "reset": lambda: network_fault(dsn, quick, "connections reset", FaultyProxy.cut),
        "partition": lambda: network_fault(
            dsn, quick, "partition, 3 s", partition, heal=heal, hold=3.0
        ),
        "restart": lambda: pg_restart(dsn, quick),
        "full": lambda: pg_full(dsn, quick),
        "latency": lambda: pg_latency(dsn, quick),
        "sqlite-frozen": sqlite_frozen,
    }  # fmt: skip
    chosen = args.only.split(",") if args.only else list(faults)
    rows: list[Row] = []
    for name in chosen:
        print(f"# {name} ...", file=sys.stderr, flush=True)
        got = await faults[name]()  # type: ignore[misc]
        rows.extend(got if isinstance(got, list) else [got])
    print("| fault | detection | recovery | jobs lost | duplicates | notes |")
    print("|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r.fault} | {fmt(r.detection)} | {fmt(r.recovery)} | {r.lost} | "
              f"{r.duplicates} | {r.note} |")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=DSN)
    parser.add_argument("--only", default="")
    parser.add_argument("--quick", action="store_true")
    trio.run(main, parser.parse_args())
