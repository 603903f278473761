"""Deterministic simulation of many actors over one database.

Invariants (checked after every step, stated in alkstore/testing/simulation.py):
committed jobs are never lost; an acked job is never delivered again; a job
never has two unexpired owners; a job is settled only by its owner; attempts
never exceed max_attempts; one lock never has two unexpired holders and its
fencing tokens increase; stream readers see committed offsets in order with
no gaps; saved offsets never move back; a rolled-back transaction leaves no
row, event or notification.
"""

from __future__ import annotations

import os
import time

import pytest

from alkstore.engines.sqlite import SqliteDialect
from alkstore.protocol.plan import Fetch, Statement
from alkstore.testing import (
    Config,
    SeededChooser,
    Simulation,
    SimulationFailure,
    explore,
    run_seed,
    shrink,
)

from .conftest import EXPLORED

# Everything at once: producers with committed and rolled-back transactions,
# workers that ack, retry, fail, heartbeat, release or walk away, lock
# holders, stream publishers and readers, two crashes and two clock jumps.
RICH = Config(
    jobs=6, producers=2, workers=3, lock_holders=2, publishers=2, readers=2,
    crashes=2, clock_jumps=2,
)  # fmt: skip
BUDGET_S = float(os.environ.get("ALKSTORE_SIM_BUDGET", "20"))


def test_seeded_simulations_within_budget(request: pytest.FixtureRequest) -> None:
    """Every seed in the budget (or the one given by --alkstore-seed) keeps every invariant."""
    seed = request.config.getoption("--alkstore-seed")
    if seed is not None:
        run_seed(RICH, seed)
        return
    deadline = time.monotonic() + BUDGET_S
    runs = steps = 0
    while time.monotonic() < deadline:
        steps += run_seed(RICH, runs)
        runs += 1
    EXPLORED["seeded (rich config)"] = f"{runs} seeds, {steps} steps in {BUDGET_S:g} s"
    assert runs > 0


EXHAUSTIVE = {
    # the example: 2 workers x 2 jobs x up to one crash
    "2 workers x 2 jobs x <=1 crash": Config(
        jobs=2, producers=0, workers=2, pre_enqueued=True, crashes=1, clock_jumps=0,
        worker_actions=("ack",), rollback_txs=False,
    ),
    "2 workers x 1 job x ack/retry/fail/stall x <=1 clock jump": Config(
        jobs=1, producers=0, workers=2, pre_enqueued=True, crashes=0, clock_jumps=1,
        worker_actions=("ack", "retry", "fail", "stall"), rollback_txs=False, max_attempts=2,
    ),
    "3 lock holders x 1 lock x <=1 clock jump": Config(
        jobs=0, producers=0, workers=0, lock_holders=3, lock_rounds=1, crashes=0,
        clock_jumps=1, rollback_txs=False,
    ),
    "producer (commit/rollback tx) x worker (ack/retry)": Config(
        jobs=2, producers=1, workers=1, crashes=0, clock_jumps=0,
        worker_actions=("ack", "retry"), rollback_txs=True,
    ),
    # (two publishers and a reader make 38k interleavings: they run in the
    # seeded budget instead)
    "1 publisher x 1 reader (read, save, re-read)": Config(
        jobs=0, producers=0, workers=0, publishers=1, events=1, readers=1, crashes=0,
        clock_jumps=0, rollback_txs=False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(EXHAUSTIVE))
def test_every_interleaving_keeps_the_invariants(name: str) -> None:
    """Each small configuration's every schedule, crash point and clock jump is run once."""
    result = explore(EXHAUSTIVE[name], limit=50_000)
    EXPLORED[name] = (
        f"{result.interleavings} interleavings, {result.steps} steps, "
        f"up to {result.max_depth} choices deep"
    )
    assert result.interleavings > 1


# -- the simulation catches broken engines ------------------------------------


class AckWithoutOwnership(SqliteDialect):
    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return Statement("DELETE FROM __alkstore_jobs WHERE id = ?", (job_id,), Fetch.ROWCOUNT)


class LockIgnoringExpiry(SqliteDialect):
    def acquire_lock(self, name: str, owner: str, now_us: int, until_us: int) -> Statement:
        # Takes the lock from anyone, live or not.
        return Statement(
            "INSERT INTO __alkstore_locks (name, owner, token, expires_at) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (name) DO UPDATE SET token = token + 1, owner = excluded.owner, "
            "expires_at = excluded.expires_at RETURNING token",
            (name, owner, until_us),
            Fetch.ONE,
        )


class ClaimIgnoringVisibility(SqliteDialect):
    def claim(self, queue: str, worker: str, n: int, now_us: int, until_us: int) -> Statement:
        # Claims processing jobs whose claim is still live.
        far = now_us + 10**15
        return super().claim(queue, worker, n, far, until_us)


@pytest.mark.parametrize(
    ("dialect", "config", "message"),
    [
        (AckWithoutOwnership(), Config(), "without ownership"),
        (
            LockIgnoringExpiry(),
            Config(jobs=0, producers=0, workers=0, lock_holders=3, crashes=0),
            "granted",
        ),
        (ClaimIgnoringVisibility(), Config(), "unexpired claim"),
    ],
    ids=["ack-without-ownership", "lock-ignoring-expiry", "claim-ignoring-visibility"],
)
def test_broken_engines_are_caught(dialect: SqliteDialect, config: Config, message: str) -> None:
    """A deliberately broken statement breaks an invariant within a few seeds."""
    for seed in range(200):
        try:
            run_seed(config, seed, dialect=dialect)
        except SimulationFailure as failure:
            assert message in str(failure)
            assert failure.seed == seed and f"--alkstore-seed={seed}" in str(failure)
            return
    pytest.fail("200 seeds ran without catching the broken engine")


def test_a_failure_replays_exactly_and_shrinks() -> None:
    """The same seed fails the same way; shrinking finds a shorter failing run."""
    broken = AckWithoutOwnership()
    config = Config(jobs=4, workers=3, crashes=2, clock_jumps=2)
    for seed in range(200):
        chooser = SeededChooser(seed)
        try:
            Simulation(config, chooser, dialect=broken).run()
        except SimulationFailure as failure:
            first = failure
            break
    else:
        pytest.fail("no failing seed")
    with pytest.raises(SimulationFailure) as again:
        run_seed(config, seed, dialect=broken)
    assert again.value.trace == first.trace
    smaller, shrunk = shrink(config, chooser.taken, dialect=broken)
    assert len(shrunk.trace) <= len(first.trace)
    assert len(smaller) <= len(chooser.taken)
    assert "without ownership" in str(shrunk)
