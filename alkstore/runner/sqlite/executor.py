"""The SQLite executor: plans go to the writer thread, one hop each."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ...engines.sqlite import SqliteDialect, control
from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.plan import Plan, is_read_only
from ...protocol.values.errors import Closed
from ..executor import Session, transaction_block
from ..runtime import Runtime
from . import conn as sqlite_conn
from .file import DatabaseFile
from .inline import InlineRunner
from .readers import SqliteReaders
from .watcher import SqliteWatcher
from .writer import Checkpoint, PlanItem, SqliteWriter, TxItem, TxStep

T = TypeVar("T")


class SqliteTx(Session):
    def __init__(self, runtime: Runtime, item: TxItem) -> None:
        super().__init__()
        self._runtime = runtime
        self._item = item

    async def _step(self, kind: str, fn: Any = None) -> Any:
        if kind == "run":
            # A step is an operation: a cancel that came before it lands
            # here, before it is handed to the writer (its wait is shielded).
            await self._runtime.cancel_point()
        done = self._runtime.completion()
        self._item.steps.put(TxStep(kind, done, fn))
        return await done.wait()

    async def run(self, plan: Plan[T]) -> T:
        self.check_open(plan)
        value, wakes = await self._step("run", lambda conn: sqlite_conn.run_in_tx(conn, plan))
        self._wakes.extend(wakes)
        return value  # type: ignore[no-any-return]

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        self.check_open()
        return await self._step("run", lambda conn: sqlite_conn.execute_user(conn, sql, params))  # type: ignore[no-any-return]

    async def _end(self, commit: bool) -> None:
        if commit:
            await self._step("commit")
            return
        # Shielded: a cancelled caller must still end the transaction, or
        # the writer thread would wait for it forever.
        with self._runtime.shield():
            await self._step("rollback")


class SqliteExecutor:
    """Writes go through the writer thread (the writer slot); read-only
    plans go to reader connections (``SqliteReaders``), when there are any.

    SQLite admits one writer at a time anyway; queueing writers in-process is
    cheaper than letting them collide on the file lock, and lets concurrent
    plans share one commit. Reads never wait for it.
    """

    dialect = SqliteDialect()
    exclusive_transactions = True

    def __init__(
        self,
        runtime: Runtime,
        conn: sqlite3.Connection,
        readers: SqliteReaders | None = None,
        file: DatabaseFile | None = None,
        inline_conn: sqlite3.Connection | None = None,
        checkpoint_frames: int = control.AUTOCHECKPOINT_PAGES,
        *,
        watcher: SqliteWatcher | None = None,
        busy_timeout: float = 0.0,
    ) -> None:
        self._runtime = runtime
        # The store's wake source for other processes' commits (its opener
        # runs it; none for a private in-memory database).
        self.watcher = watcher
        # ``conn``'s own busy timeout is 0: the writer waits for the lock
        # itself, for ``busy_timeout`` (SqliteWriter._waiting_for_the_lock).
        self._writer = SqliteWriter(conn, file=file, busy_timeout=busy_timeout)
        self._readers = readers
        self._lifecycle = Lifecycle("store")
        self._inline: InlineRunner | None = None
        if inline_conn is not None and file is not None:
            self._inline = InlineRunner(
                runtime,
                inline_conn,
                write_elsewhere=self._write,
                read_elsewhere=self._read,
                checkpoint=self._checkpoint,
                checkpoint_frames=checkpoint_frames,
                file=file,
            )

    @property
    def separate_readers(self) -> bool:
        """Reads run apart from the writer (and so beside a transaction)."""
        return self._readers is not None

    async def run(self, plan: Plan[T], *, bulk: bool = False) -> tuple[T, list[str]]:
        self._lifecycle.check(plan)
        if self._inline is not None and not bulk:
            return await self._inline.run(plan)
        if self._readers is not None and is_read_only(plan):
            return await self._read(plan)
        return await self._write(plan)

    async def _write(self, plan: Plan[T]) -> tuple[T, list[str]]:
        """On the writer thread, which waits for the lock."""
        done = self._runtime.completion()
        try:
            self._writer.submit(PlanItem(plan, done))
        except Closed:
            plan.close()
            raise
        return await done.wait()  # type: ignore[no-any-return]

    async def _read(self, plan: Plan[T]) -> tuple[T, list[str]]:
        if self._readers is None:
            return await self._write(plan)
        return await self._readers.run(plan), []

    def _checkpoint(self) -> Checkpoint | None:
        item = Checkpoint()
        try:
            self._writer.submit(item)
        except Closed:
            return None
        return item

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteTx]:
        begun = self._runtime.completion()
        item = TxItem(begun)
        self._writer.submit(item)
        await begun.wait()
        async with transaction_block(SqliteTx(self._runtime, item), self._runtime) as tx:
            yield tx

    def join(self, connection: Any) -> Any:
        from ...protocol.values.errors import UsageError

        raise UsageError(
            "join() is for Postgres connections; on SQLite use store.transaction() "
            "and tx.execute() for your own SQL"
        )

    async def maintain(self, command: str) -> None:
        from ...protocol.values.errors import UsageError

        raise UsageError("SQLite reuses deleted rows' pages itself: it needs no maintenance")

    async def listen(self, channel: str) -> None:
        """The watcher sees every channel's notifications; a parked one (no
        receiver was open) takes its baseline now, before this returns."""
        if self.watcher is not None:
            self.watcher.attach()

    async def unlisten(self, channel: str) -> None:
        """Nothing to do (see ``listen``)."""

    async def close(self) -> None:
        if not self._lifecycle.close():
            return
        if self._readers is not None:
            self._readers.close()
        if self._inline is not None:
            self._inline.close()
        self._writer.stop()
        with self._runtime.shield():
            await self._runtime.run_in_thread(self._writer.join)
