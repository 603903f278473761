"""The Postgres executor: each plan on a pooled connection, in its own transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from ...engines.postgres import control
from ...protocol.dialect import Dialect
from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.plan import Plan, ReadPlan, Statement, is_read_only, noting_wakes, run_async
from ...protocol.values.errors import CommitUnknown, DatabaseError
from ..executor import Session, transaction_block
from ..runtime import Runtime
from .conn import PgConnection
from .listener import PgListener
from .pool import PgPool

T = TypeVar("T")


async def drive(
    conn: PgConnection, plan: Plan[T], wakes: list[str], *, defer: bool = False
) -> T:
    """Run a plan's statements one after another on ``conn``. ``defer``: a
    statement whose result the plan does not read (``Fetch.NONE``) goes out
    with the next round trip (see ``PgConnection``); its error, if any, fails
    that round trip, within the same transaction."""

    def execute(statement: Statement) -> Any:
        return conn.execute(statement, defer=defer)

    return await run_async(plan, noting_wakes(execute, wakes))


class _Committing:
    """Drives a plan in a transaction of its own, sending the ``COMMIT``
    with the plan's ``last`` statement when it has one (pipeline mode): a
    one-statement write is then a single round trip. ``committed`` says
    whether that happened, so the caller commits only otherwise.

    ``alone``: the plan's first statement, if it is also its last, is sent
    without the ``BEGIN`` waiting to go out with it and with no ``COMMIT``:
    a statement alone before a pipeline's sync point is a transaction of its
    own (committed at the sync, rolled back if it fails), the same atomic
    write at READ COMMITTED with two statements fewer for both ends (a
    single enqueue)."""

    __slots__ = ("alone", "committed", "conn", "runtime", "started", "timeout", "wakes")

    def __init__(
        self,
        runtime: Runtime,
        conn: PgConnection,
        wakes: list[str],
        timeout: float,
        *,
        alone: bool = False,
    ) -> None:
        self.runtime = runtime
        self.conn = conn
        self.wakes = wakes
        self.timeout = timeout
        self.alone = alone
        self.committed = False
        self.started = False

    async def execute(self, statement: Statement) -> Any:
        if statement.wakes:
            self.wakes.extend(statement.wakes)
        conn = self.conn
        first, self.started = not self.started, True
        if statement.final and conn.pipelined:
            if first and self.alone and conn.drop_deferred():  # (the BEGIN)
                value = await commit_alone(self.runtime, conn, statement, self.timeout, self.wakes)
            else:
                value = await commit_with(self.runtime, conn, statement, self.timeout, self.wakes)
            self.committed = True
            return value
        return await conn.execute(statement, defer=True)


async def begin_transaction(conn: PgConnection, sql: str = control.BEGIN) -> None:
    """Open a transaction; on a pipelined connection BEGIN goes out with the
    first statement (its result is only checked)."""
    conn.begun_at = conn.roundtrips
    if conn.pipelined:
        conn.defer_command(sql)
    else:
        await conn.command(sql)
    conn.in_transaction = True


# Longest a COMMIT or ROLLBACK is waited for once sent, cancelled caller or
# not (the default of ``PostgresOptions.commit_timeout``).
END_TIMEOUT = 10.0


async def rollback(runtime: Runtime, conn: PgConnection, timeout: float) -> None:
    """Shielded and bounded: past ``timeout`` the connection is dropped (the
    server rolls back when it notices) rather than hold up a cancelled caller."""
    if conn.broken:
        return
    if conn.drop_deferred() and conn.roundtrips == conn.begun_at:
        # BEGIN itself never went out: there is nothing to roll back.
        conn.in_transaction = False
        return
    with runtime.shield(timeout):
        await conn.command(control.ROLLBACK)
    conn.in_transaction = False


async def commit_transaction(
    runtime: Runtime, conn: PgConnection, timeout: float, wakes: list[str]
) -> None:
    """Send COMMIT and learn its outcome, even if the caller is cancelled
    meanwhile (the cancellation is delivered afterwards): a cancelled caller
    must never be told "cancelled" about work that committed.

    Returns when it committed; raises ``DatabaseError`` when the server
    refused (rolled back), ``CommitUnknown`` when the answer never came (the
    connection was lost, or ``timeout`` passed)."""
    await _committing(runtime, conn, timeout, wakes, lambda: conn.command(control.COMMIT))


async def commit_with(
    runtime: Runtime, conn: PgConnection, statement: Statement, timeout: float, wakes: list[str]
) -> Any:
    """A plan's ``last`` statement and the COMMIT in one round trip, with
    what was deferred; the statement's result. The outcome is learned as
    ``commit_transaction`` learns it (shielded, bounded by ``timeout``): when
    the statement or anything before it failed, the server skipped the
    COMMIT and the transaction is rolled back here (that error is raised);
    a refused COMMIT raises ``DatabaseError``; no answer, ``CommitUnknown``."""
    return await _committing(
        runtime, conn, timeout, wakes, lambda: conn.execute_then(statement, control.COMMIT)
    )


async def commit_alone(
    runtime: Runtime, conn: PgConnection, statement: Statement, timeout: float, wakes: list[str]
) -> Any:
    """A plan's one statement as a transaction of its own (no BEGIN, no
    COMMIT: the pipeline's sync point commits it); its result, the outcome
    learned as ``commit_transaction`` learns it."""
    return await _committing(runtime, conn, timeout, wakes, lambda: conn.execute(statement))


async def _committing(
    runtime: Runtime,
    conn: PgConnection,
    timeout: float,
    wakes: list[str],
    send: Callable[[], Awaitable[Any]],
) -> Any:
    """The round trip ``send`` that carries a COMMIT, shielded and bounded
    by ``timeout``, and what its outcome means; its value."""
    lost_already = conn.broken  # (a local: the round trip below changes conn.broken)
    if lost_already:
        # Lost before COMMIT was sent: the server rolled back.
        raise DatabaseError("PostgreSQL: connection lost before the commit was sent; rolled back")
    value = None
    with runtime.shield(timeout) as scope:
        try:
            value = await send()
        except DatabaseError as exc:
            if not conn.broken:
                if conn.skipped_last:
                    # A statement sent with the COMMIT failed, so the server
                    # skipped the COMMIT: the transaction is open, aborted.
                    await conn.command(control.ROLLBACK)
                conn.in_transaction = False  # the server ended it: rolled back
                raise
            unknown = CommitUnknown(
                f"PostgreSQL: connection lost while committing; it may or may not have committed "
                f"({exc})",
                tuple(wakes),
            )
            raise unknown from (exc.__cause__ or exc)  # the driver's error, as for any
    if scope.cancelled_caught:
        raise CommitUnknown(
            f"PostgreSQL: no answer to the commit within {timeout} s; the connection was dropped "
            "and the transaction may or may not have committed",
            tuple(wakes),
        )
    conn.in_transaction = False
    return value


async def run_in_transaction(
    runtime: Runtime,
    conn: PgConnection,
    plan: Plan[T],
    wakes: list[str],
    timeout: float,
    *,
    begin: str = control.BEGIN,
) -> T:
    """BEGIN, the plan, COMMIT; ROLLBACK (shielded) if anything before COMMIT
    fails. The COMMIT goes with the plan's ``last`` statement if it has one."""
    await begin_transaction(conn, begin)
    # Only a plain BEGIN may be left out: a read's isolation needs its own.
    driver = _Committing(runtime, conn, wakes, timeout, alone=begin == control.BEGIN)
    try:
        value = await run_async(plan, driver.execute)
    except BaseException:
        plan.close()
        if not driver.committed and conn.in_transaction:
            await rollback(runtime, conn, timeout)
        raise
    if not driver.committed:
        await commit_transaction(runtime, conn, timeout, wakes)
    return value


class PgTx(Session):
    """A caller's transaction: each step in a savepoint, so a failed step is
    undone alone and the transaction stays usable (as on SQLite)."""

    def __init__(self, runtime: Runtime, conn: PgConnection, timeout: float) -> None:
        super().__init__()
        self._runtime = runtime
        self._conn = conn
        self._timeout = timeout

    async def _end(self, commit: bool) -> None:
        if commit:
            await commit_transaction(self._runtime, self._conn, self._timeout, self._wakes)
        else:
            await rollback(self._runtime, self._conn, self._timeout)

    async def _step(self, body: Any) -> Any:
        self.check_open()
        conn = self._conn
        await conn.command(control.STEP_SAVEPOINT)
        try:
            value = await body()
        except BaseException:
            if not conn.broken:
                with self._runtime.shield(self._timeout) as scope:
                    await conn.command(control.STEP_ROLLBACK)
                    await conn.command(control.STEP_RELEASE)
                if scope.cancelled_caught:
                    conn.close()  # no answer: the transaction cannot go on
            raise
        await conn.command(control.STEP_RELEASE)
        return value

    async def run(self, plan: Plan[T]) -> T:
        self.check_open(plan)
        wakes: list[str] = []
        value = await self._step(lambda: drive(self._conn, plan, wakes))
        self._wakes.extend(wakes)
        return value  # type: ignore[no-any-return]

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        if isinstance(params, dict):
            from ...protocol.values.errors import InvalidArgument

            raise InvalidArgument("on Postgres, tx.execute takes positional $1, $2 ... params")
        statement = Statement(sql, tuple(params))

        async def body() -> list[tuple[Any, ...]]:
            return await self._conn.rows(statement)

        return await self._step(body)  # type: ignore[no-any-return]


class PgExecutor:
    exclusive_transactions = False

    def __init__(
        self,
        runtime: Runtime,
        pool: PgPool,
        dialect: Dialect,
        listener: PgListener,
        *,
        end_timeout: float = END_TIMEOUT,
    ) -> None:
        self._runtime = runtime
        self._end_timeout = end_timeout
        self._pool = pool
        self._dialect = dialect
        self._listener = listener
        self._lifecycle = Lifecycle("store")

    @property
    def dialect(self) -> Dialect:
        return self._dialect

    separate_readers = True

    async def run(self, plan: Plan[T], *, bulk: bool = False) -> tuple[T, list[str]]:
        self._lifecycle.check(plan)
        if is_read_only(plan):
            return await self._read(plan), []
        wakes: list[str] = []
        async with self._pool.connection() as conn:
            value = await run_in_transaction(self._runtime, conn, plan, wakes, self._end_timeout)
        return value, wakes

    async def _read(self, plan: ReadPlan[T]) -> T:
        """A read-only transaction. It changes nothing, so when its pooled
        connection turns out dead (a terminated backend whose end had not
        reached us yet) it runs again, once, on a fresh one."""
        for last in (False, True):
            async with self._pool.connection() as conn:
                try:
                    return await run_in_transaction(
                        self._runtime, conn, plan, [], self._end_timeout, begin=control.BEGIN_READ
                    )
                except DatabaseError:
                    if last or not conn.broken:
                        raise
            plan = plan.again()
        raise AssertionError("unreachable")  # pragma: no cover

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgTx]:
        self._lifecycle.check()
        runtime, timeout = self._runtime, self._end_timeout
        async with self._pool.connection() as conn:
            await begin_transaction(conn)
            async with transaction_block(PgTx(runtime, conn, timeout), runtime) as tx:
                yield tx

    def join(self, connection: Any) -> Any:
        from .join import JoinedTx

        return JoinedTx(self._runtime, connection)

    async def maintain(self, command: str) -> None:
        self._lifecycle.check()
        # Pooled connections are outside a transaction between plans (each
        # plan sends its own BEGIN), so the command runs on its own. Not
        # bounded by response_timeout: a vacuum takes as long as the table.
        async with self._pool.connection() as conn:
            await conn.command(command, bounded=False)

    async def listen(self, channel: str) -> None:
        await self._listener.listen(channel)

    async def unlisten(self, channel: str) -> None:
        await self._listener.unlisten(channel)

    async def close(self) -> None:
        self._lifecycle.close()
        self._pool.close()
        self._listener.close()
