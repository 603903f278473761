"""What a caller is told about a COMMIT it was cancelled during, or that
never answered (Postgres, both drivers; real slow commits and real
terminated backends).

Invariant: a cancel that lands while COMMIT is in flight does not make a
committed transaction look rolled back: the call returns (and the commit's
local wakes fire); a COMMIT whose answer never comes raises
``CommitUnknown``, never a cancellation or a plain ``DatabaseError``.
A deferred constraint trigger that sleeps makes every COMMIT on the test
schema's jobs table slow, so the cancel surely lands inside it."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest

from alkstore import CommitUnknown, DatabaseError, Job, Store
from alkstore.io_trio import PostgresOptions
from tests.backends import BACKENDS, PG_DSN, Backend, selected_backends

from . import aio
from .helpers import SOON


@pytest.fixture(params=[b for b in selected_backends() if BACKENDS[b].engine == "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


def slow_commits(schema: str, seconds: float) -> None:
    """Every COMMIT of a transaction that inserted a job sleeps ``seconds``."""
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(
            f'CREATE OR REPLACE FUNCTION "{schema}".slow_commit() RETURNS trigger '
            f"LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep({seconds}); RETURN NULL; END $$"
        )
        conn.execute(f'DROP TRIGGER IF EXISTS slow_commit ON "{schema}".jobs')
        conn.execute(
            f'CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON "{schema}".jobs '
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
            f'EXECUTE FUNCTION "{schema}".slow_commit()'
        )


def commit_in_flight(store: Store) -> int | None:
    """The backend of ``store`` sleeping in a slow commit, if any (not one of
    an earlier test, still sleeping after its client went away). The
    trigger is deferred, so it sleeps only while a transaction commits: at
    its COMMIT, or at the end of a statement that ran as a transaction of
    its own (a single enqueue, whose query is then the INSERT)."""
    pids = list(store._core.executor._pool.backend_pids)  # type: ignore[attr-defined]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE state = 'active' "
            "AND wait_event = 'PgSleep' AND pid = ANY(%s)",
            (pids,),
        ).fetchone()
    return None if row is None else int(row[0])


async def cancelled_during_commit(store: Store, body: Callable[[], Awaitable[Any]]) -> bool:
    """Run ``body`` and cancel it once its COMMIT is seen sleeping in the
    server (not after a fixed delay, which a loaded machine can outrun or
    fall short of); whether ``body`` returned."""
    returned: list[bool] = []
    fired: list[bool] = []

    async def run() -> None:
        await body()
        returned.append(True)

    async def cancel_in_commit(group: aio.TaskGroup) -> None:
        async with aio.fail_after(SOON):
            while commit_in_flight(store) is None:
                if returned:
                    return  # too late: the commit ended unseen (checked below)
                await aio.sleep(0.005)
        fired.append(True)
        group.cancel()

    async with aio.open_task_group() as group:
        group.start_soon(run)
        group.start_soon(cancel_in_commit, group)
    assert fired, "the COMMIT ended before it was seen in flight: nothing was tested"
    return bool(returned)


async def test_a_cancel_during_commit_reports_the_commit(store: Store) -> None:
    slow_commits(store._core.dialect.schema, 0.3)
    q, s = store.queue("q"), store.stream("s")
    for i in range(5):

        async def block(i: int = i) -> None:
            async with store.transaction() as tx:
                await tx.enqueue(q, i)
                await tx.publish("s", i)

        # The cancel was not lost either: it ended the group.
        committed = await cancelled_during_commit(store, block)
        assert committed, "a committed block was reported cancelled"
    assert (await q.stats()).ready == 5
    assert [e.payload for e in await s.read_since(0)] == list(range(5))

    # The auto-commit path: the operation returns its result.
    ids: list[int] = []

    async def auto() -> None:
        ids.append(await q.enqueue("auto"))

    assert await cancelled_during_commit(store, auto)
    assert len(ids) == 1 and await q.get_job(ids[0]) is not None


async def test_a_commit_cancelled_in_flight_still_wakes_local_workers(store: Store) -> None:
    """The local wake of a commit that completed under a cancel fires: a
    worker of the same store with a 60 s poll takes the job at once."""
    slow_commits(store._core.dialect.schema, 0.3)
    q = store.queue("q")
    done = aio.event()

    async def handler(job: Job) -> None:
        done.set()

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, poll_interval=60.0, task_status=task_status)

    async def block() -> None:
        async with store.transaction() as tx:
            await tx.enqueue(q, "wake me")

    async with aio.open_task_group() as group:
        await group.start(worker)
        assert await cancelled_during_commit(store, block)
        started = time.monotonic()
        async with aio.fail_after(SOON):
            await done.wait()
        assert time.monotonic() - started < SOON
        group.cancel()


async def _kill_the_commit(store: Store) -> None:
    async with aio.fail_after(SOON):
        while (pid := commit_in_flight(store)) is None:
            await aio.sleep(0.01)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


async def test_a_connection_lost_during_commit_is_commit_unknown(store: Store) -> None:
    slow_commits(store._core.dialect.schema, 5.0)
    q = store.queue("q")
    outcomes: list[BaseException | None] = []

    async def enqueue() -> None:
        try:
            await q.enqueue("lost")
            outcomes.append(None)
        except DatabaseError as exc:
            outcomes.append(exc)

    async def in_transaction() -> None:
        try:
            async with store.transaction() as tx:
                await tx.enqueue(q, "lost-tx")
            outcomes.append(None)
        except DatabaseError as exc:
            outcomes.append(exc)

    for attempt in (enqueue, in_transaction):
        async with aio.fail_after(SOON * 2), aio.open_task_group() as group:
            group.start_soon(attempt)
            await _kill_the_commit(store)
    assert len(outcomes) == 2
    for outcome in outcomes:
        assert isinstance(outcome, CommitUnknown), outcome
        assert isinstance(outcome.__cause__, psycopg.Error), outcome.__cause__
    # The store carries on: the next operations use fresh connections.
    slow_commits(store._core.dialect.schema, 0.0)
    assert await q.enqueue("after") > 0


async def test_no_answer_to_commit_within_the_bound_is_commit_unknown(
    backend: Backend, location: str
) -> None:
    async with backend.open(location):
        pass  # migrated under the default bound: the short one is the enqueue's
    options = PostgresOptions(schema=location, pool_size=2, commit_timeout=0.2)
    async with backend.open(location, options=options) as store:
        slow_commits(location, 5.0)
        started = time.monotonic()
        with pytest.raises(CommitUnknown, match="no answer"):
            await store.queue("q").enqueue("slow")
        assert time.monotonic() - started < 3.0  # the bound, not the 5 s sleep


async def test_a_worker_whose_claim_commit_goes_unanswered_carries_on(
    backend: Backend, location: str
) -> None:
    """The claim's COMMIT gets no answer within the bound (a trigger makes
    the first claims' commits sleep): the worker gets ``CommitUnknown``,
    hands back what the claim may have taken, backs off, and processes the
    job once commits answer again, long before its 300 s visibility timeout.

    The budget is generous (a loaded CI machine stretches every commit, each
    cancel request and each hand-back): what it rules out is the worker
    sitting on the job until the visibility timeout."""
    async with backend.open(location):
        pass  # migrated under the default bound: the short one is the claims'
    options = PostgresOptions(schema=location, pool_size=3, commit_timeout=0.3)
    async with backend.open(location, options=options) as store:
        q = store.queue("q", visibility_timeout=300)
        job_id = await q.enqueue("x")
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE TABLE "{location}".slow_flag (on_ bool)')
            conn.execute(f'INSERT INTO "{location}".slow_flag VALUES (true)')
            conn.execute(
                f'CREATE FUNCTION "{location}".slow_claim() RETURNS trigger LANGUAGE plpgsql '
                f'AS $$ BEGIN IF (SELECT on_ FROM "{location}".slow_flag) THEN '
                "PERFORM pg_sleep(2); END IF; RETURN NULL; END $$"
            )
            conn.execute(
                f'CREATE CONSTRAINT TRIGGER slow_claim AFTER UPDATE ON "{location}".jobs '
                "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                f'EXECUTE FUNCTION "{location}".slow_claim()'
            )
        handled = aio.event()

        async def handler(job: Job) -> None:
            handled.set()

        async def worker(task_status: Any = None) -> None:
            await q.work(handler, poll_interval=0.1, task_status=task_status)

        async with aio.fail_after(SOON * 12), aio.open_task_group() as group:
            await group.start(worker)
            await aio.sleep(0.5)  # claims time out meanwhile
            with psycopg.connect(PG_DSN, autocommit=True) as conn:
                conn.execute(f'UPDATE "{location}".slow_flag SET on_ = false')
            await handled.wait()
            group.cancel()
        assert await q.get_job(job_id) is None
