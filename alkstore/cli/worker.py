"""``alkstore worker MODULE:ATTR``: run the user's handlers on their queues
until a signal drains them.

One :class:`WorkerRun` per command: it watches the signals, opens the store
(read-write: it migrates, like any opener) and runs a ``Queue.work`` per
queue, and the scheduler if asked, in one task group, all given one
``Drain``. SIGTERM or SIGINT starts the drain; a second one stops at once.
The exit code and the ``--json`` document say how it ended (docs/worker.md).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any, NoReturn, Protocol

import click
import orjson

from ..api.drain import Drain
from ..api.store import Store
from ..protocol.machines.worker import MAX_CONCURRENCY, check_worker_id
from ..protocol.values.errors import AlkstoreError, UsageError
from ..protocol.values.types import WorkerReport
from ..runner.runtime import Runtime
from .handlers import BadHandlers, QueueSpec, load
from .target import Target, refuse_missing, target_options

# Exit codes (docs/worker.md#exit-codes). 2 and 3 mean what they mean for
# every command: unusable (usage, import, database), failed while running.
DRAINED = 0
UNUSABLE = 2
FAILED = 3
DRAIN_TIMED_OUT = 4
FORCED = 5

SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The report's counts, in the --json document's order.
COUNTS = tuple(f.name for f in fields(WorkerReport) if f.name not in ("queue", "worker_id"))

log = logging.getLogger("alkstore.cli.worker")


# -- the drivers --------------------------------------------------------------------
class Driver(Protocol):
    """What differs between running the worker under trio and asyncio."""

    name: str

    def run(self, main: Callable[[], Awaitable[None]]) -> None: ...
    def runtime(self) -> Runtime: ...
    def openers(self) -> ModuleType: ...
    async def watch_signals(
        self, on_signal: Callable[[int], None], ready: Callable[[], None]
    ) -> None:
        """Call ``on_signal`` for each SIGTERM/SIGINT until cancelled;
        ``ready()`` once they are taken over."""
        ...


class TrioDriver:
    name = "trio"

    def run(self, main: Callable[[], Awaitable[None]]) -> None:
        import trio

        trio.run(main)

    def runtime(self) -> Runtime:
        from ..io_trio.runtime import TrioRuntime

        return TrioRuntime()

    def openers(self) -> ModuleType:
        from .. import io_trio

        return io_trio

    async def watch_signals(
        self, on_signal: Callable[[int], None], ready: Callable[[], None]
    ) -> None:
        import trio

        with trio.open_signal_receiver(*SIGNALS) as received:
            ready()
            async for signum in received:
                on_signal(signum)


class AsyncioDriver:
    name = "asyncio"

    def run(self, main: Callable[[], Awaitable[None]]) -> None:
        async def entry() -> None:
            await main()

        asyncio.run(entry())

    def runtime(self) -> Runtime:
        from ..io_asyncio.runtime import AsyncioRuntime

        return AsyncioRuntime()

    def openers(self) -> ModuleType:
        from .. import io_asyncio

        return io_asyncio

    async def watch_signals(
        self, on_signal: Callable[[int], None], ready: Callable[[], None]
    ) -> None:
        loop = asyncio.get_running_loop()
        for signum in SIGNALS:
            loop.add_signal_handler(signum, on_signal, signum)
        ready()
        try:
            await loop.create_future()  # until cancelled
        finally:
            for signum in SIGNALS:
                loop.remove_signal_handler(signum)


DRIVERS: dict[str, Callable[[], Driver]] = {"trio": TrioDriver, "asyncio": AsyncioDriver}


# -- one run ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """The command's options, checked."""

    target: Target
    specs: list[QueueSpec]
    scheduler: bool
    drain_timeout: float
    poll_interval: float
    worker_id: str | None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"


class Unusable(Exception):
    """The database could not be opened (exit code 2)."""


class WorkerRun:
    """One ``alkstore worker``: signals, the store, the workers, the report."""

    def __init__(self, settings: Settings, driver: Driver) -> None:
        self.settings = settings
        self.driver = driver
        self.drain = Drain()
        self.reports: list[WorkerReport] = []
        self.signal: str | None = None  # the first signal received
        self.forced = False  # a second signal came
        self.serving = False
        self.started = time.monotonic()
        self._main_scope: Any = None
        self._scheduler_scope: Any = None

    async def main(self) -> None:
        """Watch the signals, open the store, serve until drained. The one
        place that opens the store and the task group: another task for the
        whole run (a metrics endpoint, say) starts here beside the signals."""
        runtime = self.driver.runtime()
        async with runtime.task_group() as group:
            watching = runtime.signal()
            group.start_soon(self.driver.watch_signals, self.on_signal, watching.set)
            await runtime.wait_signal(watching, None)  # a signal from here on drains
            try:
                with runtime.cancel_scope() as scope:
                    self._main_scope = scope
                    async with self.open_store() as store:
                        await self.serve(store, runtime)
            finally:
                self._main_scope = None
                group.cancel()

    @asynccontextmanager
    async def open_store(self) -> AsyncIterator[Store]:
        """The store the command was pointed at, read-write (it migrates)."""
        target, openers = self.settings.target, self.driver.openers()
        opened = False
        try:
            if target.db is not None:
                opener = openers.open_sqlite(target.db)
            else:
                options = None
                if target.schema is not None:
                    options = openers.PostgresOptions(schema=target.schema)
                opener = openers.open_postgres(target.dsn, options=options)
            async with opener as store:
                opened = True
                yield store
        except AlkstoreError as exc:
            if opened:
                raise
            raise Unusable(f"cannot open {target.where}: {exc}") from exc

    async def serve(self, store: Store, runtime: Runtime) -> None:
        """A ``Queue.work`` per queue (and the scheduler) in one task group,
        which ends by itself once the drain has ended every worker."""
        settings = self.settings
        if settings.metrics_port is None:
            await self._serve(store, runtime)
            return
        from .metrics import serve_metrics

        async with AsyncExitStack() as stack:
            try:
                server = await stack.enter_async_context(
                    serve_metrics(store, settings.metrics_port, host=settings.metrics_host)
                )
            except UsageError as exc:  # the extra is missing, or the port is taken
                raise Unusable(str(exc)) from exc
            log.info("metrics at %s", server.url)
            await self._serve(store, runtime)

    async def _serve(self, store: Store, runtime: Runtime) -> None:
        specs = self.settings.specs
        async with runtime.task_group() as group:
            for spec in specs:
                group.start_soon(self._work, store, spec)
            if self.settings.scheduler:
                group.start_soon(self._schedule, store, runtime)
            self.serving = True
            log.info("worker running on %s (%s driver): %s%s", self.settings.target.where,
                     self.driver.name,
                     ", ".join(f"{s.queue} (concurrency {s.concurrency})" for s in specs),
                     "; scheduler on" if self.settings.scheduler else "")  # fmt: skip

    async def _work(self, store: Store, spec: QueueSpec) -> None:
        queue = store.queue(spec.queue, **spec.queue_options())
        report = await queue.work(
            spec.handler, concurrency=spec.concurrency, worker_id=self.settings.worker_id,
            poll_interval=self.settings.poll_interval, drain=self.drain,
        )  # fmt: skip
        self.reports.append(report)

    async def _schedule(self, store: Store, runtime: Runtime) -> None:
        if self.drain.started:
            return
        with runtime.cancel_scope() as scope:
            self._scheduler_scope = scope
            try:
                await store.run_scheduler()
            finally:
                self._scheduler_scope = None

    def on_signal(self, signum: int) -> None:
        """The first signal drains; the next one stops at once."""
        name = signal.Signals(signum).name
        if self.signal is None:
            self.signal = name
            log.warning("%s: draining %d worker(s) with %d handler(s) running, for up to %g s "
                        "(send it again to stop at once)", name, self.drain.workers,
                        self.drain.running, self.settings.drain_timeout)  # fmt: skip
            self.drain.start(self.settings.drain_timeout)
        elif not self.forced:
            self.forced = True
            log.warning("%s again: stopping at once; %d handler(s) cancelled, their jobs "
                        "handed back", name, self.drain.running)  # fmt: skip
            self.drain.now()
        if self._scheduler_scope is not None:
            self._scheduler_scope.cancel()  # no more enqueues from this process
        if not self.serving and self._main_scope is not None:
            self._main_scope.cancel()  # still opening the store: nothing to drain

    # -- the outcome ------------------------------------------------------------------
    def outcome(self) -> tuple[int, str]:
        """The exit code and reason of a run that ended without an error."""
        if self.forced:
            return FORCED, "forced"
        if any(r.cancelled for r in self.reports):
            return DRAIN_TIMED_OUT, "drain_timeout"
        return DRAINED, "drained"

    def document(self, code: int, reason: str, error: str | None = None) -> dict[str, Any]:
        """The ``--json`` document (docs/worker.md#json)."""
        totals = {name: sum(getattr(r, name) for r in self.reports) for name in COUNTS}
        return {
            "exit_code": code,
            "reason": reason,
            "drained_cleanly": code == DRAINED,
            "signal": self.signal,
            "drain_timeout": self.settings.drain_timeout,
            "seconds": round(time.monotonic() - self.started, 3),
            "jobs": totals,
            "queues": [
                {"queue": r.queue, "worker_id": r.worker_id, **{n: getattr(r, n) for n in COUNTS}}
                for r in sorted(self.reports, key=lambda r: r.queue)
            ],
            "error": error,
        }


def _first_error(exc: BaseException) -> BaseException:
    """The first real error in ``exc`` (a task group's may nest)."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def run(settings: Settings, driver: Driver) -> int:
    """Run the worker to its end; its exit code. Writes the ``--json``
    document on stdout, everything else to the log (stderr)."""
    job = WorkerRun(settings, driver)
    error: str | None = None
    try:
        driver.run(job.main)
    except KeyboardInterrupt:
        # Ctrl-C before the signals were taken over (still starting): nothing ran.
        code, reason = FORCED, "forced"
    except BaseException as exc:  # a handler's SystemExit, say, ended the workers
        first = _first_error(exc)
        if isinstance(first, Unusable):
            _fail(UNUSABLE, str(first))
        log.error("worker stopped on an error: %s", first, exc_info=first)
        code, reason, error = FAILED, "error", f"{type(first).__name__}: {first}"
    else:
        code, reason = job.outcome()
    doc = job.document(code, reason, error)
    totals = doc["jobs"]
    log.info("worker stopped (%s, exit code %d): %s", reason, code,
             ", ".join(f"{totals[n]} {n.replace('_', ' ')}" for n in COUNTS))  # fmt: skip
    if settings.target.json:
        click.echo(orjson.dumps(doc).decode())
    return code


def _fail(code: int, message: str) -> NoReturn:
    click.echo(f"alkstore: {message}", err=True)
    sys.exit(code)


# -- the command ------------------------------------------------------------------------
@click.command("worker")
@click.argument("handlers", metavar="MODULE:ATTR")
@click.option(
    "--queue",
    "-q",
    "queues",
    multiple=True,
    help="A queue to run (repeatable). Required when ATTR is one handler; with a mapping, "
    "only these of its queues. Default: every queue of the mapping.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=None,
    help="Handlers run at once per queue, for every queue. Default: each queue's own "
    "setting, else 1.",
)
@click.option("--scheduler", is_flag=True, help="Also run the scheduler (store.run_scheduler).")
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="On SIGTERM/SIGINT, seconds running handlers get to finish before they are "
    "cancelled and their jobs handed back.",
)
@click.option(
    "--driver",
    type=click.Choice(sorted(DRIVERS)),
    default="trio",
    show_default=True,
    help="The async library the handlers are written for.",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="Seconds between looks at an idle queue without a wake (a backstop).",
)
@click.option("--worker-id", default=None, help="Claims are taken under this id. Default: "
              "host:pid:random, one per queue.")  # fmt: skip
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the store's metrics in Prometheus text format on this port while the worker "
    "runs (needs alkstore[prometheus]; 0 picks a free port, logged).",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address --metrics-port listens on (0.0.0.0 for every interface).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="Log on stderr from this level up.",
)
@click.option(
    "--create",
    is_flag=True,
    help="Create the SQLite database (--db) if it does not exist. Default: refuse a missing "
    "file, as a typo in --db would make one.",
)
@target_options
def worker(
    target: Target,
    create: bool,
    handlers: str,
    queues: tuple[str, ...],
    concurrency: int | None,
    scheduler: bool,
    drain_timeout: float,
    driver: str,
    poll_interval: float,
    worker_id: str | None,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
) -> None:
    """Run the handlers of MODULE:ATTR on their queues until SIGTERM/SIGINT.

    ATTR is an async handler (give its queues with --queue) or a mapping of
    queue name to handler, or to a dict of settings ({"handler": ...,
    "concurrency": ..., "visibility_timeout": ..., "max_attempts": ...,
    "backoff": ...}). The current directory is searched first.

    A first SIGTERM/SIGINT drains: no more claims, jobs claimed ahead are
    handed back at once, running handlers get --drain-timeout seconds to
    finish; a second one stops at once. Exit codes: 0 drained, 2 unusable
    (usage, import, database), 3 failed while running, 4 drain timed out
    (handlers cancelled, their jobs handed back), 5 stopped by a second
    signal.
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        wid = check_worker_id(worker_id)
        specs = load(handlers, queues, concurrency)
    except BadHandlers as exc:
        _fail(UNUSABLE, str(exc))
    except AlkstoreError as exc:
        _fail(UNUSABLE, str(exc))
    refuse_missing(target, create=create)
    if metrics_port is not None:
        try:
            import opentelemetry.exporter.prometheus  # noqa: F401
        except ImportError:
            from .metrics import MISSING

            _fail(UNUSABLE, MISSING)
    settings = Settings(
        target, specs, scheduler, drain_timeout, poll_interval, wid, metrics_port, metrics_host
    )
    sys.exit(run(settings, DRIVERS[driver]()))
