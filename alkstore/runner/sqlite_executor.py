"""The SQLite executor: one writer slot, one hop to a thread per plan."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ..engines.sqlite import SqliteDialect
from ..protocol.errors import Closed
from ..protocol.plan import Plan
from . import sqlite_conn
from .runtime import Runtime

T = TypeVar("T")


class SqliteTx:
    def __init__(self, runtime: Runtime, conn: sqlite3.Connection) -> None:
        self._runtime = runtime
        self._conn = conn
        self._wakes: list[str] = []
        self.open = True

    @property
    def wakes(self) -> list[str]:
        return self._wakes

    async def run(self, plan: Plan[T]) -> T:
        if not self.open:
            raise Closed("transaction is closed")
        value, wakes = await self._runtime.run_in_thread(
            lambda: sqlite_conn.run_in_tx(self._conn, plan)
        )
        self._wakes.extend(wakes)
        return value

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if not self.open:
            raise Closed("transaction is closed")
        return await self._runtime.run_in_thread(
            lambda: sqlite_conn.execute_user(self._conn, sql, params)
        )


class SqliteExecutor:
    """Every write goes through one connection guarded by the writer slot.

    SQLite admits one writer at a time anyway; queueing writers here, in the
    event loop, is cheaper than letting them collide on the file lock.
    """

    dialect = SqliteDialect()
    notify_payload_limit: int | None = None

    def __init__(self, runtime: Runtime, conn: sqlite3.Connection) -> None:
        self._runtime = runtime
        self._conn = conn
        self._slot = runtime.lock()
        self._closed = False

    async def run(self, plan: Plan[T], *, write: bool = True) -> tuple[T, list[str]]:
        async with self._slot:
            if self._closed:
                plan.close()
                raise Closed("store is closed")
            return await self._runtime.run_in_thread(
                lambda: sqlite_conn.run_plan(self._conn, plan, write=write)
            )

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteTx]:
        async with self._slot:
            if self._closed:
                raise Closed("store is closed")
            conn = self._conn
            await self._runtime.run_in_thread(lambda: sqlite_conn.begin(conn))
            tx = SqliteTx(self._runtime, conn)
            committed = False
            try:
                yield tx
                tx.open = False
                await self._runtime.run_in_thread(lambda: sqlite_conn.finish(conn, True))
                committed = True
            finally:
                tx.open = False
                if not committed:
                    # Shielded: a cancelled caller must still leave the
                    # connection outside any transaction.
                    with self._runtime.shield():
                        await self._runtime.run_in_thread(
                            lambda: sqlite_conn.finish(conn, False)
                        )

    async def close(self) -> None:
        with self._runtime.shield():
            async with self._slot:
                if self._closed:
                    return
                self._closed = True
                await self._runtime.run_in_thread(lambda: sqlite_conn.close(self._conn))
