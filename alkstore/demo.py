"""``python -m alkstore demo``: every mechanism at work in one trio program.

What happens, all inside one store and one nursery:

- producers create orders in ``store.transaction()``: their own SQL (an
  ``orders`` table) plus a job (``tx.enqueue``), a stream event
  (``tx.publish``) and a receipt for the outbox (``tx.outbox_enqueue``), one
  commit; one transaction is rolled back on purpose and leaves no trace;
- workers (``Queue.work``) fulfil the orders; some fail once (retried with
  backoff), and one poison job always fails and ends in the dead letters;
- an auditor subscribes to the stream and checkpoints with ``save_offset``;
- two reporters contend for a lock (``try_lock`` / ``hold_lock``), and a
  stale holder whose TTL lapsed is refused by its fencing token;
- the outbox delivers every receipt (``Outbox.work``), retrying failures;
- the coordinator ends it all with ``store.notify`` heard by ``store.listen``.

Then the demo checks its own results (every order's job ran exactly once,
every event was seen once, every receipt delivered once, tokens increased,
...) and reports which checks failed, if any. Everything it writes carries a
run id, so it can be pointed at the same ``--db`` again.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import secrets
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
from rich.console import Console
from rich.progress import (
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from .api.job import Job
from .api.locks import Lock
from .api.store import Store
from .io_trio import open_sqlite
from .protocol.values.backoff import Backoff
from .protocol.values.types import StreamEvent

QUEUE = "demo.orders"
STREAM = "demo.orders"
OUTBOX = "demo.receipts"
LOCK = "demo.report"
CONSUMER = "demo-auditor"
SHUTDOWN = "demo.shutdown"

MAX_ATTEMPTS = 3
BACKOFF = Backoff.of(base=0.01, cap=0.1)
PRODUCERS = 4
WORKER_CONCURRENCY = 8
LOCK_ROUNDS = 4  # per reporter
CHECKPOINT_EVERY = 50
ITEMS = ("teapot", "kettle", "mug", "saucer", "spoon", "tray", "cosy", "strainer")

SCHEMA = """CREATE TABLE IF NOT EXISTS orders (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    run             TEXT    NOT NULL,
    item            TEXT    NOT NULL,
    quantity        INTEGER NOT NULL,
    job_id          INTEGER,
    status          TEXT    NOT NULL DEFAULT 'new',
    processed_count INTEGER NOT NULL DEFAULT 0,
    processed_by    TEXT
)"""


class TransientError(Exception):
    """A failure worth retrying (the warehouse API timed out)."""


class PoisonError(Exception):
    """A job that can never succeed."""


class ReceiptBounced(Exception):
    """The mail server refused a receipt, this time."""


@dataclass
class DemoConfig:
    db: str
    jobs: int = 200
    seed: int = 1
    timeout: float = 30.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class Snapshot:
    jobs: int
    produced: int
    done: int
    retries: int
    dead: int
    events: int
    delivered: int
    tokens: int
    elapsed: float

    def line(self) -> str:
        n = self.jobs
        return (
            f"orders {self.produced}/{n}  jobs {self.done}/{n}  retries {self.retries}  "
            f"dead {self.dead}  events {self.events}/{n}  outbox {self.delivered}/{n}  "
            f"tokens {self.tokens}"
        )


@dataclass
class DemoReport:
    config: DemoConfig
    run: str
    elapsed: float = 0.0
    checks: list[Check] = field(default_factory=list)
    snapshot: Snapshot | None = None
    summary: list[tuple[str, str]] = field(default_factory=list)
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.timed_out and bool(self.checks) and all(c.ok for c in self.checks)


class Display(Protocol):
    def update(self, snap: Snapshot, *, final: bool = False) -> None: ...


class LiveDisplay:
    """A rich progress bar whose description is the status line (terminals)."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress = progress
        self._task = task

    def update(self, snap: Snapshot, *, final: bool = False) -> None:
        done = snap.produced + snap.done + snap.events + snap.delivered
        self._progress.update(self._task, description=snap.line(), completed=done)


class PlainDisplay:
    """Plain lines, a few per second at most (CI logs, pipes)."""

    def __init__(self, console: Console, every: float = 0.5) -> None:
        self._console = console
        self._every = every
        self._last_time = -1e9
        self._last_line = ""

    def update(self, snap: Snapshot, *, final: bool = False) -> None:
        line = snap.line()
        now = time.monotonic()
        if line == self._last_line:
            return
        if final or now - self._last_time >= self._every:
            self._console.print(
                f"[{snap.elapsed:5.2f}s] {line}", markup=False, highlight=False, soft_wrap=True
            )
            self._last_time = now
            self._last_line = line


@contextmanager
def open_display(console: Console, jobs: int) -> Iterator[Display]:
    if not console.is_terminal:
        yield PlainDisplay(console)
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    with progress:
        task = progress.add_task("starting", total=4 * jobs)
        yield LiveDisplay(progress, task)


class FencedReport:
    """A downstream resource that refuses writes carrying an older fencing token."""

    def __init__(self) -> None:
        self.highest = 0
        self.writes: list[tuple[int, str]] = []
        self.rejected: list[tuple[int, str]] = []

    def write(self, token: int, writer: str) -> bool:
        if token < self.highest:
            self.rejected.append((token, writer))
            return False
        self.highest = token
        self.writes.append((token, writer))
        return True


class Demo:
    def __init__(self, store: Store, config: DemoConfig, display: Display) -> None:
        self.store = store
        self.config = config
        self.display = display
        self.n = config.jobs
        self.run = secrets.token_hex(4)
        self.rng = random.Random(config.seed)
        self.started = time.perf_counter()
        self.queue = store.queue(QUEUE, max_attempts=MAX_ATTEMPTS, backoff=BACKOFF)
        self.outbox = store.outbox(OUTBOX, max_attempts=MAX_ATTEMPTS, backoff=BACKOFF)
        self.stream = store.stream(STREAM)
        # producers
        self.orders: dict[int, dict[str, Any]] = {}  # order id -> payload
        self.flaky_jobs = 0
        self.flaky_receipts = 0
        self.rolled_back = False
        self.poison_id: int | None = None
        # workers
        self.handled = 0  # handler calls for this run's jobs
        self.processed: Counter[int] = Counter()
        self.retries = 0
        self.buried = 0  # handler failures on the last attempt
        self.poison_dead = False
        # stream
        self.stream_start = 0
        self.seen: list[int] = []
        self.seen_items: list[str] = []
        self.checkpoints = 0
        self.final_offset = 0
        self.offsets_increasing = True
        # outbox
        self.tries: Counter[int] = Counter()
        self.delivered: list[int] = []
        self.outbox_retries = 0
        # locks
        self.fence = FencedReport()
        self.tokens: list[int] = []
        self.contended = 0
        self.overlaps = 0
        self.inside: str | None = None
        self.stale_renewed: bool | None = None
        self.stale_released: bool | None = None
        self.stale_write_ok: bool | None = None
        self.lock_done = False
        # control
        self.shutdown_heard = False

    # -- progress ----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        return Snapshot(
            jobs=self.n,
            produced=len(self.orders),
            done=len(self.processed),
            retries=self.retries,
            dead=int(self.poison_dead),
            events=len(self.seen),
            delivered=len(self.delivered),
            tokens=len(self.tokens),
            elapsed=time.perf_counter() - self.started,
        )

    def complete(self) -> bool:
        return (
            len(self.orders) == self.n
            and len(self.processed) == self.n
            and self.poison_dead
            and len(self.seen) >= self.n
            and len(set(self.delivered)) == self.n
            and self.lock_done
        )

    # -- the program -------------------------------------------------------------------
    async def run_all(self) -> None:
        async with self.store.transaction() as tx:
            await tx.execute(SCHEMA)
        self.poison_id = await self.queue.enqueue({"kind": "poison", "run": self.run})
        async with trio.open_nursery() as services:
            await services.start(self.shutdown_listener, services.cancel_scope)
            await services.start(
                functools.partial(
                    self.queue.work,
                    self.handle,
                    concurrency=WORKER_CONCURRENCY,
                    worker_id=f"demo-worker-{self.run}",
                )
            )
            await services.start(
                functools.partial(
                    self.outbox.work,
                    self.deliver,
                    concurrency=4,
                    worker_id=f"demo-mailer-{self.run}",
                )
            )
            await services.start(self.audit)
            services.start_soon(self.locks)
            services.start_soon(self.monitor)
            per = -(-self.n // PRODUCERS)
            for p in range(PRODUCERS):
                first = p * per
                count = max(0, min(per, self.n - first))
                services.start_soon(self.produce, p, count)
        # The services nursery ended because the listener heard SHUTDOWN and
        # cancelled it: workers handed back anything unfinished and stopped.

    async def produce(self, producer: int, count: int) -> None:
        for i in range(count):
            if producer == 0 and i == count // 2:
                await self.abandoned_order()
            item = self.rng.choice(ITEMS)
            quantity = self.rng.randint(1, 5)
            flaky = self.rng.random() < 0.1
            bounce = self.rng.random() < 0.05
            async with self.store.transaction() as tx:
                rows = await tx.execute(
                    "INSERT INTO orders (run, item, quantity) VALUES (?, ?, ?) RETURNING id",
                    (self.run, item, quantity),
                )
                order = int(rows[0][0])
                payload = {"kind": "order", "run": self.run, "order": order, "flaky": flaky}
                job_id = await tx.enqueue(self.queue, payload)
                await tx.execute("UPDATE orders SET job_id = ? WHERE id = ?", (job_id, order))
                await tx.publish(STREAM, {"run": self.run, "order": order, "item": item})
                await tx.outbox_enqueue(
                    self.outbox, {"run": self.run, "order": order, "bounce": bounce}
                )
            # Only now, after commit, does the order exist for anyone.
            self.orders[order] = payload
            self.flaky_jobs += flaky
            self.flaky_receipts += bounce

    async def abandoned_order(self) -> None:
        """A transaction that fails halfway: none of its writes survive."""
        try:
            async with self.store.transaction() as tx:
                rows = await tx.execute(
                    "INSERT INTO orders (run, item, quantity) VALUES (?, 'rolled-back', 1) "
                    "RETURNING id",
                    (self.run,),
                )
                order = int(rows[0][0])
                payload = {"kind": "order", "run": self.run, "order": order, "flaky": False}
                await tx.enqueue(self.queue, payload)
                await tx.publish(STREAM, {"run": self.run, "order": order, "item": "rolled-back"})
                await tx.outbox_enqueue(self.outbox, {"run": self.run, "order": order})
                raise _Abandon
        except _Abandon:
            self.rolled_back = True

    async def handle(self, job: Job) -> None:
        payload = job.payload
        mine = isinstance(payload, dict) and payload.get("run") == self.run
        if mine:  # not an earlier run's job on a reused --db
            self.handled += 1
        kind = payload.get("kind") if isinstance(payload, dict) else None
        if kind == "poison" or (mine and payload.get("flaky") and job.attempts == 1):
            if mine:
                if job.attempts < job.max_attempts:
                    self.retries += 1
                else:
                    self.buried += 1
            if kind == "poison":
                raise PoisonError("this job can never succeed")
            raise TransientError("warehouse API timed out")
        order = int(payload["order"]) if isinstance(payload, dict) else 0
        async with self.store.transaction() as tx:
            await tx.execute(
                "UPDATE orders SET status = 'shipped', processed_count = processed_count + 1, "
                "processed_by = ? WHERE id = ?",
                (job.worker_id, order),
            )
        if mine:
            self.processed[order] += 1

    async def deliver(self, payload: Any) -> None:
        if not isinstance(payload, dict) or payload.get("run") != self.run:
            return  # an earlier run's receipt: deliver it silently
        order = int(payload["order"])
        self.tries[order] += 1
        if payload.get("bounce") and self.tries[order] == 1:
            self.outbox_retries += 1
            raise ReceiptBounced(f"mail server refused receipt for order {order}")
        self.delivered.append(order)

    async def audit(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Read every order event once, checkpointing explicitly."""
        async with self.stream.subscribe(CONSUMER, batch=64) as events:
            self.stream_start = last = events.offset
            task_status.started()
            since_checkpoint = 0
            while len(self.seen) < self.n:
                event = await events.recv()
                if event is None:
                    await trio.lowlevel.checkpoint()  # closed by a cancellation? raise that
                    raise RuntimeError("the stream receiver closed unexpectedly")
                if event.offset <= last:
                    self.offsets_increasing = False
                last = event.offset
                payload = event.payload
                if isinstance(payload, dict) and payload.get("run") == self.run:
                    self.seen.append(int(payload["order"]))
                    self.seen_items.append(str(payload.get("item")))
                since_checkpoint += 1
                if since_checkpoint >= CHECKPOINT_EVERY:
                    await events.save_offset()
                    self.checkpoints += 1
                    since_checkpoint = 0
            await events.save_offset()
            self.checkpoints += 1
            self.final_offset = events.offset

    async def locks(self) -> None:
        # A holder that stalls past its TTL (a long GC pause, say) ...
        stale = await self.store.try_lock(LOCK, "slowpoke", ttl=0.05)
        if stale is None:
            raise RuntimeError(f"lock {LOCK!r} is held by someone else")
        self.tokens.append(stale.token)
        self.fence.write(stale.token, "slowpoke")
        await trio.sleep(0.08)
        # ... meanwhile the lock lapsed and someone else took it with a newer token,
        async with self.store.hold_lock(LOCK, "reporter-a", 2.0, timeout=5, poll=0.005) as lock:
            self.tokens.append(lock.token)
            self.fence.write(lock.token, "reporter-a")
            # so the stale holder's late write is refused downstream,
            self.stale_write_ok = self.fence.write(stale.token, "slowpoke")
        # and it learns it lost the lock when it tries to renew or release.
        self.stale_renewed = await stale.renew(1.0)
        self.stale_released = await stale.release()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.reporter, "reporter-a")
            nursery.start_soon(self.reporter, "reporter-b")
        self.lock_done = True

    async def reporter(self, owner: str) -> None:
        for _ in range(LOCK_ROUNDS):
            lock = await self.store.try_lock(LOCK, owner, ttl=2.0)
            if lock is not None:
                try:
                    await self.critical_section(lock)
                finally:
                    await lock.release()
            else:
                self.contended += 1
                async with self.store.hold_lock(LOCK, owner, 2.0, timeout=5, poll=0.005) as held:
                    await self.critical_section(held)
            await trio.sleep(0.002)

    async def critical_section(self, lock: Lock) -> None:
        self.tokens.append(lock.token)
        if self.inside is not None:
            self.overlaps += 1
        self.inside = lock.owner
        self.fence.write(lock.token, lock.owner)
        await trio.sleep(0.01)
        self.inside = None

    async def monitor(self) -> None:
        while True:
            self.display.update(self.snapshot())
            if not self.poison_dead and self.poison_id is not None:
                info = await self.queue.get_job(self.poison_id)
                self.poison_dead = info is not None and info.state == "dead"
            if self.complete():
                break
            await trio.sleep(0.05)
        self.display.update(self.snapshot(), final=True)
        await self.store.notify(SHUTDOWN)

    async def shutdown_listener(
        self, scope: trio.CancelScope, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with self.store.listen(SHUTDOWN) as wakes:
            task_status.started()
            wake = await wakes.recv()
        self.shutdown_heard = wake is not None
        scope.cancel()

    # -- verification ------------------------------------------------------------------
    async def verify(self, logs: LogTally) -> list[Check]:
        checks: list[Check] = []

        def check(name: str, ok: bool, detail: str = "") -> None:
            checks.append(Check(name, bool(ok), detail))

        n = self.n
        async with self.store.transaction() as tx:
            total, once, with_job, shipped = (
                await tx.execute(
                    "SELECT COUNT(*), COALESCE(SUM(processed_count = 1), 0), "
                    "COALESCE(SUM(job_id IS NOT NULL), 0), COALESCE(SUM(status = 'shipped'), 0) "
                    "FROM orders WHERE run = ?",
                    (self.run,),
                )
            )[0]
            ghosts = (
                await tx.execute(
                    "SELECT COUNT(*) FROM orders WHERE run = ? AND item = 'rolled-back'",
                    (self.run,),
                )
            )[0][0]
        check(
            "every order committed with its job",
            total == n and with_job == n,
            f"{total} orders, {with_job} with a job id",
        )
        check(
            "every order's job processed exactly once",
            once == n
            and shipped == n
            and set(self.processed) == set(self.orders)
            and all(c == 1 for c in self.processed.values()),
            f"{once}/{n} processed once",
        )
        check(
            "rolled-back transaction left no trace",
            self.rolled_back and ghosts == 0 and "rolled-back" not in self.seen_items,
            "no order, job, event or receipt",
        )
        acked = 0
        async with self.store.transaction() as tx:
            rows = await tx.execute("SELECT job_id FROM orders WHERE run = ?", (self.run,))
        for (job_id,) in rows:
            if await self.queue.get_job(int(job_id)) is None:
                acked += 1
        check("every job acked (gone from the queue)", acked == n, f"{acked}/{n}")
        stats = await self.queue.stats()
        check(
            "queue drained",
            stats.ready == 0 and stats.scheduled == 0 and stats.processing == 0,
            f"ready={stats.ready} scheduled={stats.scheduled} processing={stats.processing}",
        )
        expected_calls = n + self.flaky_jobs + MAX_ATTEMPTS
        check(
            "transient failures retried with backoff",
            self.retries == self.flaky_jobs + MAX_ATTEMPTS - 1 and self.handled == expected_calls,
            f"{self.retries} retries, {self.handled} handler calls (expected {expected_calls})",
        )
        poison = None if self.poison_id is None else await self.queue.get_job(self.poison_id)
        check(
            "poison job in the dead letters",
            poison is not None
            and poison.state == "dead"
            and poison.dead_reason == "max_attempts"
            and poison.attempts == MAX_ATTEMPTS
            and "PoisonError" in (poison.last_error or "")
            and self.buried == 1,
            "" if poison is None else f"reason={poison.dead_reason} attempts={poison.attempts}",
        )
        saved = await self.stream.get_offset(CONSUMER)
        mine = [e for e in await self.read_log() if e.payload.get("run") == self.run]
        check(
            "every event consumed once, in offset order",
            sorted(self.seen) == sorted(self.orders)
            and self.offsets_increasing
            and len(mine) == n
            and all(e.payload.get("item") != "rolled-back" for e in mine),
            f"{len(self.seen)} events, {len(mine)} in the log",
        )
        check(
            "stream checkpoint saved explicitly",
            saved == self.final_offset and saved > self.stream_start and self.checkpoints >= 1,
            f"offset {saved} after {self.checkpoints} save_offset calls",
        )
        ob_stats = await self.outbox.stats()
        check(
            "every receipt delivered once",
            sorted(self.delivered) == sorted(self.orders)
            and self.outbox_retries == self.flaky_receipts
            and ob_stats.dead == 0
            and ob_stats.ready + ob_stats.scheduled + ob_stats.processing == 0,
            f"{len(self.delivered)} delivered, {self.outbox_retries} redelivered after a bounce",
        )
        check(
            "failures logged: each retry at WARNING, the dead letter at ERROR",
            logs.retries == self.retries + self.outbox_retries
            and logs.burials == 1
            and not logs.other,
            f"{logs.retries} retry warnings, {logs.burials} dead-letter error"
            + (f"; also: {logs.other[0]}" if logs.other else ""),
        )
        increasing = all(a < b for a, b in zip(self.tokens, self.tokens[1:], strict=False))
        check(
            "fencing tokens strictly increasing",
            increasing and len(self.tokens) == 2 + 2 * LOCK_ROUNDS,
            " ".join(str(t) for t in self.tokens),
        )
        check(
            "lock excluded and fenced",
            self.overlaps == 0
            and self.contended >= 1
            and self.stale_write_ok is False
            and self.stale_renewed is False
            and self.stale_released is False,
            f"{self.contended} contended, stale write refused, stale renew/release False",
        )
        check("shutdown via notify/listen", self.shutdown_heard, "wake on 'demo.shutdown'")
        return checks

    async def read_log(self) -> list[StreamEvent]:
        """Every event published since the auditor started (dict payloads only)."""
        out: list[StreamEvent] = []
        offset = self.stream_start
        while batch := await self.stream.read_since(offset, 500):
            out.extend(e for e in batch if isinstance(e.payload, dict))
            offset = batch[-1].offset
        return out

    def summary(self, elapsed: float) -> list[tuple[str, str]]:
        tokens = f"{self.tokens[0]}..{self.tokens[-1]}" if self.tokens else "-"
        return [
            ("orders committed", f"{len(self.orders)} (+1 rolled back)"),
            ("jobs done", f"{sum(self.processed.values())}"),
            ("retries", f"{self.retries} ({self.flaky_jobs} flaky jobs, poison x{MAX_ATTEMPTS})"),
            ("dead letters", f"{int(self.poison_dead)} (poison job)"),
            ("events consumed", f"{len(self.seen)} ({self.checkpoints} checkpoints)"),
            (
                "lock tokens",
                f"{tokens} ({len(self.tokens)} acquisitions, {self.contended} contended, "
                f"{len(self.fence.rejected)} stale write refused)",
            ),
            ("outbox delivered", f"{len(self.delivered)} ({self.outbox_retries} retried)"),
            ("elapsed", f"{elapsed:.2f} s"),
        ]


class _Abandon(Exception):
    pass


class LogTally(logging.Handler):
    """Counts what alkstore logs during the demo (instead of printing it: the
    failures are on purpose), so the demo can check it was logged right."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.retries = 0  # WARNING: a handler failed, the job will be retried
        self.burials = 0  # ERROR: a job went to the dead letters
        self.other: list[str] = []  # anything else at WARNING or above

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno == logging.WARNING and "retrying" in message:
            self.retries += 1
        elif record.levelno >= logging.ERROR and "moved to dead letters" in message:
            self.burials += 1
        elif record.levelno >= logging.WARNING:
            self.other.append(f"{record.levelname}: {message}")


@contextmanager
def _tally_logs() -> Iterator[LogTally]:
    logger = logging.getLogger("alkstore")
    tally = LogTally()
    propagate, level = logger.propagate, logger.level
    logger.addHandler(tally)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        yield tally
    finally:
        logger.removeHandler(tally)
        logger.propagate, logger.level = propagate, level


async def run_demo(config: DemoConfig, display: Display) -> DemoReport:
    """Run the demo against ``config.db``; never raises for a failed check."""
    started = time.perf_counter()
    report = DemoReport(config, run="")
    with trio.move_on_after(config.timeout) as deadline, _tally_logs() as logs:
        async with open_sqlite(config.db, seed=config.seed) as store:
            demo = Demo(store, config, display)
            report.run = demo.run
            try:
                await demo.run_all()
                report.checks = await demo.verify(logs)
            finally:
                report.snapshot = demo.snapshot()
                report.summary = demo.summary(time.perf_counter() - started)
    report.timed_out = deadline.cancelled_caught
    report.elapsed = time.perf_counter() - started
    if report.summary:
        report.summary[-1] = ("elapsed", f"{report.elapsed:.2f} s")
    return report


def render_report(console: Console, report: DemoReport) -> None:
    table = Table(title="alkstore demo", title_justify="left")
    table.add_column("what")
    table.add_column("result")
    for name, value in report.summary:
        table.add_row(name, value)
    console.print(table)
    for c in report.checks:
        mark = "[green]ok[/]  " if c.ok else "[red]FAIL[/]"
        detail = f" [dim]({c.detail})[/]" if c.detail else ""
        console.print(f"  {mark} {c.name}{detail}", highlight=False, soft_wrap=True)
    if report.timed_out:
        console.print(
            f"[red]demo FAILED[/]: not finished within {report.config.timeout:g} s",
            highlight=False,
        )
    elif report.ok:
        console.print(
            f"[green]demo OK[/]: {len(report.checks)} checks passed in {report.elapsed:.2f} s",
            highlight=False,
        )
    else:
        failed = sum(not c.ok for c in report.checks)
        console.print(f"[red]demo FAILED[/]: {failed} check(s) failed", highlight=False)


def main(
    db: str | None, jobs: int, seed: int, timeout: float = 30.0, console: Console | None = None
) -> bool:
    """Run the demo (in a temporary database unless ``db`` is given); True when it passed."""
    console = console or Console()
    if db is not None:
        return _main(console, DemoConfig(db, jobs, seed, timeout), db)
    with tempfile.TemporaryDirectory(prefix="alkstore-demo-") as tmp:
        config = DemoConfig(os.path.join(tmp, "demo.db"), jobs, seed, timeout)
        return _main(console, config, "a temporary database")


def _main(console: Console, config: DemoConfig, where: str) -> bool:
    console.print(
        f"alkstore demo: {config.jobs} orders in {where} (seed {config.seed})", highlight=False
    )
    try:
        with open_display(console, config.jobs) as display:
            report = trio.run(run_demo, config, display)
    except Exception as exc:  # a crash is a failed demo, with its traceback
        console.print_exception()
        console.print(f"[red]demo FAILED[/]: {type(exc).__name__}: {exc}", highlight=False)
        return False
    render_report(console, report)
    return report.ok
