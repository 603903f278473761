"""Routes from an async program to PostgreSQL, side by side, on this machine.

    python bench/pg_routes.py [--dsn DSN] [--selects 5000] [--samples 500] [--rounds 7]
                              [--pin none|same|split]

Five routes:

  trio, alkstore libpq   alkstore's own connection (PgConnection: psycopg's
                         public pq.PGconn in nonblocking mode, waiting on its
                         socket through TrioRuntime)
  asyncio, alkstore libpq  the same code under AsyncioRuntime
  asyncio, psycopg async psycopg's native AsyncConnection
  trio, psycopg threads  psycopg's sync Connection, each call through
                         trio.to_thread.run_sync; notifies read by a thread
                         and handed in with trio.from_thread.run_sync
  sync psycopg (floor)   psycopg's sync Connection, no event loop

For each: sequential ``SELECT 1`` round trips per second (autocommit, one
connection), and NOTIFY->receive latency: one connection LISTENs, another
sends ``NOTIFY``; a sample runs from just before the NOTIFY is sent until the
listening side has the notification in hand (in the async routes, a listener
task that was waiting on its socket; in the floor, the same thread, after the
NOTIFY returned). Connection setup and a warm-up are outside the timings.
Each route runs once per round, in its own event loop with fresh connections,
round-robin; the table shows the median round's rate (and the slowest and
fastest round: on a small shared VM the rate of a round depends a lot on
where the scheduler puts the client and its server process) and the
percentiles of all rounds' latency samples. ``--pin same`` / ``--pin split``
fix the placement (client and its server processes on one CPU, or on two)
to take the scheduler out of the comparison.

trio-asyncio is not measured: it is not a dependency and the project set it
aside (the slowest route measured earlier, and at risk on Python 3.14); the
earlier figure from docs/engines.md is printed for reference.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import select
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import trio

from alkstore.io_asyncio.runtime import AsyncioRuntime
from alkstore.io_trio.runtime import TrioRuntime
from alkstore.protocol.plan import Fetch, Statement
from alkstore.runner.postgres.conn import PgConnection
from alkstore.runner.runtime import Runtime

DEFAULT_DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
WARMUP_SELECTS = 200
WARMUP_NOTIFIES = 20

# (SELECT 1 per second, list of NOTIFY->receive latencies in seconds)
Result = tuple[float, list[float]]

# CPUs for the server processes of the benchmark's connections (--pin).
BACKEND_CPUS: set[int] | None = None


def pin(*backend_pids: int) -> None:
    """Move the server processes of our own connections to BACKEND_CPUS."""
    if BACKEND_CPUS is not None:
        for pid in backend_pids:
            os.sched_setaffinity(pid, BACKEND_CPUS)


# -- alkstore's libpq driver, under either runtime ------------------------------
async def libpq_route(runtime: Runtime, dsn: str, selects: int, samples: int) -> Result:
    channel = "bench_" + secrets.token_hex(6)
    conn = await PgConnection.connect(runtime, dsn, timeout=10)
    listener = await PgConnection.connect(runtime, dsn, timeout=10)
    notifier = await PgConnection.connect(runtime, dsn, timeout=10)
    pin(*(c.pgconn.backend_pid for c in (conn, listener, notifier)))
    try:
        select1 = Statement("SELECT 1", (), Fetch.ONE)
        for _ in range(WARMUP_SELECTS):
            await conn.execute(select1)
        t = time.perf_counter()
        for _ in range(selects):
            await conn.execute(select1)
        rate = selects / (time.perf_counter() - t)

        await listener.command(f"LISTEN {channel}")
        pgconn = listener.pgconn
        arrived: list[float] = []
        signals = [runtime.signal()]

        async def listen() -> None:
            while True:
                await runtime.wait_readable(pgconn.socket, None)
                pgconn.consume_input()
                while pgconn.notifies() is not None:
                    arrived.append(time.perf_counter())
                    signals[-1].set()

        latencies: list[float] = []
        async with runtime.task_group() as group:
            group.start_soon(listen)
            for i in range(WARMUP_NOTIFIES + samples):
                signals.append(runtime.signal())
                t0 = time.perf_counter()
                await notifier.command(f"NOTIFY {channel}")
                await signals[-1].wait()
                if i >= WARMUP_NOTIFIES:
                    latencies.append(arrived[-1] - t0)
            group.cancel()
        return rate, latencies
    finally:
        for c in (conn, listener, notifier):
            c.close()


def run_alkstore_trio(dsn: str, selects: int, samples: int) -> Result:
    return trio.run(libpq_route, TrioRuntime(), dsn, selects, samples)


def run_alkstore_asyncio(dsn: str, selects: int, samples: int) -> Result:
    return asyncio.run(libpq_route(AsyncioRuntime(), dsn, selects, samples))


# -- psycopg's native AsyncConnection (asyncio) ----------------------------------
async def psycopg_async_route(dsn: str, selects: int, samples: int) -> Result:
    channel = "bench_" + secrets.token_hex(6)
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    listener = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    notifier = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    pin(*(c.info.backend_pid for c in (conn, listener, notifier)))
    try:
        cur = conn.cursor()
        for _ in range(WARMUP_SELECTS):
            await cur.execute("SELECT 1")
            await cur.fetchone()
        t = time.perf_counter()
        for _ in range(selects):
            await cur.execute("SELECT 1")
            await cur.fetchone()
        rate = selects / (time.perf_counter() - t)

        await listener.execute(f"LISTEN {channel}")
        arrived: list[float] = []
        events = [asyncio.Event()]

        async def listen() -> None:
            async for _ in listener.notifies():
                arrived.append(time.perf_counter())
                events[-1].set()

        latencies: list[float] = []
        task = asyncio.create_task(listen())
        await asyncio.sleep(0)
        try:
            for i in range(WARMUP_NOTIFIES + samples):
                events.append(asyncio.Event())
                t0 = time.perf_counter()
                await notifier.execute(f"NOTIFY {channel}")
                await events[-1].wait()
                if i >= WARMUP_NOTIFIES:
                    latencies.append(arrived[-1] - t0)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return rate, latencies
    finally:
        for c in (conn, listener, notifier):
            await c.close()


def run_psycopg_async(dsn: str, selects: int, samples: int) -> Result:
    return asyncio.run(psycopg_async_route(dsn, selects, samples))


# -- psycopg's sync Connection from trio, through threads ---------------------
async def psycopg_threads_route(dsn: str, selects: int, samples: int) -> Result:
    channel = "bench_" + secrets.token_hex(6)
    conn = psycopg.connect(dsn, autocommit=True)
    listener = psycopg.connect(dsn, autocommit=True)
    notifier = psycopg.connect(dsn, autocommit=True)
    pin(*(c.info.backend_pid for c in (conn, listener, notifier)))
    try:
        cur = conn.cursor()

        def select1() -> Any:
            cur.execute("SELECT 1")
            return cur.fetchone()

        for _ in range(WARMUP_SELECTS):
            await trio.to_thread.run_sync(select1)
        t = time.perf_counter()
        for _ in range(selects):
            await trio.to_thread.run_sync(select1)
        rate = selects / (time.perf_counter() - t)

        listener.execute(f"LISTEN {channel}")
        total = WARMUP_NOTIFIES + samples
        arrived: list[float] = []
        events = [trio.Event()]
        token = trio.lowlevel.current_trio_token()

        def on_notify() -> None:
            arrived.append(time.perf_counter())
            events[-1].set()

        def read_notifies() -> None:
            # The usual pattern: a thread blocks in psycopg and hands each
            # notification to the event loop.
            for _ in listener.notifies(timeout=30, stop_after=total):
                trio.from_thread.run_sync(on_notify, trio_token=token)

        reader = threading.Thread(target=read_notifies, daemon=True)
        reader.start()
        await trio.sleep(0.05)  # let the reader block on the socket
        latencies: list[float] = []
        for i in range(total):
            events.append(trio.Event())
            t0 = time.perf_counter()
            await trio.to_thread.run_sync(notifier.execute, f"NOTIFY {channel}")
            await events[-1].wait()
            if i >= WARMUP_NOTIFIES:
                latencies.append(arrived[-1] - t0)
        await trio.to_thread.run_sync(reader.join)
        return rate, latencies
    finally:
        for c in (conn, listener, notifier):
            c.close()


def run_psycopg_threads(dsn: str, selects: int, samples: int) -> Result:
    return trio.run(psycopg_threads_route, dsn, selects, samples)


# -- the floor: sync psycopg, no event loop ------------------------------------
def run_sync_floor(dsn: str, selects: int, samples: int) -> Result:
    channel = "bench_" + secrets.token_hex(6)
    conn = psycopg.connect(dsn, autocommit=True)
    listener = psycopg.connect(dsn, autocommit=True)
    notifier = psycopg.connect(dsn, autocommit=True)
    pin(*(c.info.backend_pid for c in (conn, listener, notifier)))
    try:
        cur = conn.cursor()
        for _ in range(WARMUP_SELECTS):
            cur.execute("SELECT 1")
            cur.fetchone()
        t = time.perf_counter()
        for _ in range(selects):
            cur.execute("SELECT 1")
            cur.fetchone()
        rate = selects / (time.perf_counter() - t)

        listener.execute(f"LISTEN {channel}")
        pgconn = listener.pgconn
        fd = pgconn.socket
        latencies: list[float] = []
        for i in range(WARMUP_NOTIFIES + samples):
            t0 = time.perf_counter()
            notifier.execute(f"NOTIFY {channel}")
            while True:
                pgconn.consume_input()
                if pgconn.notifies() is not None:
                    break
                select.select([fd], [], [], 10)
            if i >= WARMUP_NOTIFIES:
                latencies.append(time.perf_counter() - t0)
        return rate, latencies
    finally:
        for c in (conn, listener, notifier):
            c.close()


ROUTES: list[tuple[str, Callable[[str, int, int], Result]]] = [
    ("trio, alkstore libpq", run_alkstore_trio),
    ("asyncio, alkstore libpq", run_alkstore_asyncio),
    ("asyncio, psycopg async", run_psycopg_async),
    ("trio, psycopg threads", run_psycopg_threads),
    ("sync psycopg (floor)", run_sync_floor),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--selects", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--pin",
        choices=("none", "same", "split"),
        default="none",
        help="CPU placement: none (the scheduler's), same (this process and its "
        "server processes on CPU 0), split (this process on CPU 0, its server "
        "processes on CPU 1); pinning needs a local server and the right to "
        "set their affinity (root or the postgres user)",
    )
    args = parser.parse_args()
    global BACKEND_CPUS
    if args.pin != "none":
        os.sched_setaffinity(0, {0})  # inherited by every thread started later
        BACKEND_CPUS = {0} if args.pin == "same" else {1}

    rates: dict[str, list[float]] = {name: [] for name, _ in ROUTES}
    lats: dict[str, list[float]] = {name: [] for name, _ in ROUTES}
    for _ in range(args.rounds):
        for name, run in ROUTES:
            rate, latencies = run(args.dsn, args.selects, args.samples)
            rates[name].append(rate)
            lats[name].extend(latencies)

    with psycopg.connect(args.dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    floor = ROUTES[-1][0]
    floor_rate = statistics.median(rates[floor])
    floor_p50 = percentile(lats[floor], 0.5)
    print(
        f"PostgreSQL {version} over TCP at {args.dsn.rsplit('@', 1)[-1]}; psycopg "
        f"{psycopg.__version__} ({psycopg.pq.__impl__} pq), trio {trio.__version__}; "
        f"{args.rounds} rounds of {args.selects} SELECT 1 and {args.samples} NOTIFYs; "
        f"CPU placement: {args.pin}"
    )
    print("SELECT 1/s = median round (range: slowest-fastest round); x floor = rate / floor")
    print("rate, and notify p50 / floor p50 (latencies pooled over all rounds)")
    print(
        f"{'route':<26}{'SELECT 1/s':>11}{'range':>16}{'x floor':>9}"
        f"{'notify p50 ms':>15}{'p99 ms':>9}{'x floor':>9}"
    )
    for name, _ in ROUTES:
        rate = statistics.median(rates[name])
        p50 = percentile(lats[name], 0.5)
        p99 = percentile(lats[name], 0.99)
        spread = f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f}"
        print(
            f"{name:<26}{rate:>11,.0f}{spread:>16}{rate / floor_rate:>9.2f}"
            f"{p50 * 1e3:>15.3f}{p99 * 1e3:>9.3f}{p50 / floor_p50:>9.2f}"
        )
    print(
        "trio-asyncio (not installed; set aside): measured earlier on this machine "
        "at about 4k SELECT 1/s, notify p50 0.43 ms (docs/engines.md)"
    )


if __name__ == "__main__":
    main()
