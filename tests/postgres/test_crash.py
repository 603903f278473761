"""Rule: at-least-once under crashes. Worker processes SIGKILLed at random
moments under load lose nothing: every committed job is still finished
(claims of dead workers lapse after the visibility timeout and are
reclaimed), and a job acked once is never acked again.

The workers are ``tests/postgres/crash_worker.py`` processes; every one is
killed and reaped in ``finally``."""

from __future__ import annotations

import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest
import trio

from .pg import open_pg

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
WORKERS = 3
CHAOS_SECONDS = 5.0
CHAOS_LIMIT = 30.0
MIN_KILLS = 6
DRAIN_SECONDS = 30.0


def read_log(path: Path) -> list[list[str]]:
    try:
        with open(path) as f:
            return [line.split() for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


async def test_sigkilled_worker_processes_lose_nothing(schema: str, tmp_path: Path) -> None:
    """Three worker processes (``Queue.work``, concurrency 4, visibility
    timeout 1 s) drain a queue that a producer keeps filling, while the test
    SIGKILLs a random running worker every 0.2-0.7 s and starts a
    replacement, for 5 s (and at least 6 kills). Then the last workers drain
    the queue. Every job enqueued is finished (a ``done`` line, the queue
    empty, no dead letters), some jobs were redelivered after a crash (the
    crash path really ran), and no job was acked twice."""
    rng = random.Random(1234)
    log = tmp_path / "crash.log"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    procs: list[trio.Process] = []
    kills = 0
    enqueued: list[int] = []

    async def spawn() -> trio.Process:
        n = len(procs)
        err = os.open(tmp_path / f"worker-{n}.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "tests.postgres.crash_worker", schema, str(log), str(n)],
                cwd=ROOT,
                env=env,
                stdout=err,
                stderr=err,
            )
        finally:
            os.close(err)
        procs.append(proc)
        return proc

    async with open_pg(schema, pool_size=2) as store:  # creates the schema first
        q = store.queue("crash")
        enqueued += await q.enqueue_batch(range(100), max_attempts=1000)
        try:
            live = [await spawn() for _ in range(WORKERS)]

            async def produce(stop: trio.Event) -> None:
                i = 100
                while not stop.is_set():
                    enqueued.extend(await q.enqueue_batch(range(i, i + 8), max_attempts=1000))
                    i += 8
                    await trio.sleep(0.05)

            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(produce, stop)
                # Kill only workers that are up (their "ready" line is in),
                # so each kill lands on a process with work in hand.
                started = trio.current_time()
                while kills < MIN_KILLS or trio.current_time() - started < CHAOS_SECONDS:
                    assert trio.current_time() - started < CHAOS_LIMIT, kills
                    await trio.sleep(rng.uniform(0.2, 0.7))
                    up = {int(f[2]) for f in read_log(log) if f[0] == "ready"}
                    candidates = [p for p in live if p.pid in up]
                    if not candidates:
                        continue
                    victim = rng.choice(candidates)
                    live.remove(victim)
                    victim.send_signal(signal.SIGKILL)
                    await victim.wait()
                    kills += 1
                    live.append(await spawn())
                stop.set()

            # Drain: the surviving workers finish everything.
            with trio.fail_after(DRAIN_SECONDS):
                while True:
                    stats = await q.stats()
                    if stats.ready == stats.scheduled == stats.processing == 0:
                        break
                    await trio.sleep(0.05)
            stats = await q.stats()
            assert stats.dead == 0
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
            with trio.CancelScope(shield=True):
                for proc in procs:
                    await proc.wait()

    lines = read_log(log)
    errors = [(tmp_path / f"worker-{i}.err").read_text() for i in range(len(procs))]
    ready = {int(f[2]) for f in lines if f[0] == "ready"}
    assert len(ready) >= WORKERS + 1, errors  # replacements really ran
    done = {int(f[1]) for f in lines if f[0] == "done"}
    starts = Counter(int(f[1]) for f in lines if f[0] == "start")
    acks = Counter(int(f[1]) for f in lines if f[0] == "ack")
    assert kills >= MIN_KILLS
    assert len(enqueued) == len(set(enqueued)) > 200
    assert set(enqueued) <= done, sorted(set(enqueued) - done)[:20]  # nothing lost
    assert max(acks.values()) == 1  # nothing acked twice
    assert any(n > 1 for n in starts.values())  # crashes caused redeliveries
    print(
        f"{kills} kills, {len(enqueued)} jobs, {sum(starts.values())} starts, "
        f"{sum(1 for n in starts.values() if n > 1)} redelivered"
    )
