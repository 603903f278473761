"""Postgres statement connections killed under load (issue 4: real faults
on real engines).

``pg_terminate_backend`` from a side connection kills random backends of the
store's pool while several tasks enqueue, claim and ack. The listener's
backend is left alone (its reconnect has its own tests). Each test works in
a fresh schema (``tests.backends``), dropped at the end of the session.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio
import trio.lowlevel

from alkstore import DatabaseError, Store
from alkstore.io_trio import PostgresOptions, open_postgres
from tests.backends import BACKENDS, PG_DSN

pytestmark = pytest.mark.slow

POOL = 4
ENQUEUERS = 3
CLAIMERS = 3
KILLS = 8
OP_BOUND = 20.0  # an operation taking longer than this is a hang


def side_sql(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return [tuple(r) for r in cur.fetchall()] if cur.description is not None else []


async def asql(query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    return await trio.to_thread.run_sync(side_sql, query, params)


def listener_pid(store: Store) -> int | None:
    return store._core.executor._listener.backend_pid  # type: ignore[attr-defined, no-any-return]


async def pool_backends(store: Store, app: str) -> list[tuple[int, str]]:
    """(pid, state) of the store's statement connections (not its listener)."""
    rows = await asql(
        "SELECT pid, coalesce(state, '') FROM pg_stat_activity WHERE application_name = %s",
        (app,),
    )
    return [(int(pid), str(state)) for pid, state in rows if pid != listener_pid(store)]


async def enqueue_in_tx(store: Store, tokens: tuple[str, ...]) -> list[int]:
    async with store.transaction() as tx:
        return [await tx.enqueue("load", {"token": t}) for t in tokens]


class Outcomes:
    """What every operation reported."""

    def __init__(self) -> None:
        self.enqueued: dict[int, str] = {}
        self.claimed: Counter[int] = Counter()
        self.acked: set[int] = set()
        self.ack_unknown: set[int] = set()  # the ack raised: it may have committed
        self.database_errors: list[DatabaseError] = []
        self.raw_errors: list[BaseException] = []

    async def op(self, call: Any) -> tuple[bool, Any]:
        try:
            with trio.fail_after(OP_BOUND):
                return True, await call()
        except DatabaseError as exc:
            self.database_errors.append(exc)
        except Exception as exc:  # a raw error or a hang: the test fails
            self.raw_errors.append(exc)
        return False, None


async def test_killed_pool_backends_fail_operations_cleanly_lose_no_job_and_the_store_recovers(
    tmp_path: Path,
) -> None:
    """Killed backends: only DatabaseError, no hang, no returned job lost, then recovery.

    Several tasks enqueue (alone and in transactions), claim and ack while
    random pool backends are terminated; a job whose enqueue or transaction
    returned is acked or still in the table, and later operations succeed.
    """
    schema = BACKENDS["postgres-trio"].new_location(tmp_path)
    app = f"alk_faults_{uuid.uuid4().hex[:12]}"
    dsn = f"{PG_DSN}{'&' if '?' in PG_DSN else '?'}application_name={app}"
    options = PostgresOptions(schema=schema, pool_size=POOL)
    out = Outcomes()
    kills = 0
    rng = random.Random(4)
    with trio.fail_after(90):
        async with open_postgres(dsn, options=options) as store:
            q = store.queue("load", visibility_timeout=300, max_attempts=1000)
            stop = trio.Event()

            async def enqueuer(n: int) -> None:
                i = 0
                while not stop.is_set():
                    i += 1
                    token = f"e{n}-{i}"
                    ok, job_id = await out.op(partial(q.enqueue, {"token": token}))
                    if ok:
                        out.enqueued[job_id] = token
                    await trio.lowlevel.checkpoint()

            async def transactor() -> None:
                i = 0
                while not stop.is_set():
                    i += 1
                    tokens = (f"t-{i}-a", f"t-{i}-b")

                    ok, ids = await out.op(partial(enqueue_in_tx, store, tokens))
                    if ok:
                        out.enqueued.update(zip(ids, tokens, strict=True))
                    await trio.lowlevel.checkpoint()

            async def claimer(n: int) -> None:
                worker = f"c{n}"
                while not stop.is_set():
                    ok, jobs = await out.op(lambda: q.claim_batch(worker, 3))
                    for job in jobs or []:
                        out.claimed[job.id] += 1
                        ok, owned = await out.op(job.ack)
                        if not ok:
                            out.ack_unknown.add(job.id)
                        elif owned:
                            out.acked.add(job.id)
                    await trio.lowlevel.checkpoint()

            async with trio.open_nursery() as nursery:
                for n in range(ENQUEUERS):
                    nursery.start_soon(enqueuer, n)
                nursery.start_soon(transactor)
                for n in range(CLAIMERS):
                    nursery.start_soon(claimer, n)
                await trio.sleep(0.5)
                for _ in range(KILLS):
                    await trio.sleep(rng.uniform(0.1, 0.3))
                    backends = await pool_backends(store, app)
                    busy = [pid for pid, state in backends if state != "idle"]
                    if busy or backends:
                        pid = rng.choice(busy or [pid for pid, _ in backends])
                        rows = await asql("SELECT pg_terminate_backend(%s, 5000)", (pid,))
                        kills += bool(rows[0][0])
                await trio.sleep(0.3)
                stop.set()

            assert out.raw_errors == [], out.raw_errors
            assert kills >= KILLS // 2, kills
            assert out.database_errors, "no operation was hit: the test proved nothing"
            for error in out.database_errors:
                cause = error.__cause__
                assert cause is None or isinstance(cause, psycopg.Error), repr(cause)
            assert len(out.enqueued) > 50, len(out.enqueued)
            assert max(out.claimed.values(), default=1) == 1, "a job delivered twice"

            # The store recovers: every operation succeeds from now on.
            started = time.monotonic()
            with trio.fail_after(OP_BOUND):
                late = await q.enqueue({"token": "late"})
                out.enqueued[late] = "late"
                async with store.transaction() as tx:
                    late_tx = await tx.enqueue("load", {"token": "late-tx"})
                out.enqueued[late_tx] = "late-tx"
                drained: dict[int, str] = {}
                while jobs := await q.claim_batch("drain", 500):
                    for job in jobs:
                        drained[job.id] = job.payload["token"]
                    assert await q.ack_batch([j.id for j in jobs], "drain") == len(jobs)
            assert {late, late_tx} <= set(drained)
            recovery = time.monotonic() - started

            # No job whose enqueue returned is lost: each was acked (or its
            # ack's outcome is unknown), or it is still in the table.
            table = f'"{schema}".jobs'
            left = dict(await asql(f"SELECT id, payload::json->>'token' FROM {table}"))
            assert set(drained).isdisjoint(out.claimed), "a job delivered twice"
            for job_id, token in out.enqueued.items():
                if job_id in out.acked or job_id in drained or job_id in out.ack_unknown:
                    continue
                assert left.get(job_id) == token, (job_id, token)
            # What is left was claimed by an operation whose reply was lost.
            assert all(r[0] > 0 for r in await asql(f"SELECT claims FROM {table}"))
        assert recovery < OP_BOUND

    # No connection of the store outlives it.
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    with trio.fail_after(10):
        while True:
            if not await asql(query, (app,)):
                break
            await trio.sleep(0.05)
