"""The Postgres executor: each plan on a pooled connection, in its own transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ..engines.postgres import control
from ..protocol.dialect import Dialect
from ..protocol.errors import Closed
from ..protocol.plan import Plan, Statement, noting_wakes, run_async
from .pg_conn import PgConnection
from .pg_listener import PgListener
from .pg_pool import PgPool
from .runtime import Runtime

T = TypeVar("T")


async def drive(conn: PgConnection, plan: Plan[T], wakes: list[str]) -> T:
    """Run a plan's statements one after another on ``conn``."""
    return await run_async(plan, noting_wakes(conn.execute, wakes))


async def end_transaction(runtime: Runtime, conn: PgConnection, commit: bool) -> None:
    if conn.broken:
        return
    if commit:
        await conn.command(control.COMMIT)
        conn.in_transaction = False
        return
    with runtime.shield():
        await conn.command(control.ROLLBACK)
    conn.in_transaction = False


async def run_in_transaction(
    runtime: Runtime, conn: PgConnection, plan: Plan[T], wakes: list[str]
) -> T:
    """BEGIN, the plan, COMMIT; ROLLBACK (shielded) if anything fails."""
    await conn.command(control.BEGIN)
    conn.in_transaction = True
    try:
        value = await drive(conn, plan, wakes)
    except BaseException:
        plan.close()
        await end_transaction(runtime, conn, False)
        raise
    await end_transaction(runtime, conn, True)
    return value


class PgTx:
    """A caller's transaction: each step in a savepoint, so a failed step is
    undone alone and the transaction stays usable (as on SQLite)."""

    def __init__(self, runtime: Runtime, conn: PgConnection) -> None:
        self._runtime = runtime
        self._conn = conn
        self._wakes: list[str] = []
        self.open = True

    @property
    def wakes(self) -> list[str]:
        return self._wakes

    async def _step(self, body: Any) -> Any:
        if not self.open:
            raise Closed("transaction is closed")
        conn = self._conn
        await conn.command(control.STEP_SAVEPOINT)
        try:
            value = await body()
        except BaseException:
            if not conn.broken:
                with self._runtime.shield():
                    await conn.command(control.STEP_ROLLBACK)
                    await conn.command(control.STEP_RELEASE)
            raise
        await conn.command(control.STEP_RELEASE)
        return value

    async def run(self, plan: Plan[T]) -> T:
        if not self.open:
            plan.close()
            raise Closed("transaction is closed")
        wakes: list[str] = []
        value = await self._step(lambda: drive(self._conn, plan, wakes))
        self._wakes.extend(wakes)
        return value  # type: ignore[no-any-return]

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if isinstance(params, dict):
            from ..protocol.errors import InvalidArgument

            raise InvalidArgument("on Postgres, tx.execute takes positional $1, $2 ... params")
        statement = Statement(sql, tuple(params))

        async def body() -> list[tuple[Any, ...]]:
            return await self._conn.rows(statement)

        return await self._step(body)  # type: ignore[no-any-return]


class PgExecutor:
    notify_payload_limit: int | None = 8000
    exclusive_transactions = False

    def __init__(
        self, runtime: Runtime, pool: PgPool, dialect: Dialect, listener: PgListener
    ) -> None:
        self._runtime = runtime
        self._pool = pool
        self._dialect = dialect
        self._listener = listener
        self._closed = False

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    async def run(self, plan: Plan[T], *, write: bool = True) -> tuple[T, list[str]]:
        if self._closed:
            plan.close()
            raise Closed("store is closed")
        wakes: list[str] = []
        async with self._pool.connection() as conn:
            value = await run_in_transaction(self._runtime, conn, plan, wakes)
        return value, wakes

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgTx]:
        if self._closed:
            raise Closed("store is closed")
        async with self._pool.connection() as conn:
            await conn.command(control.BEGIN)
            conn.in_transaction = True
            tx = PgTx(self._runtime, conn)
            try:
                yield tx
            except BaseException:
                tx.open = False
                await end_transaction(self._runtime, conn, False)
                raise
            tx.open = False
            try:
                await end_transaction(self._runtime, conn, True)
            except BaseException:
                await end_transaction(self._runtime, conn, False)
                raise

    def join(self, connection: Any) -> Any:
        from .pg_join import JoinedTx

        return JoinedTx(self._runtime, connection)

    async def listen(self, channel: str) -> None:
        await self._listener.listen(channel)

    async def unlisten(self, channel: str) -> None:
        await self._listener.unlisten(channel)

    async def close(self) -> None:
        self._closed = True
        self._pool.close()
        self._listener.close()
