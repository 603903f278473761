"""Deterministic simulation of job dependencies: producers enqueue workflows
(a and b, c after both, d after c) and jobs waiting for jobs of earlier
ones, while workers ack (with or without a result), retry, fail, release or
stall, with crashes and clock jumps (``Config.graphs``).

Invariants (checked after every commit, stated in
alkstore/testing/invariants.py ``Ledger.dependencies_hold``): a job is in
one place (waiting, jobs, dead or history), so it is released or cancelled
once; a waiting job has an unfinished dependency and no failed one under
the cancel policy, so the last finish releases it and a failure cancels it
in the same transaction, level by level down the graph; a job left waiting
only once each dependency was acked (or failed, under the run policy), so
no claim ever takes it before; a job is cancelled only by a failed
dependency; every acked job is in history as acked; a result is in history
exactly when its ack committed; nothing waits after the drain.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from alkstore.engines.postgres import PostgresDialect
from alkstore.engines.postgres.tables import WAITING
from alkstore.engines.shapes import WAITING_COLS
from alkstore.engines.sqlite import SqliteDialect
from alkstore.protocol.dialect import Dialect
from alkstore.protocol.plan import Plan, Row, Statement
from alkstore.protocol.plans import dependencies
from alkstore.testing import Config, SimulationFailure, explore, run_seed

from .conftest import explored
from .test_simulation import ENGINES, FLOW_BUDGET_S, Engines, open_backend

# Two producers (workflows, dependents of earlier jobs, some rolled back)
# and two workers doing everything a worker does, a crash and a clock jump.
GRAPHS = Config(jobs=3, producers=2, workers=2, graphs=True, crashes=1, clock_jumps=1)

# One workflow, two workers that only ack: the last two acks of c's
# dependencies race (on Postgres inside the server, on its row of waiting).
RACING_ACKS = Config(
    jobs=1, producers=1, workers=2, graphs=True, crashes=0, clock_jumps=0,
    worker_actions=("ack",), rollback_txs=False,
)  # fmt: skip

# One workflow, one worker that acks or fails each step: every cascade.
FAILING = Config(
    jobs=1, producers=1, workers=1, graphs=True, crashes=0, clock_jumps=0,
    worker_actions=("ack", "fail"), rollback_txs=False,
)  # fmt: skip


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    opened = Engines()
    yield opened
    opened.close()


SEEDED = {"graphs": GRAPHS, "racing acks": RACING_ACKS, "failing": FAILING}


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("label", sorted(SEEDED))
def test_dependencies_hold_under_racing_actors(
    engine_name: str, label: str, engines: Engines, request: pytest.FixtureRequest
) -> None:
    """Invariants: the dependency rules above, whatever the interleaving (seeded runs)."""
    config = SEEDED[label]
    backend = engines[engine_name]
    deadline = time.monotonic() + FLOW_BUDGET_S
    runs = steps = 0
    while time.monotonic() < deadline:
        steps += run_seed(config, runs, backend=backend, shrink_failures=True)
        runs += 1
    explored(request, f"{engine_name}: seeded ({label})",
             f"{runs} seeds, {steps} steps in {FLOW_BUDGET_S:g} s")  # fmt: skip
    assert runs > 0


@pytest.mark.skipif("sqlite" not in ENGINES, reason="SQLite not selected")
def test_every_interleaving_of_a_failing_workflow_keeps_the_invariants(
    engines: Engines, request: pytest.FixtureRequest
) -> None:
    """Every schedule of one workflow's steps acked or failed, under every
    policy of c and d (cancel or run), keeps the dependency rules. (SQLite:
    on Postgres the producer's statements interleave with the worker's
    inside the server, well past what a test can run; seeded runs of the
    same configuration cover it there.)"""
    result = explore(FAILING, limit=5_000, backend=engines["sqlite"])
    explored(request, "sqlite: 1 workflow x 1 worker (ack/fail) x policies",
             f"{result.interleavings} interleavings, {result.steps} steps")  # fmt: skip
    assert result.interleavings > 100


# -- the simulation catches broken dependency handling -------------------------


class _ReleaseEarly:
    """Each finish is counted one too many: a job with two dependencies is
    released when the first finishes."""

    def decrement_waiting(self, job_ids: Sequence[int], n: int) -> Statement:
        real: Any = super()
        return real.decrement_waiting(job_ids, n + 1)  # type: ignore[no-any-return]


class ReleaseEarly(_ReleaseEarly, SqliteDialect):
    pass


class PgReleaseEarly(_ReleaseEarly, PostgresDialect):
    pass


class _ResultDropped:
    """A kept job's ack moves it to history without the result it carried."""

    def ack_kept(
        self,
        worker: str,
        items: Sequence[tuple[int, int | None, str | None, str | None]],
        now_us: int,
        queue: str | None = None,
    ) -> tuple[Statement, ...]:
        real: Any = super()
        dropped = [(job_id, claim, None, headers) for job_id, claim, _, headers in items]
        return real.ack_kept(worker, dropped, now_us, queue)  # type: ignore[no-any-return]


class ResultDropped(_ResultDropped, SqliteDialect):
    pass


class PgResultDropped(_ResultDropped, PostgresDialect):
    pass


class ReleaseLeavingWaiting(SqliteDialect):
    """A released job is copied into jobs and left in waiting too."""

    def release_waiting(
        self, job_ids: Sequence[int], now_us: int, counting: int = 0
    ) -> tuple[Statement, ...]:
        copy, _delete = super().release_waiting(job_ids, now_us, counting)
        return (copy,)


class PgReleaseLeavingWaiting(PostgresDialect):
    _release_waiting = PostgresDialect._release_waiting.replace(
        f"DELETE FROM {WAITING}", f"SELECT {WAITING_COLS} FROM {WAITING}"
    ).replace(f" RETURNING {WAITING_COLS})", ")")


class PgCountLostUpdate(PostgresDialect):
    """The count of unfinished dependencies taken from a read of the row,
    not from the row being updated: two last acks racing inside the server
    both subtract from the count they read, one update is lost and the job
    waits for ever. (SQLite's single writer orders them: no twin there.)"""

    _decrement_waiting = PostgresDialect._decrement_waiting.replace(
        "SET remaining = remaining - :n WHERE id = ",
        f"AS w SET remaining = s.remaining - :n FROM (SELECT id AS sid, remaining FROM {WAITING}) "
        "AS s WHERE w.id = s.sid AND w.id = ",
    ).replace("RETURNING id, remaining", "RETURNING w.id, w.remaining")


class PgWaitingUnheld(PostgresDialect):
    """A new job's waiting dependency read, not held: a cancel of it racing
    inside the server counts its edges before the new one commits, and the
    new job waits for ever on a cancelled job. (SQLite's single writer
    orders them: no twin there.)"""

    _hold_waiting = PostgresDialect._hold_waiting.replace(" FOR KEY SHARE", "")


BROKEN: dict[str, tuple[type[Dialect] | None, type[Dialect], Config, str]] = {
    "release-early": (ReleaseEarly, PgReleaseEarly, RACING_ACKS, "released before"),
    "result-dropped": (ResultDropped, PgResultDropped, RACING_ACKS, "acked with"),
    "release-leaving-waiting": (
        ReleaseLeavingWaiting, PgReleaseLeavingWaiting, RACING_ACKS, "in two places",
    ),
    "count-lost-update": (None, PgCountLostUpdate, RACING_ACKS, "still waits though"),
    "waiting-dependency-unheld": (None, PgWaitingUnheld, GRAPHS, "still waits though"),
}  # fmt: skip
BROKEN_CASES = [
    pytest.param(e, name, id=f"{e}-{name}")
    for e in ENGINES
    for name, (lite, _, _, _) in BROKEN.items()
    if e == "postgres" or lite is not None
]


def test_the_text_edits_of_the_broken_dialects_take() -> None:
    """The Postgres dialects above that edit statements' text change it (an
    edit that found nothing would let their tests pass vacuously)."""
    real = PostgresDialect("alkstore")
    for cls, name in ((PgReleaseLeavingWaiting, "_release_waiting"),
                      (PgCountLostUpdate, "_decrement_waiting"),
                      (PgWaitingUnheld, "_hold_waiting")):  # fmt: skip
        mine, theirs = getattr(cls("alkstore"), name).sql, getattr(real, name).sql
        assert mine != theirs, (cls, name)
    assert "DELETE" not in PgReleaseLeavingWaiting("alkstore")._release_waiting.sql


def _caught(backend: Any, config: Config, message: str) -> None:
    for seed in range(300):
        try:
            run_seed(config, seed, backend=backend)
        except SimulationFailure as failure:
            assert message in failure.violation, failure.violation
            assert failure.seed == seed
            return
    pytest.fail("300 seeds ran without catching the broken engine")


@pytest.mark.parametrize(("engine_name", "name"), BROKEN_CASES)
def test_broken_dependency_handling_is_caught(engine_name: str, name: str) -> None:
    """A deliberately broken statement breaks a dependency invariant within a few seeds."""
    lite, pg, config, message = BROKEN[name]
    broken = lite if engine_name == "sqlite" else pg
    assert broken is not None
    backend = open_backend(engine_name, broken)
    try:
        _caught(backend, config, message)
    finally:
        backend.close()


@pytest.mark.parametrize("engine_name", ENGINES)
def test_a_cascade_that_stops_at_the_first_level_is_caught(
    engine_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A core whose cancellation does not go on to what waited for the
    cancelled jobs leaves d waiting after c was cancelled."""
    cancel = dependencies.cancel_waiting_jobs

    def first_level_only(
        d: Dialect, job_ids: Sequence[int], why: str | None, now_us: int
    ) -> Plan[list[Row]]:
        yield from cancel(d, job_ids, why, now_us)
        return []  # as if nothing were cancelled: the next level is never looked at

    monkeypatch.setattr(dependencies, "cancel_waiting_jobs", first_level_only)
    backend = open_backend(engine_name)
    try:
        _caught(backend, FAILING, "still waits though")
    finally:
        backend.close()
