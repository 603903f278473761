"""Deadlocks between publishers (Postgres, both drivers). On SQLite writers
take turns in one writer slot and cannot deadlock; the hazard and its
remedy are in docs/transactions.md."""

from __future__ import annotations

import pytest

from alkstore import DatabaseError, TransactionConflict
from tests.backends import BACKENDS, Backend, selected_backends

from . import aio
from .helpers import SOON


@pytest.fixture(params=[b for b in selected_backends() if BACKENDS[b].engine == "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


async def test_publishers_in_opposite_orders_deadlock_into_a_retryable_conflict(
    backend: Backend, location: str
) -> None:
    """Two transactions publish to two streams in opposite orders: each
    holds one stream's counter row and waits for the other's, and the server
    kills one (deadlock detected). The failure is a ``TransactionConflict``
    that left nothing behind, and the retry commits."""
    async with backend.open(location) as store:
        first_in = [aio.event(), aio.event()]
        failures: list[BaseException] = []

        async def publisher(n: int, streams: tuple[str, str]) -> None:
            for attempt in range(5):
                try:
                    async with store.transaction() as tx:
                        await tx.publish(streams[0], {"n": n})
                        if attempt == 0:
                            first_in[n].set()
                            await first_in[1 - n].wait()
                        await tx.publish(streams[1], {"n": n})
                    return
                except TransactionConflict as exc:
                    failures.append(exc)
            raise AssertionError("still conflicting after 5 attempts")

        async with aio.fail_after(SOON * 3), aio.open_task_group() as group:
            group.start_soon(publisher, 0, ("a", "b"))
            group.start_soon(publisher, 1, ("b", "a"))
        # At least the deadlock the handshake makes; a retry may meet another.
        assert failures, "no deadlock: the test proved nothing"
        for failure in failures:
            assert isinstance(failure, DatabaseError)
            assert getattr(failure.__cause__, "sqlstate", None) == "40P01"
        # Each committed exactly once: one event per publisher per stream.
        for name in ("a", "b"):
            events = await store.stream(name).read_since(0)
            assert sorted(e.payload["n"] for e in events) == [0, 1]
