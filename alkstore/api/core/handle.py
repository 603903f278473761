"""``StoreCore``: the narrow handle every facade and service takes.

A store is made of an executor (runs plans on the engine), a runtime (how
the driver waits, spawns and cancels), a clock, a wake hub and a telemetry
seam. The public ``Store`` composes the facades over one ``StoreCore``; the
facades (``Queue``, ``Stream``, ...) and the services (the worker, the
scheduler, housekeeping) hold the core, never the ``Store``, so nothing
below ``Store`` knows it. The openers (``alkstore/open``) build the core and
hand it its background task group.
"""

from __future__ import annotations

import contextvars
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ...protocol.dialect import Dialect
from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.plan import Plan, is_read_only
from ...protocol.values.errors import CommitUnknown, UsageError
from ...runner.executor import Executor, TxSession
from ...runner.hub import WakeHub
from ...runner.runtime import Clock, Runtime, TaskGroup
from .ops import read_only_refusal
from .telemetry import NULL_TELEMETRY, Telemetry
from .wakes import WakeReceiver

T = TypeVar("T")

# The stores whose transaction the current task (or a task it spawned) is
# inside. On an engine whose transaction holds the only writer (SQLite), an
# auto-commit call from inside would wait for the transaction it is part of.
_IN_TRANSACTION: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "alkstore_in_transaction", default=frozenset()
)


class StoreCore:
    """Run a plan, read the clock, draw jitter, wake this process's
    receivers, and the rest every operation needs, over one database."""

    def __init__(
        self,
        *,
        executor: Executor,
        runtime: Runtime,
        clock: Clock,
        hub: WakeHub,
        seed: int | None = None,
        read_only: bool = False,
        notification_retention_us: int | None = None,
        vacuum: bool = False,
        origin: str | None = None,
    ) -> None:
        self.executor = executor
        self.dialect: Dialect = executor.dialect
        self.runtime = runtime
        self.clock = clock
        self.hub = hub
        self.read_only = read_only
        # Identifies this store's notifications so its own watcher skips them.
        self.origin = origin if origin is not None else new_origin()
        self.lifecycle = Lifecycle("store")
        # How long housekeeping keeps notification rows (SQLite's; None: the
        # engine has none).
        self.notification_retention_us = notification_retention_us
        # Whether housekeeping vacuums the churning tables when they are due
        # (an engine whose dialect is Vacuuming: Postgres's ``vacuum`` option).
        self.vacuum = vacuum
        # Replaced by ``alkstore.otel.instrument``; never None.
        self.telemetry: Telemetry = NULL_TELEMETRY
        # The task group of the block that opened the store (its background
        # tasks); None for a store opened without one (``open_simulated``).
        self.background: TaskGroup | None = None
        self._rng = random.Random(seed)

    # -- what every operation reads ------------------------------------------------
    def now_us(self) -> int:
        return self.clock.now_us()

    def draw(self) -> float:
        """A uniform draw in [0, 1) for backoff jitter (seedable)."""
        return self._rng.random()

    @property
    def closed(self) -> bool:
        return self.lifecycle.closed

    def check_writable(self, what: str) -> None:
        """``UsageError`` if the store was opened read-only."""
        if self.read_only:
            raise read_only_refusal(what)

    # -- running plans -------------------------------------------------------------
    async def run(self, plan: Plan[T], bulk: bool = False) -> T:
        """Run ``plan`` in a transaction of its own. ``bulk``: its work grows
        with its input or with the data (an engine keeps it off the event
        loop's thread). ``core.run(*ops.stats(...))`` takes an operation's
        ``(plan, bulk)`` as it comes."""
        self.lifecycle.check(plan)
        if self.read_only and not is_read_only(plan):
            plan.close()
            self.check_writable(getattr(plan, "__name__", "this operation"))
        executor = self.executor
        if (
            executor.exclusive_transactions
            and id(self) in _IN_TRANSACTION.get()
            and not (executor.separate_readers and is_read_only(plan))
        ):
            plan.close()
            raise reentry()
        # Every operation is a cancellation point at its start: its waits
        # are shielded (work handed to the database is not abandoned), so a
        # cancel that came before it must be taken before anything is done.
        await self.runtime.cancel_point()
        try:
            value, wakes = await executor.run(plan, bulk=bulk)
        except CommitUnknown as exc:
            if exc.wakes:
                self.hub.wake(exc.wakes)  # it may have committed: look again
            raise
        if wakes:
            self.hub.wake(wakes)
        return value

    async def maintain(self, command: str) -> None:
        """Run a maintenance command of the dialect's (Postgres's ``VACUUM``)
        outside any transaction."""
        self.lifecycle.check()
        self.check_writable("maintenance")
        await self.runtime.cancel_point()
        await self.executor.maintain(command)

    # -- transactions ----------------------------------------------------------------
    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[TxSession]:
        """A caller's transaction on the executor: committed when the block
        ends normally, rolled back when it raises; its wakes fire after a
        commit (and after an unknown outcome: it may have committed)."""
        self.lifecycle.check()
        self.check_writable("a transaction")
        inside = _IN_TRANSACTION.get()
        if self.executor.exclusive_transactions and id(self) in inside:
            raise reentry()
        await self.runtime.cancel_point()
        # Committed or rolled back inside the block (``end_transaction``,
        # which woke already): the block's end then does nothing more.
        ended_inside = False
        try:
            async with self.executor.transaction() as session:
                marker = _IN_TRANSACTION.set(inside | {id(self)})
                try:
                    yield session
                finally:
                    _IN_TRANSACTION.reset(marker)
                    ended_inside = session.ended
        except CommitUnknown as exc:
            if not ended_inside:
                self.hub.wake(exc.wakes)  # it may have committed: look again
            raise
        if not ended_inside and session.wakes:
            self.hub.wake(session.wakes)

    async def end_transaction(self, session: TxSession, commit: bool) -> None:
        """Commit or roll back ``session`` now (inside its block), waking
        after a commit."""
        try:
            await session.finish(commit)
        except CommitUnknown as exc:
            self.hub.wake(exc.wakes)
            raise
        if commit and session.wakes:
            self.hub.wake(session.wakes)

    def join(self, connection: Any) -> Any:
        """A session riding in the application's own transaction."""
        self.lifecycle.check()
        self.check_writable("join()")
        return self.executor.join(connection)

    # -- wakes -----------------------------------------------------------------------
    def subscribe(self, channel: str, *also: str) -> WakeReceiver:
        """A receiver on any channel, internal ones included (no name check),
        and on ``also``'s: any of them wakes it."""
        return WakeReceiver(self.hub, channel, self.executor, self.lifecycle, also=also)

    # -- lifecycle -------------------------------------------------------------------
    async def close(self) -> bool:
        """Close the store: its wake receivers close, its connections end, and
        every later operation raises ``Closed``. False when it was closed already."""
        if not self.lifecycle.close():
            return False
        self.hub.close_all()
        await self.executor.close()
        return True


def new_origin() -> str:
    """An identity for a store's notifications (its watcher skips its own)."""
    return secrets.token_hex(8)


def reentry() -> UsageError:
    return UsageError(
        "this store's own methods cannot run inside its transaction on this engine "
        "(the transaction holds the only writer): use the tx.* methods, or call after the block"
    )
