"""Bad input gets the contract's error, identically on every backend, and
loses nothing. Invariant: every public call given an out-of-range integer,
a name that is not a name, a bad duration, a payload that is not JSON or a
wrong option raises InvalidArgument / InvalidName / ReservedName /
CodecError (never a raw sqlite3/psycopg, Overflow, Type or Attribute
error), and leaves every alkstore table exactly as it was."""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from alkstore import (
    CodecError,
    InvalidArgument,
    InvalidName,
    Job,
    ManualClock,
    ReservedName,
    Store,
    Stream,
    Transaction,
)
from tests.sync_adapter import NotOnSync

from . import aio
from .helpers import SOON, create_orders_table, order_rows, orders, placeholders

# The documented limits (docs/contract.md, docs/queues.md): names of up to
# 1024 characters, a concurrency of up to 10,000, and durations up to the
# span a datetime holds (years 1 to 9999, about 10,000 years).
MAX_NAME_LENGTH = 1024
MAX_CONCURRENCY = 10_000
US_PER_S = 1_000_000
MAX_DURATION_US = (datetime.max - datetime.min) // timedelta(microseconds=1)

BIG = [2**63, 2**70, -(2**63) - 1]
NOT_INTS: list[Any] = [True, 1.5, "1", None, b"1"]
NAMES: list[Any] = [5, None, b"q", "", "a\x00b", "x" * 2000, "\udcff", ["q"]]
DURATIONS: list[Any] = [-1, float("nan"), float("inf"), 1e300, "1", True, timedelta(days=-1),
                        timedelta.max, 10**400, -(10**400)]  # fmt: skip
# Durations a datetime's range holds, ending past the year 9999 from now.
TOO_FAR: list[Any] = [2.6e11, timedelta(days=365 * 8100)]
PAYLOADS: list[Any] = [(1, 2), {"a": (1,)}, {1: 2}, float("nan"), [float("inf")], object(),
                       b"bytes", {1, 2}, datetime.now(UTC), enum.Enum("E", "A").A]  # fmt: skip


class Fixture:
    """A store with one of everything: a queue with a claimed job, a stream,
    a lock, a schedule, to call the methods that need them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.q = store.queue("q")
        self.s: Stream = store.stream("s")

    async def setup(self) -> None:
        await self.q.enqueue_batch([1, 2])
        job = await self.q.claim_one("w")
        assert job is not None
        self.job: Job = job
        await self.s.publish(1)
        # A blocking store (alkstore.sync) has no locks or schedules: the
        # async store beside it takes them.
        other = getattr(self.store, "consumer_side", self.store)
        lock = await other.try_lock("L", "me", 60)
        assert lock is not None
        self.lock = lock
        await other.schedule("every", "q", "@every 1h")


Call = Callable[[Fixture], Awaitable[Any]]


def _cases() -> list[tuple[str, type[Exception], Call]]:
    out: list[tuple[str, type[Exception], Call]] = []

    def case(name: str, error: type[Exception], call: Call) -> None:
        out.append((name, error, call))

    # An option of another name: what Python says of an unknown keyword.
    case("enqueue(prio=1)", TypeError, lambda f: f.q.enqueue(1, prio=1))
    case("enqueue_batch(prio=1)", TypeError, lambda f: f.q.enqueue_batch([1], prio=1))
    case("outbox.enqueue(prio=1)", TypeError, lambda f: f.store.outbox("o").enqueue(1, prio=1))

    for v in [0, -1, *BIG, *NOT_INTS]:
        case(f"claim_batch(n={v!r})", InvalidArgument, lambda f, v=v: f.q.claim_batch("w", v))
        case(f"dead_letters({v!r})", InvalidArgument, lambda f, v=v: f.q.dead_letters(v))
        case(f"read_since(0, limit={v!r})", InvalidArgument,
             lambda f, v=v: f.s.read_since(0, v))  # fmt: skip
        case(f"read_from_consumer(limit={v!r})", InvalidArgument,
             lambda f, v=v: f.s.read_from_consumer("c", v))  # fmt: skip
        case(f"run_once(batch={v!r})", InvalidArgument,
             lambda f, v=v: f.store.outbox("o").run_once(_deliver, batch=v))  # fmt: skip
        case(f"subscribe(batch={v!r})", InvalidArgument,
             lambda f, v=v: _sync(lambda: f.s.subscribe("c", batch=v)))  # fmt: skip
        case(f"outbox.dead_letters({v!r})", InvalidArgument,
             lambda f, v=v: f.store.outbox("o").dead_letters(v))  # fmt: skip
        case(f"subscribe().read_since(0, {v!r})", InvalidArgument,
             lambda f, v=v: _receiver_read_since(f, 0, v))  # fmt: skip
    for v in [*BIG, *NOT_INTS]:
        for method in ("get_job", "cancel", "requeue_dead"):
            case(f"{method}({v!r})", InvalidArgument,
                 lambda f, v=v, m=method: getattr(f.q, m)(v))  # fmt: skip
        case(f"ack_batch([{v!r}])", InvalidArgument, lambda f, v=v: f.q.ack_batch([1, v], "w"))
    for v in [-1, *BIG, *NOT_INTS]:
        case(f"read_since({v!r})", InvalidArgument, lambda f, v=v: f.s.read_since(v))
        case(f"save_offset({v!r})", InvalidArgument, lambda f, v=v: f.s.save_offset("c", v))
        case(f"trim_to({v!r})", InvalidArgument, lambda f, v=v: f.s.trim_to(v))
        case(f"subscribe().read_since({v!r})", InvalidArgument,
             lambda f, v=v: _receiver_read_since(f, v, 10))  # fmt: skip
    for v in [2**31, -(2**31) - 1, *BIG, True, 1.5, "1"]:
        case(f"enqueue(priority={v!r})", InvalidArgument, lambda f, v=v: f.q.enqueue(1, priority=v))
        case(f"enqueue_batch(priority={v!r})", InvalidArgument,
             lambda f, v=v: f.q.enqueue_batch([1, 2], priority=v))  # fmt: skip
        case(f"schedule(priority={v!r})", InvalidArgument,
             lambda f, v=v: f.store.schedule("x", "q", "@every 1s", priority=v))  # fmt: skip
    for v in [0, -1, 2**63, True, 1.5]:
        case(f"enqueue(max_attempts={v!r})", InvalidArgument,
             lambda f, v=v: f.q.enqueue(1, max_attempts=v))  # fmt: skip
        case(f"enqueue_batch(max_attempts={v!r})", InvalidArgument,
             lambda f, v=v: f.q.enqueue_batch([1, 2], max_attempts=v))  # fmt: skip
        case(f"outbox(max_attempts={v!r})", InvalidArgument,
             lambda f, v=v: _sync(lambda: f.store.outbox("o", max_attempts=v)))  # fmt: skip
        case(f"schedule(max_attempts={v!r})", InvalidArgument,
             lambda f, v=v: f.store.schedule("x", "q", "@every 1s", max_attempts=v))  # fmt: skip
        case(f"queue(max_attempts={v!r})", InvalidArgument,
             lambda f, v=v: _sync(lambda: f.store.queue("q", max_attempts=v)))  # fmt: skip
    for v in [5, "abc", {"a": 1}, None, b"xy"]:
        case(f"enqueue_batch({v!r})", InvalidArgument, lambda f, v=v: f.q.enqueue_batch(v))
        case(f"ack_batch({v!r})", InvalidArgument, lambda f, v=v: f.q.ack_batch(v, "w"))
    case("release(refund='yes')", InvalidArgument, lambda f: f.job.release(refund="yes"))  # type: ignore[arg-type]
    for v in [5, object(), b"x"]:
        case(f"retry(error={v!r})", InvalidArgument, lambda f, v=v: f.job.retry(error=v))
        case(f"fail(error={v!r})", InvalidArgument, lambda f, v=v: f.job.fail(v))

    for v in NAMES:
        error = InvalidName
        case(f"queue({v!r})", error, lambda f, v=v: _sync(lambda: f.store.queue(v)))
        case(f"stream({v!r})", error, lambda f, v=v: _sync(lambda: f.store.stream(v)))
        case(f"outbox({v!r})", error, lambda f, v=v: _sync(lambda: f.store.outbox(v)))
        case(f"notify({v!r})", error, lambda f, v=v: f.store.notify(v))
        case(f"listen({v!r})", error, lambda f, v=v: _enter(f.store.listen(v)))
        case(f"try_lock({v!r})", error, lambda f, v=v: f.store.try_lock(v, "me", 1))
        case(f"try_lock(owner={v!r})", error, lambda f, v=v: f.store.try_lock("L2", v, 1))
        case(f"claim_one({v!r})", error, lambda f, v=v: f.q.claim_one(v))
        case(f"ack_batch(worker={v!r})", error, lambda f, v=v: f.q.ack_batch([1], v))
        case(f"publish_with_key({v!r})", error, lambda f, v=v: f.s.publish_with_key(v, 1))
        case(f"save_offset(consumer={v!r})", error, lambda f, v=v: f.s.save_offset(v, 1))
        case(f"get_offset({v!r})", error, lambda f, v=v: f.s.get_offset(v))
        case(f"subscribe({v!r})", error, lambda f, v=v: _sync(lambda: f.s.subscribe(v)))
        case(f"schedule({v!r})", error,
             lambda f, v=v: f.store.schedule(v, "q", "@every 1s"))  # fmt: skip
        case(f"schedule(queue={v!r})", error,
             lambda f, v=v: f.store.schedule("x", v, "@every 1s"))  # fmt: skip
        case(f"unschedule({v!r})", error, lambda f, v=v: f.store.unschedule(v))
    for v in [n for n in NAMES if n is not None]:
        case(f"run_once(worker_id={v!r})", InvalidName,
             lambda f, v=v: f.store.outbox("o").run_once(_deliver, worker_id=v))  # fmt: skip
    case("queue(reserved)", ReservedName, lambda f: _sync(lambda: f.store.queue("__alkstore_q")))
    case("notify(reserved)", ReservedName, lambda f: f.store.notify("__alkstore_x"))

    for v in DURATIONS:
        case(f"enqueue(delay={v!r})", InvalidArgument, lambda f, v=v: f.q.enqueue(1, delay=v))
        case(f"enqueue(expires={v!r})", InvalidArgument, lambda f, v=v: f.q.enqueue(1, expires=v))
        case(f"queue(visibility_timeout={v!r})", InvalidArgument,
             lambda f, v=v: _sync(lambda: f.store.queue("q", visibility_timeout=v)))  # fmt: skip
        case(f"try_lock(ttl={v!r})", InvalidArgument,
             lambda f, v=v: f.store.try_lock("L2", "me", v))  # fmt: skip
        case(f"renew({v!r})", InvalidArgument, lambda f, v=v: f.lock.renew(v))
        case(f"heartbeat({v!r})", InvalidArgument, lambda f, v=v: f.job.heartbeat(v))
        case(f"retry(delay={v!r})", InvalidArgument, lambda f, v=v: f.job.retry(delay=v))
        case(f"schedule(expires_after={v!r})", InvalidArgument,
             lambda f, v=v: f.store.schedule("x", "q", "@every 1s", expires_after=v))  # fmt: skip
        case(f"subscribe(backstop={v!r})", InvalidArgument,
             lambda f, v=v: _sync(lambda: f.s.subscribe("c", backstop=v)))  # fmt: skip
        case(f"work(poll_interval={v!r})", InvalidArgument,
             lambda f, v=v: f.q.work(_handler, poll_interval=v))  # fmt: skip
        case(f"hold_lock(poll={v!r})", InvalidArgument,
             lambda f, v=v: _enter(f.store.hold_lock("L3", "me", 10, poll=v)))  # fmt: skip
        case(f"hold_lock(ttl={v!r})", InvalidArgument,
             lambda f, v=v: _enter(f.store.hold_lock("L3", "me", v)))  # fmt: skip
        case(f"hold_lock(timeout={v!r})", InvalidArgument,
             lambda f, v=v: _enter(f.store.hold_lock("L3", "me", 10, timeout=v)))  # fmt: skip
        case(f"listen().recv_timeout({v!r})", InvalidArgument,
             lambda f, v=v: _recv_timeout(f.store.listen("ch"), v))  # fmt: skip
        case(f"subscribe().recv_timeout({v!r})", InvalidArgument,
             lambda f, v=v: _recv_timeout(f.s.subscribe("c"), v))  # fmt: skip
        case(f"run_scheduler(max_sleep={v!r})", InvalidArgument,
             lambda f, v=v: f.store.run_scheduler(max_sleep=v))  # fmt: skip
        case(f"outbox(visibility_timeout={v!r})", InvalidArgument,
             lambda f, v=v: _sync(lambda: f.store.outbox("o", visibility_timeout=v)))  # fmt: skip
        case(f"enqueue_batch(delay={v!r})", InvalidArgument,
             lambda f, v=v: f.q.enqueue_batch([1, 2], delay=v))  # fmt: skip
        case(f"enqueue_batch(expires={v!r})", InvalidArgument,
             lambda f, v=v: f.q.enqueue_batch([1, 2], expires=v))  # fmt: skip
        case(f"outbox.enqueue(delay={v!r})", InvalidArgument,
             lambda f, v=v: f.store.outbox("o").enqueue(1, delay=v))  # fmt: skip
    for v in TOO_FAR:
        # Ending past what a datetime holds: the row could never be read back.
        case(f"heartbeat({v!r})", InvalidArgument, lambda f, v=v: f.job.heartbeat(v))
        case(f"retry(delay={v!r})", InvalidArgument, lambda f, v=v: f.job.retry(delay=v))
        case(f"try_lock(ttl={v!r})", InvalidArgument,
             lambda f, v=v: f.store.try_lock("L2", "me", v))  # fmt: skip
        case(f"renew({v!r})", InvalidArgument, lambda f, v=v: f.lock.renew(v))
        case(f"hold_lock(ttl={v!r})", InvalidArgument,
             lambda f, v=v: _enter(f.store.hold_lock("L3", "me", v)))  # fmt: skip
        case(f"enqueue(delay={v!r})", InvalidArgument, lambda f, v=v: f.q.enqueue(1, delay=v))
        case(f"enqueue(expires={v!r})", InvalidArgument, lambda f, v=v: f.q.enqueue(1, expires=v))
    for v in [0, 0.0]:
        case(f"try_lock(ttl={v!r})", InvalidArgument,
             lambda f, v=v: f.store.try_lock("L2", "me", v))  # fmt: skip
        case(f"hold_lock(poll={v!r})", InvalidArgument,
             lambda f, v=v: _enter(f.store.hold_lock("L3", "me", 10, poll=v)))  # fmt: skip

    for v in PAYLOADS:
        error = CodecError
        case(f"enqueue({v!r})", error, lambda f, v=v: f.q.enqueue(v))
        case(f"enqueue_batch([.., {v!r}])", error, lambda f, v=v: f.q.enqueue_batch([1, v]))
        case(f"publish({v!r})", error, lambda f, v=v: f.s.publish(v))
        case(f"publish_with_key({v!r})", error, lambda f, v=v: f.s.publish_with_key("k", v))
        case(f"notify(payload={v!r})", error, lambda f, v=v: f.store.notify("ch", v))
        case(f"outbox.enqueue({v!r})", error, lambda f, v=v: f.store.outbox("o").enqueue(v))
        case(f"schedule(payload={v!r})", error,
             lambda f, v=v: f.store.schedule("x", "q", "@every 1s", v))  # fmt: skip

    def sync_handler(job: Job) -> None:
        pass

    for v in [sync_handler, lambda job: None, 5, None, functools.partial(sync_handler)]:
        case(f"work({v!r})", InvalidArgument, lambda f, v=v: f.q.work(v))
        case(f"outbox.run_once({v!r})", InvalidArgument,
             lambda f, v=v: f.store.outbox("o").run_once(v))  # fmt: skip
    for v in ["nope", "* * *", 5, None, "@every -1s", "@every 0s", "61 * * * *"]:
        case(f"schedule({v!r})", InvalidArgument,
             lambda f, v=v: f.store.schedule("x", "q", v))  # fmt: skip
    return out


CASES = _cases()

TxCall = Callable[[Transaction], Awaitable[Any]]


def _tx_cases() -> list[tuple[str, type[Exception], TxCall]]:
    """The transaction handle's methods. Each runs inside a transaction that
    goes on to commit, so a refused call that wrote part of its work would
    show (a raised error would roll the whole block back and hide it)."""
    out: list[tuple[str, type[Exception], TxCall]] = []

    def case(name: str, error: type[Exception], call: TxCall) -> None:
        out.append((f"tx.{name}", error, call))

    for v in [-1, *BIG, *NOT_INTS]:
        case(f"save_offset({v!r})", InvalidArgument, lambda tx, v=v: tx.save_offset("s", "c", v))
    for v in NAMES:
        for method in ("enqueue", "outbox_enqueue", "publish", "notify"):
            case(f"{method}({v!r})", InvalidName,
                 lambda tx, v=v, m=method: getattr(tx, m)(v, 1))  # fmt: skip
        case(f"publish_with_key({v!r})", InvalidName,
             lambda tx, v=v: tx.publish_with_key(v, "k", 1))  # fmt: skip
        case(f"publish_with_key(key={v!r})", InvalidName,
             lambda tx, v=v: tx.publish_with_key("s", v, 1))  # fmt: skip
        case(f"save_offset({v!r})", InvalidName, lambda tx, v=v: tx.save_offset(v, "c", 1))
        case(f"save_offset(consumer={v!r})", InvalidName,
             lambda tx, v=v: tx.save_offset("s", v, 1))  # fmt: skip
    for method in ("enqueue", "outbox_enqueue", "publish", "notify"):
        case(f"{method}(reserved)", ReservedName,
             lambda tx, m=method: getattr(tx, m)("__alkstore_x", 1))  # fmt: skip
    case("publish_with_key(reserved)", ReservedName,
         lambda tx: tx.publish_with_key("__alkstore_x", "k", 1))  # fmt: skip
    for method in ("enqueue", "outbox_enqueue"):
        # An option of another name: what Python says of an unknown keyword.
        case(f"{method}(prio=1)", TypeError,
             lambda tx, m=method: getattr(tx, m)("q", 1, prio=1))  # fmt: skip
        for v in [2**31, *BIG, True, 1.5, "1"]:
            case(f"{method}(priority={v!r})", InvalidArgument,
                 lambda tx, v=v, m=method: getattr(tx, m)("q", 1, priority=v))  # fmt: skip
        for v in [0, -1, 2**63, True, 1.5]:
            case(f"{method}(max_attempts={v!r})", InvalidArgument,
                 lambda tx, v=v, m=method: getattr(tx, m)("q", 1, max_attempts=v))  # fmt: skip
        for v in DURATIONS:
            case(f"{method}(delay={v!r})", InvalidArgument,
                 lambda tx, v=v, m=method: getattr(tx, m)("q", 1, delay=v))  # fmt: skip
            case(f"{method}(expires={v!r})", InvalidArgument,
                 lambda tx, v=v, m=method: getattr(tx, m)("q", 1, expires=v))  # fmt: skip
        for v in [datetime(2030, 1, 1), "2030-01-01", 5]:
            case(f"{method}(run_at={v!r})", InvalidArgument,
                 lambda tx, v=v, m=method: getattr(tx, m)("q", 1, run_at=v))  # fmt: skip
    for v in PAYLOADS:
        for method in ("enqueue", "outbox_enqueue", "publish", "notify"):
            case(f"{method}(payload={v!r})", CodecError,
                 lambda tx, v=v, m=method: getattr(tx, m)("n", v))  # fmt: skip
        case(f"publish_with_key(payload={v!r})", CodecError,
             lambda tx, v=v: tx.publish_with_key("s", "k", v))  # fmt: skip
    for sql, params in [(5, ()), ("SELECT 1", 5), ("SELECT 1", "ab"), (None, ())]:
        case(f"execute({sql!r}, {params!r})", InvalidArgument,
             lambda tx, s=sql, p=params: tx.execute(s, p))  # fmt: skip
    return out


TX_CASES = _tx_cases()


async def _sync(make: Callable[[], Any]) -> Any:
    return make()


async def _enter(cm: Any) -> None:
    async with cm:
        pass


async def _recv_timeout(receiver: Any, seconds: Any) -> None:
    async with receiver:
        await receiver.recv_timeout(seconds)


async def _receiver_read_since(f: Fixture, offset: Any, limit: Any) -> None:
    async with f.s.subscribe("c") as events:
        await events.read_since(offset, limit)


async def _deliver(payload: Any) -> None:
    pass


async def _handler(job: Job) -> None:
    pass


async def fingerprint(store: Store) -> list[tuple[str, int, str]]:
    """Every alkstore table's row count and a digest of its rows."""
    if store.engine == "sqlite":
        list_sql = ("SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name LIKE '\\_\\_alkstore\\_%' ESCAPE '\\' ORDER BY name")  # fmt: skip
        def qualified(t: str) -> str:
            return f'"{t}"'
    else:
        schema = store._core.dialect.schema
        list_sql = ("SELECT table_name FROM information_schema.tables "
                    f"WHERE table_schema = '{schema}' ORDER BY table_name")  # fmt: skip
        def qualified(t: str) -> str:
            return f'"{schema}"."{t}"'
    out = []
    async with store.transaction() as tx:
        tables = [r[0] for r in await tx.execute(list_sql)]
        for table in tables:
            if table.endswith("notifications"):
                continue  # wakes are hints, pruned on their own schedule
            if table == "orders":
                continue  # the caller's own table (Postgres: in the store's schema)
            rows = await tx.execute(f"SELECT * FROM {qualified(table)}")
            out.append((table, len(rows), repr(sorted(map(repr, rows)))))
    return out


@pytest.mark.producer
async def test_bad_input_raises_the_contract_error_and_writes_nothing(store: Store) -> None:
    f = Fixture(store)
    await f.setup()
    before = await fingerprint(store)
    wrong: list[str] = []
    ran = 0
    for name, error, call in CASES:
        try:
            async with aio.fail_after(5):
                await call(f)
        except error:
            ran += 1
            continue
        except NotOnSync:
            continue  # a blocking store has no such call (not a producer's)
        except BaseException as exc:  # reported below
            wrong.append(f"{name}: {type(exc).__module__}.{type(exc).__name__}: {exc}"[:300])
            continue
        wrong.append(f"{name}: no error")
    assert wrong == []
    assert await fingerprint(store) == before, "a refused call wrote something"
    assert ran > 300


@pytest.mark.producer
async def test_bad_input_in_a_transaction_writes_nothing_and_spares_the_block(
    store: Store,
) -> None:
    """A refused call inside a transaction writes nothing of its own, even
    when the caller catches the error and lets the block commit; the block's
    other writes, before and after the refused call, commit (so the refusal
    came before any round trip: on Postgres a failed statement would have
    aborted the transaction)."""
    f = Fixture(store)
    await f.setup()
    await create_orders_table(store)
    a, b = placeholders(store, 2)
    insert = f"INSERT INTO {orders(store)} (id, note) VALUES ({a}, {b})"
    committed: list[tuple[int, str]] = []
    wrong: list[str] = []
    for i, (name, error, call) in enumerate(TX_CASES):
        before = await fingerprint(store)
        try:
            async with aio.fail_after(5), store.transaction() as tx:
                if store.engine == "postgres":
                    # No wait for the WAL flush at each commit: twice as fast, same test.
                    await tx.execute("SET LOCAL synchronous_commit = off")
                await tx.execute(insert, (2 * i, "before"))
                try:
                    await call(tx)
                except error:
                    pass
                else:
                    wrong.append(f"{name}: no error")
                await tx.execute(insert, (2 * i + 1, "after"))
        except BaseException as exc:  # reported below
            wrong.append(f"{name}: {type(exc).__module__}.{type(exc).__name__}: {exc}"[:300])
            continue
        committed += [(2 * i, "before"), (2 * i + 1, "after")]
        if await fingerprint(store) != before:
            wrong.append(f"{name}: the refused call wrote something that committed")
    assert wrong == []
    assert await order_rows(store) == committed, "a good write in the block did not commit"
    assert len(TX_CASES) > 150


# -- Queue.work: refused when called, before it claims anything ---------------------
def _work_cases() -> list[tuple[str, type[Exception], dict[str, Any]]]:
    out: list[tuple[str, type[Exception], dict[str, Any]]] = []
    for v in [0, -1, MAX_CONCURRENCY + 1, 2**31, *BIG, *NOT_INTS, False]:
        out.append((f"work(concurrency={v!r})", InvalidArgument, {"concurrency": v}))
    for v in [n for n in NAMES if n is not None]:
        out.append((f"work(worker_id={v!r})", InvalidName, {"worker_id": v}))
    for arg in ("poll_interval", "sweep_interval", "heartbeat_interval"):
        for v in [*DURATIONS, 0, 0.0, 1e-9, timedelta(0), [1.0]]:
            out.append((f"work({arg}={v!r})", InvalidArgument, {arg: v}))
    out.append(("work(poll_interval=None)", InvalidArgument, {"poll_interval": None}))
    for v in [object(), "drain", 30, True]:
        out.append((f"work(drain={v!r})", InvalidArgument, {"drain": v}))
    return out


WORK_CASES = _work_cases()


async def test_work_refuses_bad_arguments_at_once_and_claims_nothing(store: Store) -> None:
    """Each bad argument of ``Queue.work`` raises its contract error as soon
    as ``work`` is called (not a worker that runs and logs a failed claim at
    every poll), and no job was claimed: a ready job stays ready."""
    f = Fixture(store)
    await f.setup()
    stats = await f.q.stats()
    assert stats.ready == 1  # one job a worker that started would claim at once
    before = await fingerprint(store)
    wrong: list[str] = []
    for name, error, bad in WORK_CASES:
        kwargs: dict[str, Any] = {"poll_interval": 0.01, **bad}
        started = time.monotonic()
        try:
            async with aio.fail_after(2):
                await f.q.work(_handler, **kwargs)
        except error:
            if time.monotonic() - started > 0.5:
                wrong.append(f"{name}: refused only after {time.monotonic() - started:.2f} s")
        except BaseException as exc:  # reported below
            wrong.append(f"{name}: {type(exc).__module__}.{type(exc).__name__}: {exc}"[:300])
        else:
            wrong.append(f"{name}: returned")
        if await f.q.stats() != stats:
            wrong.append(f"{name}: a job was claimed ({await f.q.stats()})")
            break  # the fixture's job is gone: later cases could not tell
    assert wrong == []
    assert await fingerprint(store) == before, "a refused work() wrote something"


async def test_work_accepts_the_bounds(store: Store) -> None:
    """The largest accepted values start a worker that does its work."""
    q = store.queue("bounds")
    await q.enqueue("x")
    done = aio.event()

    async def handler(job: Job) -> None:
        done.set()

    longest = float(MAX_DURATION_US // US_PER_S)  # about 10,000 years

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, concurrency=MAX_CONCURRENCY, poll_interval=longest,
                     sweep_interval=longest, heartbeat_interval=longest,
                     worker_id="w" * MAX_NAME_LENGTH, task_status=task_status)  # fmt: skip

    # 10,000 slot tasks take a few seconds to start and stop on a loaded
    # machine: the bound only rules out a hang.
    async with aio.fail_after(SOON * 6), aio.open_task_group() as group:
        await group.start(worker)
        await done.wait()
        group.cancel()


# -- found by fuzz/fuzz_api.py ---------------------------------------------------------
async def test_error_text_the_engines_cannot_store_is_stored_alike(store: Store) -> None:
    """``retry``/``fail`` with an error text holding a lone surrogate raised
    a raw UnicodeEncodeError on SQLite (Postgres replaced it), and a NUL was
    kept on SQLite but replaced on Postgres: now every backend stores the
    same replacement and the call succeeds."""
    q = store.queue("errors", max_attempts=1)
    texts = ["x\udcff", "a\x00b", ValueError("v\ud800\x00")]
    stored = ["x?", "a\ufffdb", "ValueError: v?\ufffd"]
    for i, error in enumerate(texts):
        await q.enqueue(i)
        job = await q.claim_one("w")
        assert job is not None
        settle = job.fail(error) if i % 2 else job.retry(error=error)  # out of attempts: dead
        assert await settle is True
    dead = await q.dead_letters()
    assert sorted((d.payload, d.last_error) for d in dead) == list(enumerate(stored))


async def test_deadlines_a_queue_or_schedule_derives_end_at_the_year_9999(
    store: Store, clock: ManualClock
) -> None:
    """A visibility timeout or a schedule's ``expires_after`` that ends past
    what a datetime holds is capped there: the claimed job's instants read
    back (they raised OverflowError on the handle and CodecError on every
    later get_job)."""
    latest = datetime.max.replace(tzinfo=UTC)
    q = store.queue("far", visibility_timeout=timedelta(days=365 * 8100))
    await q.enqueue(1)
    job = await q.claim_one("w")
    assert job is not None and job.claim_expires_at == latest
    info = await q.get_job(job.id)
    assert info is not None and info.claim_expires_at == latest
    await store.schedule("far", "fired", "@every 1ms", expires_after=timedelta(days=365 * 8100))
    clock.advance(1.0)
    assert await store.run_schedules() == 1
    fired = await store.queue("fired").claim_one("w")
    assert fired is not None and fired.expires_at == latest
    assert (await store.queue("fired").get_job(fired.id)) is not None
