"""Cross-process wake latency and idle cost of the SQLite watcher.

    python bench/watcher_latency.py [--samples 200] [--cold 20] [--idle 5]
                                    [--modes inotify,polling,fixed-1ms]

Latency: process B calls ``store.notify(ch)``; process A is blocked in
``recv()`` on a listener of ``ch``. A sample runs from B's
``time.monotonic_ns()`` just before ``notify`` (so B's own commit is
included) to A's right after ``recv()`` returns; CLOCK_MONOTONIC is shared by
every process on the machine. A and B run in lock step: A asks for the next
notify only once it received the last, and B first waits a random gap, so
each sample starts from a quiet watcher:

- ``warm``: gaps of 0-100 ms (bursty traffic; ``--samples`` of them);
- ``cold``: gaps of 0.3-0.8 s (a watcher long idle; ``--cold`` of them).

``B commit`` is how long B's ``notify()`` call itself took (the floor of the
figures above it); ``after`` is the warm latency counted from the moment
``notify()`` returned in B (negative: A had it before B's call returned).
``looks/wake`` is how many times A's watcher read ``PRAGMA data_version``
per delivered wake.

Idle CPU: a fresh process opens a store, holds a listener, sleeps 1 s, then
measures its own CPU time (getrusage: user + system) over ``--idle`` seconds
of doing nothing else; ``looks/s`` is the watcher's rate meanwhile.

Modes: ``inotify`` (the default: sleep on inotify, 1 s backstop),
``polling`` (``WatcherOptions(use_inotify=False)``: adaptive polling), and
``fixed-1ms`` (a fixed 1 ms poll, for reference only).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import trio

from alkstore.io_trio import SqliteOptions, WatcherOptions, open_sqlite

CHANNEL = "bench"
WARMUP = 5


def options_for(mode: str) -> SqliteOptions:
    if mode == "inotify":
        return SqliteOptions(watcher=WatcherOptions())
    if mode == "polling":
        return SqliteOptions(watcher=WatcherOptions(use_inotify=False))
    if mode == "fixed-1ms":
        return SqliteOptions(
            watcher=WatcherOptions(use_inotify=False, fastest=0.001, slowest_poll=0.001)
        )
    raise SystemExit(f"unknown mode {mode!r}")


# -- process B: notifies on request -----------------------------------------------------
async def notifier(path: str) -> None:
    async with open_sqlite(path) as store:
        print("ready", flush=True)
        while True:
            line = await trio.to_thread.run_sync(sys.stdin.readline)
            if not line.startswith("go "):
                return
            await trio.sleep(float(line.split()[1]))
            t0 = time.monotonic_ns()
            await store.notify(CHANNEL)
            t1 = time.monotonic_ns()
            print(t0, t1, flush=True)


# -- an idle process: measures itself ---------------------------------------------------
async def idle(path: str, mode: str, seconds: float) -> None:
    async with open_sqlite(path, options=options_for(mode)) as store, store.listen(CHANNEL):
        await trio.sleep(1.0)  # let the watcher settle into its idle cadence
        watcher = store._core.executor.watcher  # type: ignore[attr-defined]
        checks0 = watcher.checks
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        await trio.sleep(seconds)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - t0
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        print(cpu, wall, watcher.checks - checks0, flush=True)


# -- process A: the listener, and the driver of the whole run ------------------------------
class Lines:
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = b""

    async def next(self) -> str:
        while b"\n" not in self._buf:
            chunk = await self._stream.receive_some(4096)
            if not chunk:
                raise EOFError("child closed its stdout")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()


@dataclass
class Result:
    mode: str
    warm: list[float] = field(default_factory=list)  # ms, notify call -> recv
    cold: list[float] = field(default_factory=list)
    commit: list[float] = field(default_factory=list)  # ms, B's notify() call
    after: list[float] = field(default_factory=list)  # ms, B's notify() returned -> recv
    looks_per_wake: float = 0.0
    idle_cpu: float = 0.0  # percent of one core
    idle_looks: float = 0.0  # per second


async def latency(path: str, result: Result, samples: int, cold: int) -> None:
    rng = random.Random(7)
    gaps = [("warm", rng.uniform(0.0, 0.1)) for _ in range(samples + WARMUP)]
    gaps += [("cold", rng.uniform(0.3, 0.8)) for _ in range(cold)]
    argv = [sys.executable, __file__, "--child-notifier", path]
    options = options_for(result.mode)
    async with open_sqlite(path, options=options) as store, store.listen(CHANNEL) as wakes:
        watcher = store._core.executor.watcher  # type: ignore[attr-defined]
        proc = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            lines = Lines(proc.stdout)
            with trio.fail_after(60):
                assert await lines.next() == "ready"
            looks0, delivered = watcher.checks, 0
            for i, (kind, gap) in enumerate(gaps):
                wakes.try_recv()  # nothing stale
                await proc.stdin.send_all(f"go {gap}\n".encode())
                with trio.fail_after(10):
                    await wakes.recv()
                t1 = time.monotonic_ns()
                t0, t_done = map(int, (await lines.next()).split())
                if i < WARMUP:
                    looks0 = watcher.checks
                    continue
                delivered += 1
                (result.warm if kind == "warm" else result.cold).append((t1 - t0) / 1e6)
                result.commit.append((t_done - t0) / 1e6)
                if kind == "warm":
                    result.after.append((t1 - t_done) / 1e6)
            result.looks_per_wake = (watcher.checks - looks0) / max(1, delivered)
            await proc.stdin.send_all(b"quit\n")
            with trio.move_on_after(10):
                await proc.wait()
        finally:
            with trio.CancelScope(shield=True):
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()


def idle_cpu(path: str, result: Result, seconds: float) -> None:
    argv = [sys.executable, __file__, "--child-idle", path, result.mode, str(seconds)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=seconds + 60)
    cpu, wall, checks = done.stdout.split()
    result.idle_cpu = float(cpu) / float(wall) * 100
    result.idle_looks = int(checks) / float(wall)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(name: str, values: list[float]) -> str:
    return (
        f"  {name:<7} {pct(values, 0.5):>8.3f} {pct(values, 0.9):>8.3f} "
        f"{pct(values, 0.99):>8.3f} {max(values, default=float('nan')):>8.3f} "
        f"{statistics.fmean(values) if values else float('nan'):>8.3f}"
    )


async def main(args: argparse.Namespace) -> None:
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            path = os.path.join(tmp, f"{mode}.db")
            async with open_sqlite(path):
                pass  # create the schema once
            result = Result(mode)
            await latency(path, result, args.samples, args.cold)
            await trio.to_thread.run_sync(idle_cpu, path, result, args.idle)
            results.append(result)
    load = os.getloadavg()[0]
    print(
        f"cross-process wake latency (ms): {args.samples} warm + {args.cold} cold samples; "
        f"idle over {args.idle:g} s; {os.cpu_count()} CPUs, load {load:.2f}"
    )
    for r in results:
        print(f"{r.mode}")
        print(f"  {'':<7} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'mean':>8}")
        print(row("warm", r.warm))
        print(row("cold", r.cold))
        print(row("commit", r.commit))
        print(row("after", r.after))
        print(
            f"  looks/wake {r.looks_per_wake:.1f}; idle CPU {r.idle_cpu:.3f}% of a core, "
            f"{r.idle_looks:.1f} looks/s"
        )
    print()
    print(f"{'mode':<10} {'warm p50':>9} {'warm p99':>9} {'cold p50':>9} {'cold p99':>9} "
          f"{'idle CPU %':>11}")  # fmt: skip
    for r in results:
        print(
            f"{r.mode:<10} {pct(r.warm, 0.5):>9.3f} {pct(r.warm, 0.99):>9.3f} "
            f"{pct(r.cold, 0.5):>9.3f} {pct(r.cold, 0.99):>9.3f} {r.idle_cpu:>11.3f}"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child-notifier":
        trio.run(notifier, sys.argv[2])
    elif len(sys.argv) > 1 and sys.argv[1] == "--child-idle":
        trio.run(idle, sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--samples", type=int, default=200)
        parser.add_argument("--cold", type=int, default=20)
        parser.add_argument("--idle", type=float, default=5.0)
        parser.add_argument("--modes", default="inotify,polling,fixed-1ms")
        trio.run(main, parser.parse_args())
