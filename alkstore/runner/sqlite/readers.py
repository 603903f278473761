"""Reader connections: where a SQLite store runs its read-only plans.

WAL lets readers run beside the one writer, so a read never waits for the
write lock, neither this store's writer slot nor another process's writer.
Each read-only plan (marked by the core: ``ReadPlan``) takes a connection
from a small pool, runs in one deferred transaction on a worker thread (one
hop, as a write does), and gives the connection back. Reader connections are
``query_only``: nothing can write through them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from ...engines.sqlite import control
from ...protocol.plan import Plan
from ..pool import Pool
from ..runtime import Runtime
from . import conn as sqlite_conn
from .file import DatabaseFile

T = TypeVar("T")


class SqliteReaders:
    def __init__(
        self,
        runtime: Runtime,
        connect: Callable[[], sqlite3.Connection],
        *,
        size: int,
        file: DatabaseFile | None = None,
    ) -> None:
        self._runtime = runtime
        self._connect = connect
        self._file = file
        self._pool: Pool[sqlite3.Connection] = Pool(
            runtime, size=size, open=self._open, discard=_close
        )

    async def _open(self) -> sqlite3.Connection:
        return await self._runtime.run_in_thread(self._open_now)

    def _open_now(self) -> sqlite3.Connection:
        if self._file is not None:
            self._file.check()  # else connecting would create a fresh file there
        return sqlite_conn.set_up(self._connect(), control.QUERY_ONLY)

    async def run(self, plan: Plan[T]) -> T:
        def read(conn: sqlite3.Connection) -> Any:
            # Before: a reader opened since would read whatever is at the
            # path now. After: one opened before read the lost file's data.
            if self._file is not None:
                self._file.check()
            value = sqlite_conn.run_plan(conn, plan, write=False)[0]
            if self._file is not None:
                self._file.check()
            return value

        async with self._pool.connection() as conn:
            result: T = await self._runtime.run_in_thread(lambda: read(conn))
        return result

    def close(self) -> None:
        self._pool.close()


def _close(conn: sqlite3.Connection) -> None:
    sqlite_conn.close(conn)
