"""Small helpers shared by the contract tests (engine- and driver-agnostic)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alkstore import ManualClock, Store

from . import aio

US = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Generous upper bound for anything that must happen "soon" (a wake crossing
# stores, a background renewal). Tests never wait this long when they pass.
SOON = 5.0
# How long to wait before concluding that something did NOT happen.
QUIET = 0.2


def at(clock: ManualClock, seconds: float = 0.0) -> datetime:
    """The aware datetime ``seconds`` after the clock's current time, exactly."""
    return EPOCH + timedelta(microseconds=clock.now_us() + round(seconds * US))


def placeholders(store: Store, n: int) -> list[str]:
    """The engine's parameter placeholders for the caller's own SQL:
    ``?`` on SQLite, ``$1, $2 ...`` on Postgres."""
    if store.engine == "sqlite":
        return ["?"] * n
    return [f"${i}" for i in range(1, n + 1)]


def orders(store: Store) -> str:
    """The caller's own table for this test. On Postgres it lives in the
    test's own schema, so tests never share it."""
    if store.engine == "sqlite":
        return "orders"
    return f'"{store._core.dialect.schema}".orders'


async def create_orders_table(store: Store) -> None:
    """A table of the caller's own, written through ``tx.execute``."""
    async with store.transaction() as tx:
        await tx.execute(
            f"CREATE TABLE {orders(store)} (id INTEGER PRIMARY KEY, note TEXT NOT NULL)"
        )


async def order_rows(store: Store) -> list[tuple[int, str]]:
    async with store.transaction() as tx:
        rows = await tx.execute(f"SELECT id, note FROM {orders(store)} ORDER BY id")
    return [(int(r[0]), str(r[1])) for r in rows]


async def wait_until(predicate, timeout: float = SOON, step: float = 0.005) -> None:  # type: ignore[no-untyped-def]
    """Poll a synchronous predicate (real time) until it holds."""
    async with aio.fail_after(timeout):
        while True:
            if predicate():
                return
            await aio.sleep(step)


def table(store: Store, name: str) -> str:
    """alkstore's own table ``name`` (``history``, ``queues``, ...) as the
    caller's SQL names it on this store's engine. For tests that write rows
    alkstore has no API for yet (kept history, retention settings)."""
    if store.engine == "sqlite":
        return f"__alkstore_{name}"
    return f'"{store._core.dialect.schema}".{name}'


async def execute(store: Store, sql: str, *params: object) -> list[tuple[object, ...]]:
    """The caller's own SQL in a transaction of its own; ``{}`` in ``sql``
    are the engine's placeholders, in order."""
    async with store.transaction() as tx:
        return await tx.execute(sql.format(*placeholders(store, len(params))), params)


async def add_history(
    store: Store,
    job_id: int,
    queue: str,
    outcome: str,
    *,
    finished_at_us: int,
    payload: str = '"done"',
    worker: str | None = "w",
    error: str | None = None,
    attempts: int = 1,
) -> None:
    """A finished job in the queue's history, as a queue that keeps history
    records it when the job is acked or cancelled."""
    await execute(
        store,
        f"INSERT INTO {table(store, 'history')} (id, queue, outcome, payload, priority, "
        "attempts, max_attempts, run_at, created_at, finished_at, worker, last_error, "
        "prune_at) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
        job_id, queue, outcome, payload, 0, attempts, 3, finished_at_us - 2 * US,
        finished_at_us - 3 * US, finished_at_us, worker, error, finished_at_us + 3600 * US,
    )  # fmt: skip


async def set_retention(
    store: Store, queue: str, *, history_us: int | None, dead_us: int | None
) -> None:
    """A queue's retention settings, as the ``queues`` table keeps them."""
    await execute(
        store,
        f"INSERT INTO {table(store, 'queues')} (name, paused, history_us, dead_us) "
        "VALUES ({}, {}, {}, {}) ON CONFLICT (name) DO UPDATE SET "
        "history_us = excluded.history_us, dead_us = excluded.dead_us",
        queue, False, history_us, dead_us,
    )  # fmt: skip


def alkstore_table(store: Store, name: str) -> str:
    """One of alkstore's own tables, for reading rows no API returns."""
    if store.engine == "sqlite":
        return f"__alkstore_{name}"
    return f'"{store._core.dialect.schema}"."{name}"'


async def history_rows(store: Store) -> list[dict[str, object]]:
    """Every row of the history table (finished jobs kept by retention), by id."""
    columns = ("id", "queue", "outcome", "attempts", "worker", "finished_at", "prune_at",
               "last_error", "payload")  # fmt: skip
    async with store.transaction() as tx:
        rows = await tx.execute(
            f"SELECT {', '.join(columns)} FROM {alkstore_table(store, 'history')} ORDER BY id"
        )
    return [dict(zip(columns, row, strict=True)) for row in rows]


async def count_rows(store: Store, name: str) -> int:
    """How many rows one of alkstore's tables holds."""
    async with store.transaction() as tx:
        ((n,),) = await tx.execute(f"SELECT COUNT(*) FROM {alkstore_table(store, name)}")
    return int(n)
