"""A simulated store: the real API, an in-process engine, virtual time.

Plans run synchronously on a private in-memory SQLite database inside the
calling task (no thread, so nothing happens behind the event loop's back),
and the store's clock is the event loop's clock. Under trio's
``MockClock(autojump_threshold=0)`` (pytest-trio's ``autojump_clock``
fixture) every delay, visibility timeout, TTL, backoff and schedule passes
as soon as the program is otherwise idle: instantly, and the same way every
run.

Under asyncio the same holds on a ``looptime`` event loop
(``run_virtual``/``virtual_event_loop`` in ``virtual_time.py``), whose
``time()`` jumps to the next timer whenever every task waits.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

import sniffio

from ..api.core.handle import StoreCore
from ..api.store import Store
from ..engines.sqlite import SqliteDialect
from ..protocol.machines.lifecycle import Lifecycle
from ..protocol.plan import Plan, is_read_only
from ..protocol.plans.housekeeping import NOTIFICATION_RETENTION_S
from ..protocol.values.errors import UsageError
from ..protocol.values.timeconv import US_PER_S, instant_us
from ..runner.executor import Session, transaction_block
from ..runner.hub import WakeHub
from ..runner.runtime import Runtime
from ..runner.sqlite import conn as sqlite_conn

T = TypeVar("T")
DEFAULT_START = datetime.fromisoformat("2030-01-01T00:00:00+00:00")


class LoopClock:
    """Wall-clock microseconds that advance with the event loop's clock."""

    def __init__(self, runtime: Runtime, start: datetime) -> None:
        self._runtime = runtime
        self._start_us = instant_us(start, "start")
        self._t0 = runtime.monotonic()

    def now_us(self) -> int:
        """The start time plus the event loop's elapsed time, in microseconds."""
        return self._start_us + round((self._runtime.monotonic() - self._t0) * US_PER_S)


class _InlineTx(Session):
    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__()
        self._conn = conn

    async def _end(self, commit: bool) -> None:
        sqlite_conn.finish(self._conn, commit)

    async def run(self, plan: Plan[T]) -> T:
        self.check_open(plan)
        value, wakes = sqlite_conn.run_in_tx(self._conn, plan)
        self._wakes.extend(wakes)
        return value

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        self.check_open()
        return sqlite_conn.execute_user(self._conn, sql, params)


class InlineSqliteExecutor:
    """Runs each plan to completion right away, in the calling task."""

    dialect = SqliteDialect()
    exclusive_transactions = True

    def __init__(self, runtime: Runtime, conn: sqlite3.Connection) -> None:
        self._runtime = runtime
        self._conn = conn
        self._slot = runtime.lock()
        self._lifecycle = Lifecycle("store")

    separate_readers = False

    async def run(self, plan: Plan[T], *, bulk: bool = False) -> tuple[T, list[str]]:
        async with self._slot:
            self._lifecycle.check(plan)
            value, wakes = sqlite_conn.run_plan(self._conn, plan, write=not is_read_only(plan))
        await self._runtime.checkpoint()
        return value, wakes

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[_InlineTx]:
        async with self._slot:
            self._lifecycle.check()
            sqlite_conn.begin(self._conn)
            async with transaction_block(_InlineTx(self._conn), self._runtime) as tx:
                yield tx

    def join(self, connection: Any) -> Any:
        raise UsageError("join() is for Postgres connections")

    async def maintain(self, command: str) -> None:
        raise UsageError("the simulated engine needs no maintenance")

    async def listen(self, channel: str) -> None:
        """Every wake is local here."""

    async def unlisten(self, channel: str) -> None:
        """Every wake is local here."""

    async def close(self) -> None:
        if self._lifecycle.close():
            self._conn.close()


@asynccontextmanager
async def open_simulated(
    *, seed: int = 0, start: datetime = DEFAULT_START, runtime: Runtime | None = None
) -> AsyncIterator[Store]:
    """A store for tests: same API as ``open_sqlite``, in memory, on loop time.

    ``seed`` fixes the backoff jitter; ``start`` is the wall-clock instant
    the store's clock shows when it opens. ``runtime`` defaults to the
    driver of the async library running the caller (trio or asyncio).
    """
    if runtime is None:
        runtime = _current_runtime()
    target = f"file:alkstore-sim-{uuid.uuid4().hex}?mode=memory"
    conn = sqlite_conn.connect(target, busy_timeout=0, pragmas={})
    sqlite_conn.ensure_schema(conn)
    core = StoreCore(
        executor=InlineSqliteExecutor(runtime, conn), runtime=runtime,
        clock=LoopClock(runtime, start), hub=WakeHub(runtime), seed=seed,
        notification_retention_us=round(NOTIFICATION_RETENTION_S * US_PER_S),
    )  # fmt: skip
    try:
        yield Store(core)
    finally:
        await core.close()


def _current_runtime() -> Runtime:
    library = sniffio.current_async_library()
    # Imported here: a trio program need not load the asyncio driver, nor
    # the other way round.
    if library == "trio":
        from ..io_trio.runtime import TrioRuntime

        return TrioRuntime()
    if library == "asyncio":
        from ..io_asyncio.runtime import AsyncioRuntime

        return AsyncioRuntime()
    raise UsageError(
        f"open_simulated() runs under trio or asyncio, not {library}; "
        "pass runtime= to use another driver"
    )
