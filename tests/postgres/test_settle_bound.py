"""Rule: a worker's shutdown is never held hostage by a database that does
not answer (contract section 4, workers; section 8, close).

Once a handler has finished, the worker settles the job (ack or retry)
shielded from cancellation, so finished work is not done twice. That
shield is bounded by what is left of the job's claim plus a grace: past
it an ack would be refused anyway. Here the job's row is locked by another
transaction, so the ack waits inside the server; cancelling the worker
returns within the bound, the job stays in the queue (it will be
delivered again), and nothing waits for the other transaction.
"""

from __future__ import annotations

import psycopg
import trio

from alkstore.protocol.machines.worker import SETTLE_GRACE_S
from alkstore.protocol.plans.locks import RELEASE_GRACE_S
from tests.backends import PG_DSN

from .pg import open_pg, table, terminate_backend

VT = 1.0
# The row-locking transaction is ended by this watchdog at the latest, so
# a regression fails the test (too slow) instead of hanging it.
WATCHDOG_S = 20.0


async def _watchdog(blocker: psycopg.Connection[object]) -> None:
    """End the blocking transaction at the latest after ``WATCHDOG_S``."""
    await trio.sleep(WATCHDOG_S)
    await terminate_backend(blocker.info.backend_pid)


async def test_worker_shutdown_is_bounded_when_the_ack_gets_no_answer(schema: str) -> None:
    async with open_pg(schema) as store:
        q = store.queue("jobs", visibility_timeout=VT)
        job_id = await q.enqueue("x")
        started, finish = trio.Event(), trio.Event()

        async def handler(job: object) -> None:
            started.set()
            await finish.wait()

        with psycopg.connect(PG_DSN) as blocker:
            async with trio.open_nursery() as outer:
                outer.start_soon(_watchdog, blocker)
                async with trio.open_nursery() as workers:
                    await workers.start(q.work, handler)
                    await started.wait()
                    blocker.execute(
                        f"SELECT id FROM {table(store, 'jobs')} WHERE id = %s FOR UPDATE",
                        (job_id,),
                    )
                    finish.set()
                    await trio.sleep(0.3)  # the ack now waits on the row lock
                    cancelled_at = trio.current_time()
                    workers.cancel_scope.cancel()
                took = trio.current_time() - cancelled_at
                outer.cancel_scope.cancel()
            blocker.rollback()
        # The bound, plus room for the statement's cancel on a loaded machine;
        # without the bound it would take the watchdog's 20 s.
        assert took < VT + SETTLE_GRACE_S + 3.0, f"shutdown took {took:.1f} s"
        info = await q.get_job(job_id)
        assert info is not None and info.state == "processing"  # not acked: comes back


async def test_leaving_hold_lock_is_bounded_when_the_release_gets_no_answer(schema: str) -> None:
    """Rule: a cancelled ``hold_lock`` waits for its shielded release no longer
    than the lock lasts plus a grace (past its expiry the lock is free anyway)."""
    ttl = 1.0
    async with open_pg(schema) as store:
        with psycopg.connect(PG_DSN) as blocker:
            async with trio.open_nursery() as outer:
                outer.start_soon(_watchdog, blocker)
                with trio.CancelScope() as body:
                    async with store.hold_lock("l", "me", ttl):
                        blocker.execute(
                            f"SELECT name FROM {table(store, 'locks')} WHERE name = 'l' FOR UPDATE"
                        )
                        cancelled_at = trio.current_time()
                        body.cancel()
                        await trio.sleep_forever()
                took = trio.current_time() - cancelled_at
                outer.cancel_scope.cancel()
            blocker.rollback()
        assert took < ttl + RELEASE_GRACE_S + 3.0, f"leaving hold_lock took {took:.1f} s"
