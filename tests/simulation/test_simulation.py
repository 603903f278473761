"""Deterministic simulation of many actors over one database.

Invariants (checked after every step, stated in alkstore/testing/{invariants,stepping}.py):
committed jobs are never lost; an acked job is never delivered again; a job
never has two unexpired owners; a job is settled only by its owner; attempts
never exceed max_attempts; one lock never has two unexpired holders and its
fencing tokens increase; two live jobs of a queue never hold one unique
key; a claim leaves at most N jobs of a concurrency key holding live
claims (N: the queue's limit); no window of a rate's period holds more claims
than its limit, for the queue and for each key; a job listing holds each
job once and every job present throughout it; stream readers see committed offsets in order with
no gaps; saved offsets never move back; a rolled-back transaction leaves no
row, event or notification; a schedule's fire time is enqueued at most once,
never before it comes, and one tick enqueues at most its catch-up cap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from alkstore.engines.postgres import PostgresDialect
from alkstore.engines.sqlite import SqliteDialect
from alkstore.protocol.dialect import Dialect
from alkstore.protocol.plan import Fetch, Statement
from alkstore.protocol.values.types import NewJob
from alkstore.testing import (
    Config,
    SeededChooser,
    Simulation,
    SimulationFailure,
    explore,
    run_seed,
    shrink,
)
from alkstore.testing.sim_backend import SimBackend
from alkstore.testing.sim_postgres import PostgresSimBackend
from alkstore.testing.sim_sqlite import SqliteSimBackend

from ..backends import BACKENDS, PG_DSN, PG_TEST_SCHEMA_PREFIX, selected_backends
from .conftest import explored

# Everything at once: producers with committed and rolled-back transactions,
# workers that ack, retry, fail, heartbeat, release or walk away, lock
# holders, stream publishers and readers, two scheduler tickers racing on
# one schedule, two crashes, two dropped connections and two clock jumps;
# the queue keeps its finished jobs in history (every ack moves one).
RICH = Config(
    jobs=6, producers=2, workers=3, lock_holders=2, publishers=2, readers=2,
    tickers=2, crashes=2, drops=2, clock_jumps=2, keep_history=True,
)  # fmt: skip
BUDGET_S = float(os.environ.get("ALKSTORE_SIM_BUDGET", "20"))
ENGINES = sorted({BACKENDS[b].engine for b in selected_backends()})


def _schema() -> str:
    # The test session drops every schema with this prefix and our pid.
    return f"{PG_TEST_SCHEMA_PREFIX}{os.getpid()}_sim_{os.urandom(4).hex()}"


def open_backend(engine: str, dialect: type[Dialect] | None = None) -> SimBackend:
    """A simulation backend on ``engine``, with the engine's own dialect or a
    (deliberately broken) subclass of it."""
    if engine == "sqlite":
        return SqliteSimBackend(dialect() if dialect is not None else None)
    schema = _schema()
    return PostgresSimBackend(
        PG_DSN,
        schema,
        dialect(schema) if dialect is not None else None,  # type: ignore[call-arg]
    )


class Engines:
    """One simulation backend per engine, opened on first use, for the module."""

    def __init__(self) -> None:
        self._open: dict[str, SimBackend] = {}

    def __getitem__(self, engine: str) -> SimBackend:
        if engine not in self._open:
            self._open[engine] = open_backend(engine)
        return self._open[engine]

    def close(self) -> None:
        for backend in self._open.values():
            backend.close()


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    opened = Engines()
    yield opened
    opened.close()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, engines: Engines) -> SimBackend:
    return engines[request.param]


def test_seeded_simulations_within_budget(
    engine: SimBackend, request: pytest.FixtureRequest
) -> None:
    """Every seed in the budget (or the one given by --alkstore-seed) keeps every invariant."""
    seed = request.config.getoption("--alkstore-seed")
    if seed is not None:
        run_seed(RICH, seed, backend=engine, shrink_failures=True)
        return
    deadline = time.monotonic() + BUDGET_S
    runs = steps = 0
    while time.monotonic() < deadline:
        steps += run_seed(RICH, runs, backend=engine, shrink_failures=True)
        runs += 1
    explored(request, f"{engine.name}: seeded (rich config)",
             f"{runs} seeds, {steps} steps in {BUDGET_S:g} s")  # fmt: skip
    assert runs > 0


# Two producers racing on two unique keys (and rolling some back) while
# workers ack, retry, fail, release or stall.
UNIQUE = Config(jobs=6, producers=2, workers=2, unique_keys=2, crashes=1, clock_jumps=1)
FLOW_BUDGET_S = min(BUDGET_S, 5.0)

# Producers dealing jobs over two concurrency keys (limit 1) while three
# workers, each claiming two at a time, ack, retry, heartbeat or stall,
# with a crash and a clock jump (on Postgres the exhaustive configurations
# of limits and rates are too many interleavings for the budget: seeded runs
# cover them, and a claim reading the limits without the queue row's lock
# is caught below).
LIMITED_RICH = Config(
    jobs=6, producers=2, workers=3, concurrency_keys=2, claim_n=2, crashes=1, clock_jumps=1,
    worker_actions=("ack", "retry", "heartbeat", "stall"),
)  # fmt: skip

# Producers dealing jobs over two concurrency keys into a queue that
# admits 2 claims per 5 s, and 1 per key, while three workers, each
# claiming two at a time, ack, retry, heartbeat or stall, with a crash and
# two clock jumps (each longer than the window) that let more claims in.
RATED_RICH = Config(
    jobs=6, producers=2, workers=3, concurrency_keys=2, concurrency_limit=None, rate_limit=2,
    key_rate_limit=1, claim_n=2, crashes=1, clock_jumps=2,
    worker_actions=("ack", "retry", "heartbeat", "stall"),
)  # fmt: skip

# (label, configuration): the invariant each one exercises, checked after
# every commit like every other, is in the comment above its configuration.
FLOW_CONTROL = {
    # two live jobs of a queue never hold one unique key
    "unique keys": UNIQUE,
    # a claim leaves at most N jobs of a concurrency key holding live claims
    "concurrency limits": LIMITED_RICH,
    # no window of a rate's period holds more claims than its limit, per queue and key
    "rate limits": RATED_RICH,
}


def seeded_within(
    config: Config, engine: SimBackend, label: str, request: pytest.FixtureRequest
) -> None:
    """Seeds 0, 1, ... of ``config`` until the flow budget is spent; each keeps every invariant."""
    deadline = time.monotonic() + FLOW_BUDGET_S
    runs = steps = 0
    while time.monotonic() < deadline:
        steps += run_seed(config, runs, backend=engine, shrink_failures=True)
        runs += 1
    explored(request, f"{engine.name}: seeded ({label})",
             f"{runs} seeds, {steps} steps in {FLOW_BUDGET_S:g} s")  # fmt: skip
    assert runs > 0


@pytest.mark.parametrize("label", sorted(FLOW_CONTROL))
def test_flow_control_holds_under_racing_actors(
    engine: SimBackend, label: str, request: pytest.FixtureRequest
) -> None:
    """Invariants: unique keys, concurrency limits and rates hold whatever
    the producers' and workers' interleaving (seeded runs, small budget)."""
    seeded_within(FLOW_CONTROL[label], engine, label, request)


# An inspector lists the workers' queue (every state) after each commit
# while a producer enqueues and two workers ack, retry, fail, release or
# stall, with a crash and a clock jump: each job moves between the
# listing's sources (pending, processing, dead) while it reads them.
LISTED = Config(
    jobs=4, producers=1, workers=2, inspectors=1, crashes=1, clock_jumps=1,
    worker_actions=("ack", "retry", "fail", "release", "stall"),
)  # fmt: skip


def test_job_listings_read_one_snapshot_under_racing_actors(
    engine: SimBackend, request: pytest.FixtureRequest
) -> None:
    """Invariant: a job listing holds each job once, and every job present
    from its start to its end (``Ledger.listed``), however the workers move them."""
    seeded_within(LISTED, engine, "job listings", request)


def test_a_listing_read_in_a_snapshot_per_statement_is_caught() -> None:
    """Postgres reads begun at READ COMMITTED (each statement its own
    snapshot, as before the fix) list a moving job twice or not at all."""
    if "postgres" not in ENGINES:
        pytest.skip("no Postgres backend selected (ALKSTORE_BACKENDS)")
    backend = PostgresSimBackend(PG_DSN, _schema(), read_begin="BEGIN READ ONLY")
    try:
        for seed in range(200):
            try:
                run_seed(LISTED, seed, backend=backend)
            except SimulationFailure as failure:
                assert "a job listing" in str(failure)
                return
        pytest.fail("200 seeds ran without catching statement-per-snapshot reads")
    finally:
        backend.close()


def test_a_seed_replays_the_same_interleaving(engine: SimBackend) -> None:
    """The same seed takes the same choices and the same steps, on a live server too."""
    traces = []
    for _ in range(2):
        sim = Simulation(RICH, SeededChooser(11), backend=engine)
        sim.run()
        traces.append(sim.trace)
    assert traces[0] == traces[1]
    assert any("CRASH" in line for line in traces[0])


def test_a_run_cut_short_mid_transaction_still_drains(engine: SimBackend) -> None:
    """Runs stopped by max_steps with transactions open roll them back and drain cleanly."""
    config = Config(jobs=4, workers=2, crashes=0, clock_jumps=0, max_steps=7)
    for seed in range(10):
        run_seed(config, seed, backend=engine)


LIMITED = Config(
    jobs=3, producers=0, workers=2, pre_enqueued=True, concurrency_keys=2, claim_n=2,
    crashes=0, clock_jumps=0, worker_actions=("ack",), rollback_txs=False,
)  # fmt: skip

EXHAUSTIVE = {
    # the example: 2 workers x 2 jobs x up to one crash
    "2 workers x 2 jobs x <=1 crash": Config(
        jobs=2, producers=0, workers=2, pre_enqueued=True, crashes=1, clock_jumps=0,
        worker_actions=("ack",), rollback_txs=False,
    ),
    # the same, each ack moving its job into history
    "2 workers x 2 jobs x <=1 crash x history": Config(
        jobs=2, producers=0, workers=2, pre_enqueued=True, crashes=1, clock_jumps=0,
        worker_actions=("ack",), rollback_txs=False, keep_history=True,
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
    # two producers, one unique key: one live job at a time
    "2 unique producers x 1 key x worker (ack)": Config(
        jobs=2, producers=2, workers=1, unique_keys=1, crashes=0, clock_jumps=0,
        worker_actions=("ack",), rollback_txs=False,
    ),
    # per-key limit 1: two workers race, each claim asking for two jobs
    "2 workers (claim 2) x 3 jobs over 2 concurrency keys, limit 1": LIMITED,
    "2 workers x 2 jobs x 1 concurrency key, limit 1 x ack/stall": Config(
        jobs=2, producers=0, workers=2, pre_enqueued=True, concurrency_keys=1, crashes=0,
        clock_jumps=0, worker_actions=("ack", "stall"), rollback_txs=False,
    ),
    # a rate of 1 claim per window: two workers race for three jobs, each
    # claim asking for two, a clock jump opening the next window
    "2 workers (claim 2) x 3 jobs, rate 1 per window x <=1 clock jump": Config(
        jobs=3, producers=0, workers=2, pre_enqueued=True, rate_limit=1, claim_n=2,
        crashes=0, clock_jumps=1, worker_actions=("ack",), rollback_txs=False,
    ),
    # a per-key rate of 1 over two keys
    "2 workers (claim 2) x 3 jobs over 2 keys, rate 1 per key": Config(
        jobs=3, producers=0, workers=2, pre_enqueued=True, concurrency_keys=2,
        concurrency_limit=None, key_rate_limit=1, claim_n=2, crashes=0, clock_jumps=0,
        worker_actions=("ack",), rollback_txs=False,
    ),
    # one fire time, enqueued exactly once
    "2 tickers x 1 due schedule": Config(
        jobs=0, producers=0, workers=0, tickers=2, ticks=1, crashes=0, clock_jumps=0,
        rollback_txs=False,
    ),
    # catch-up "all": 7 fire times missed, a cap of 3, two tickers, and a
    # clock jump that makes 2 more due between their ticks
    "2 tickers x catch-up all (7 missed, cap 3) x <=1 clock jump": Config(
        jobs=0, producers=0, workers=0, tickers=2, ticks=2, crashes=0, clock_jumps=1,
        rollback_txs=False, catch_up="all", catch_up_max=3, missed_fire_times=7,
    ),
    # the connection dies under any open transaction; the worker carries on
    "1 worker x 1 job x heartbeat/ack x <=1 dropped connection x <=1 clock jump": Config(
        jobs=1, producers=0, workers=1, pre_enqueued=True, crashes=0, drops=1,
        clock_jumps=1, worker_actions=("heartbeat", "ack"), rollback_txs=False,
    ),
}  # fmt: skip

# On Postgres every actor can hold a write transaction at once, so the same
# configurations have many more interleavings (statements wait on each
# other's row locks inside the server), and each costs round trips: smaller
# ones, chosen where Postgres's locking differs from SQLite's single writer.
EXHAUSTIVE_PG = {
    # a crash anywhere, even with a row locked mid-claim or mid-ack; the
    # restarted worker reclaims after the clock jump. (Two workers and a
    # crash make more than 9,000 interleavings here: seeded runs cover them.)
    "1 worker x 1 job x ack/retry x <=1 crash x <=1 clock jump": Config(
        jobs=1, producers=0, workers=1, pre_enqueued=True, crashes=1, clock_jumps=1,
        worker_actions=("ack", "retry"), rollback_txs=False,
    ),
    # the same, the ack a move into history (one statement here)
    "1 worker x 1 job x ack/retry x <=1 crash x <=1 clock jump x history": Config(
        jobs=1, producers=0, workers=1, pre_enqueued=True, crashes=1, clock_jumps=1,
        worker_actions=("ack", "retry"), rollback_txs=False, keep_history=True,
    ),
    # two inserters of one lock row: the second waits on the first's insert
    "2 lock holders x 1 lock": Config(
        jobs=0, producers=0, workers=0, lock_holders=2, lock_rounds=1, crashes=0,
        clock_jumps=0, rollback_txs=False,
    ),
    # two publishers queue on the stream's counter row
    "2 publishers x 1 event each": Config(
        jobs=0, producers=0, workers=0, publishers=2, events=1, readers=0, crashes=0,
        clock_jumps=0, rollback_txs=False,
    ),
    "1 publisher x 1 reader (read, save, re-read)": EXHAUSTIVE[
        "1 publisher x 1 reader (read, save, re-read)"
    ],
    "1 worker x 1 job x heartbeat/ack x <=1 dropped connection x <=1 clock jump": EXHAUSTIVE[
        "1 worker x 1 job x heartbeat/ack x <=1 dropped connection x <=1 clock jump"
    ],
    # two tickers race on one due schedule inside the server
    "2 tickers x 1 due schedule": EXHAUSTIVE["2 tickers x 1 due schedule"],
    # two inserts of one key: the second waits on the first's index entry
    "2 unique producers x 1 key": Config(
        jobs=2, producers=2, workers=0, unique_keys=1, crashes=0, clock_jumps=0,
        rollback_txs=True,
    ),
    # two tickers on a catch-up "all" batch (one tick each: the row lock and the
    # compare-and-set decide which of them enqueues the 3)
    "2 tickers x catch-up all (7 missed, cap 3)": Config(
        jobs=0, producers=0, workers=0, tickers=2, ticks=1, crashes=0, clock_jumps=0,
        rollback_txs=False, catch_up="all", catch_up_max=3, missed_fire_times=7,
    ),
}  # fmt: skip

EXHAUSTIVE_CASES = [
    pytest.param(e, name, id=f"{e}-{name}")
    for e in ENGINES
    for name in (EXHAUSTIVE if e == "sqlite" else EXHAUSTIVE_PG)
]


@pytest.mark.parametrize(("engine_name", "name"), EXHAUSTIVE_CASES)
def test_every_interleaving_keeps_the_invariants(
    engine_name: str, name: str, engines: Engines, request: pytest.FixtureRequest
) -> None:
    """Each small configuration's every schedule, crash point and clock jump is run once."""
    config = (EXHAUSTIVE if engine_name == "sqlite" else EXHAUSTIVE_PG)[name]
    result = explore(config, limit=50_000, backend=engines[engine_name])
    explored(request, f"{engine_name}: {name}",
             f"{result.interleavings} interleavings, {result.steps} steps, "
             f"up to {result.max_depth} choices deep")  # fmt: skip
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
    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        # Claims processing jobs whose claim is still live.
        far = now_us + 10**15
        return super().claim(queue, worker, n, far, until_us, generation)


class PgAckWithoutOwnership(PostgresDialect):
    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return Statement(f"DELETE FROM {self.jobs} WHERE id = $1", (job_id,), Fetch.ROWCOUNT)


class AckForgettingHistory(SqliteDialect):
    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (self.ack(job_id, worker, claim, now_us),)  # deletes, keeps nothing


class PgAckForgettingHistory(PostgresDialect):
    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (self.ack(job_id, worker, claim, now_us),)


class AckLeavingAttempts(SqliteDialect):
    """An ack (or a cancel, or a prune) that forgets nothing: the attempts of
    a job retried before its ack outlive it."""

    def forget_attempts(self, job_ids: Sequence[int]) -> Statement:
        return Statement("SELECT 1", (), Fetch.NONE)


class PgAckLeavingAttempts(PostgresDialect):
    def forget_attempts(self, job_ids: Sequence[int]) -> Statement:
        return Statement("SELECT 1", (), Fetch.NONE)


class PgLockIgnoringExpiry(PostgresDialect):
    def acquire_lock(self, name: str, owner: str, now_us: int, until_us: int) -> Statement:
        return Statement(
            f"INSERT INTO {self.locks} AS l (name, owner, token, expires_at) "
            "VALUES ($1, $2, 1, $3) ON CONFLICT (name) DO UPDATE SET token = l.token + 1, "
            "owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at RETURNING token",
            (name, owner, until_us),
            Fetch.ONE,
        )


class PgClaimIgnoringVisibility(PostgresDialect):
    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        return super().claim(queue, worker, n, now_us + 10**15, until_us, generation)

    def claim_at_once(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement | None:
        return super().claim_at_once(queue, worker, n, now_us + 10**15, until_us, generation)


class PgClaimWithoutRowLock(PostgresDialect):
    """The claim with its ``FOR UPDATE SKIP LOCKED`` taken out. Only a
    Postgres run can catch this one: two claims race inside the server, the
    second waits on the first's row and, once it commits, re-checks only the
    join, not whether the job is still claimable. SQLite's single writer
    never lets two claims overlap."""

    _claim = PostgresDialect._claim.replace("FOR UPDATE SKIP LOCKED", "")
    _claim_at_once = PostgresDialect._claim_at_once.replace("FOR UPDATE SKIP LOCKED", "")


class PgTickWithoutGuards(PostgresDialect):
    """The scheduler's two guards taken out: due schedules read without
    ``FOR UPDATE SKIP LOCKED``, advanced without the compare-and-set on the
    fire time. (Either guard alone keeps each fire time to one job: see
    ``test_either_scheduler_guard_alone_fires_once``.)"""

    _due_schedules = PostgresDialect._due_schedules.replace(" FOR UPDATE SKIP LOCKED", "")
    _advance_schedule = PostgresDialect._advance_schedule.replace(
        " AND next_fire_at = :fire_at", " AND :fire_at::bigint IS NOT NULL"
    )


class PgTickWithoutCas(PostgresDialect):
    _advance_schedule = PgTickWithoutGuards._advance_schedule


class PgTickWithoutRowLock(PostgresDialect):
    _due_schedules = PgTickWithoutGuards._due_schedules


class UniqueIgnoringProcessing(SqliteDialect):
    """A unique enqueue takes the key from a processing job whatever its
    queue's policy says (the default: a processing job keeps it)."""

    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        sql = (
            "UPDATE __alkstore_jobs SET unique_slot = NULL WHERE id = ? AND queue = ? "
            "AND unique_slot = ? AND state = 1"
        )
        return Statement(sql, (job_id, queue, key), Fetch.ROWCOUNT)


class PgUniqueIgnoringProcessing(PostgresDialect):
    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        sql = (
            f"UPDATE {self.jobs} SET unique_slot = NULL WHERE id = $1 AND queue = $2 "
            "AND unique_slot = $3 AND state = 1"
        )
        return Statement(sql, (job_id, queue, key), Fetch.ROWCOUNT)


class PgUniqueWithoutIndex(PostgresDialect):
    """The key checked by a read in the insert (NOT EXISTS), the unique index
    left out (the job never takes a slot): on Postgres two producers' inserts
    both pass the check before either commits. (On SQLite the single writer
    makes this check-then-insert safe, so it has no SQLite twin.)"""

    def enqueue_unique(self, job: NewJob, key: str, now_us: int) -> Statement:
        sql = (
            f"INSERT INTO {self.jobs} (queue, payload, priority, max_attempts, run_at, "
            "created_at, expires_at, visible_at, headers, unique_key) "
            "SELECT $1, $2, $3, $4, $5, $6, $7, $5, $8, $9::text WHERE NOT EXISTS "
            f"(SELECT 1 FROM {self.jobs} WHERE queue = $1 AND unique_key = $9::text) "
            "RETURNING id"
        )
        params = (
            job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
            now_us, job.expires_at_us, job.headers, key,
        )  # fmt: skip
        return Statement(sql, params, Fetch.ONE)

    def unique_holder(self, queue: str, key: str) -> Statement:
        sql = f"SELECT id, state FROM {self.jobs} WHERE queue = $1 AND unique_key = $2 LIMIT 1"
        return Statement(sql, (queue, key), Fetch.ONE)


class LimitCountedOncePerStatement(SqliteDialect):
    """The limited claim takes two jobs per statement, the key's room
    counted once before it: one claim of n can overrun a key."""

    def claim_limited(
        self,
        queue: str,
        worker: str,
        now_us: int,
        until_us: int,
        concurrency: int | None,
        key_rate: tuple[int, int] | None,
        generation: int,
    ) -> Statement:
        real = super().claim_limited(
            queue, worker, now_us, until_us, concurrency, key_rate, generation
        )
        sql = real.sql.replace("WHERE id = (", "WHERE id IN (").replace("LIMIT 1)", "LIMIT 2)")
        return Statement(sql, real.params, real.fetch)


class PgLimitCountedOncePerStatement(PostgresDialect):
    _claim_limited = PostgresDialect._claim_limited.replace("LIMIT 1", "LIMIT 2")


class RateNotLogged(SqliteDialect):
    """A claim of a rate-limited queue forgets to log itself for the
    queue's rate: the window always looks empty."""

    def log_queue_claim(self, queue: str, at_us: int) -> Statement:
        return Statement("SELECT 1 WHERE 0")


class PgRateNotLogged(PostgresDialect):
    def log_queue_claim(self, queue: str, at_us: int) -> Statement:
        return Statement("SELECT 1 WHERE false")


class _HalfKeyWindow:
    """The per-key rate counts a window of half the period (a units slip):
    a key's claims come twice as fast as its rate allows."""

    def claim_limited(
        self,
        queue: str,
        worker: str,
        now_us: int,
        until_us: int,
        concurrency: int | None,
        key_rate: tuple[int, int] | None,
        generation: int,
    ) -> Statement:
        if key_rate is not None:
            limit, since = key_rate
            key_rate = (limit, now_us - (now_us - since) // 2)
        real: Any = super()
        return real.claim_limited(  # type: ignore[no-any-return]
            queue, worker, now_us, until_us, concurrency, key_rate, generation
        )


class KeyRateWindowTooShort(_HalfKeyWindow, SqliteDialect):
    pass


class PgKeyRateWindowTooShort(_HalfKeyWindow, PostgresDialect):
    pass


class PgLimitWithoutLock(PostgresDialect):
    """The limit read without locking the queue's row: two limited claims
    run side by side, neither sees the other's uncommitted claim, and both
    take a job of the same key."""

    _claim_limit = PostgresDialect._claim_limit.replace(" FOR UPDATE", "")


def test_the_text_edits_of_the_broken_dialects_take() -> None:
    """The dialects above that edit the real statements' text must change it,
    in what an instance sends: if the text they look for moved (into a rule
    fragment, say), the edit would do nothing and the tests that rely on it
    would pass vacuously."""
    real = PostgresDialect("alkstore")

    def sent(d: PostgresDialect, name: str) -> Any:
        rendered = getattr(d, name)
        if isinstance(rendered, dict):
            return {key: variant.sql for key, variant in rendered.items()}
        return rendered.sql

    def edited(cls: type[PostgresDialect], name: str) -> bool:
        mine, theirs = sent(cls("alkstore"), name), sent(real, name)
        if isinstance(mine, dict):  # every variant
            return all(mine[key] != theirs[key] for key in theirs)
        return bool(mine != theirs)

    assert edited(PgClaimWithoutRowLock, "_claim")
    assert edited(PgTickWithoutCas, "_advance_schedule")
    assert not edited(PgTickWithoutCas, "_due_schedules")
    assert edited(PgTickWithoutRowLock, "_due_schedules")
    assert not edited(PgTickWithoutRowLock, "_advance_schedule")
    assert edited(PgLimitWithoutLock, "_claim_limit")
    assert edited(PgLimitCountedOncePerStatement, "_claim_limited")
    for key_rate in (None, (1, 0)):
        lite = SqliteDialect().claim_limited("q", "w", 0, 1, 1, key_rate, 1).sql
        broken = LimitCountedOncePerStatement().claim_limited("q", "w", 0, 1, 1, key_rate, 1).sql
        assert broken != lite


@pytest.mark.skipif("postgres" not in ENGINES, reason="Postgres not selected")
@pytest.mark.parametrize("dialect", [PgTickWithoutCas, PgTickWithoutRowLock])
def test_either_scheduler_guard_alone_fires_once(dialect: type[PostgresDialect]) -> None:
    """Every interleaving of two tickers with one guard left enqueues each fire time once."""
    backend = open_backend("postgres", dialect)
    try:
        result = explore(EXHAUSTIVE["2 tickers x 1 due schedule"], backend=backend)
    finally:
        backend.close()
    assert result.interleavings > 100


class AdvanceNotMovingOn(SqliteDialect):
    """The tick's move binds the fire time it read as the new one (a
    parameter slip): the row never moves on, so the next tick enqueues the
    same fire times again."""

    def advance_schedule(
        self, name: str, fire_at_us: int, next_fire_us: int, last_fire_us: int | None
    ) -> Statement:
        return super().advance_schedule(name, fire_at_us, fire_at_us, last_fire_us)


class PgAdvanceNotMovingOn(PostgresDialect):
    def advance_schedule(
        self, name: str, fire_at_us: int, next_fire_us: int, last_fire_us: int | None
    ) -> Statement:
        return super().advance_schedule(name, fire_at_us, fire_at_us, last_fire_us)


CATCH_UP_ALL = Config(
    jobs=0, producers=0, workers=0, tickers=2, ticks=2, crashes=0, clock_jumps=1,
    rollback_txs=False, catch_up="all", catch_up_max=3, missed_fire_times=7,
)  # fmt: skip

BROKEN = {
    "catch-up-all-not-moving-on": (
        AdvanceNotMovingOn, PgAdvanceNotMovingOn, CATCH_UP_ALL, "fired twice",
    ),
    "ack-without-ownership": (AckWithoutOwnership, PgAckWithoutOwnership, Config(), "ownership"),
    "lock-ignoring-expiry": (
        LockIgnoringExpiry,
        PgLockIgnoringExpiry,
        Config(jobs=0, producers=0, workers=0, lock_holders=3, crashes=0),
        "granted",
    ),
    "claim-ignoring-visibility": (
        ClaimIgnoringVisibility,
        PgClaimIgnoringVisibility,
        Config(),
        "unexpired claim",
    ),
    "scheduler-without-guards": (
        None,
        PgTickWithoutGuards,
        Config(jobs=0, producers=0, workers=0, tickers=2, ticks=1, crashes=0, clock_jumps=0),
        "fired twice",
    ),
    "ack-leaving-attempts": (
        AckLeavingAttempts, PgAckLeavingAttempts, Config(), "attempt rows outlive their jobs",
    ),
    "ack-forgetting-history": (
        AckForgettingHistory,
        PgAckForgettingHistory,
        Config(keep_history=True),
        "history holds",
    ),
    "unique-ignoring-processing": (
        UniqueIgnoringProcessing,
        PgUniqueIgnoringProcessing,
        Config(jobs=6, producers=2, workers=2, unique_keys=1, crashes=0, clock_jumps=0,
               worker_actions=("ack", "retry", "stall")),
        "two live jobs hold unique key",
    ),
    "unique-without-index": (
        None,
        PgUniqueWithoutIndex,
        Config(jobs=4, producers=2, workers=0, unique_keys=1, crashes=0, clock_jumps=0,
               rollback_txs=False),
        "two live jobs hold unique key",
    ),
    "limit-counted-once-per-statement": (
        LimitCountedOncePerStatement,
        PgLimitCountedOncePerStatement,
        Config(jobs=2, producers=0, workers=1, pre_enqueued=True, concurrency_keys=1,
               claim_n=2, crashes=0, clock_jumps=0, worker_actions=("ack",),
               rollback_txs=False),
        "over their limit",
    ),
    "limit-without-lock": (
        None,
        PgLimitWithoutLock,
        Config(jobs=2, producers=0, workers=2, pre_enqueued=True, concurrency_keys=1,
               crashes=0, clock_jumps=0, worker_actions=("ack", "stall"), rollback_txs=False),
        "over their limit",
    ),
    "rate-not-logged": (
        RateNotLogged,
        PgRateNotLogged,
        Config(jobs=3, producers=0, workers=2, pre_enqueued=True, rate_limit=1, crashes=0,
               clock_jumps=0, worker_actions=("ack",), rollback_txs=False),
        "over its rate",
    ),
    "key-rate-window-too-short": (
        KeyRateWindowTooShort,
        PgKeyRateWindowTooShort,
        Config(jobs=3, producers=0, workers=1, pre_enqueued=True, concurrency_keys=1,
               concurrency_limit=None, key_rate_limit=1, rate_period_s=20.0, crashes=0,
               clock_jumps=1, worker_actions=("ack",), rollback_txs=False),
        "over its rate",
    ),
    "rate-without-lock": (
        None,
        PgLimitWithoutLock,
        Config(jobs=2, producers=0, workers=2, pre_enqueued=True, rate_limit=1, crashes=0,
               clock_jumps=0, worker_actions=("ack",), rollback_txs=False),
        "over its rate",
    ),
    "claim-without-row-lock": (
        None,
        PgClaimWithoutRowLock,
        Config(jobs=4, producers=0, workers=3, pre_enqueued=True, crashes=0, clock_jumps=0),
        "unexpired claim",
    ),
}
BROKEN_CASES = [
    pytest.param(e, name, id=f"{e}-{name}")
    for e in ENGINES
    for name, (lite, pg, _, _) in BROKEN.items()
    if (lite if e == "sqlite" else pg) is not None
]


@pytest.mark.parametrize(("engine_name", "name"), BROKEN_CASES)
def test_broken_engines_are_caught(engine_name: str, name: str) -> None:
    """A deliberately broken statement breaks an invariant within a few seeds."""
    lite, pg, config, message = BROKEN[name]
    broken = lite if engine_name == "sqlite" else pg
    assert broken is not None
    backend = open_backend(engine_name, broken)
    try:
        for seed in range(200):
            try:
                run_seed(config, seed, backend=backend)
            except SimulationFailure as failure:
                assert message in str(failure)
                assert failure.seed == seed and f"--alkstore-seed={seed}" in str(failure)
                return
        pytest.fail("200 seeds ran without catching the broken engine")
    finally:
        backend.close()


@pytest.mark.parametrize("engine_name", ENGINES)
def test_a_catch_up_ignoring_its_cap_is_caught(
    engine_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A core whose catch-up "all" enqueues every missed fire time (its cap
    forgotten) breaks the cap invariant in the first seed."""
    from alkstore.protocol.values import schedules

    def uncapped(self: schedules.CatchUp, expr: schedules.Expression, fire_at: int, now: int,
                 latest: int) -> list[int]:  # fmt: skip
        times = [latest]
        while (earlier := expr.prev_before(times[-1])) >= fire_at:
            times.append(earlier)
        return times[::-1]

    monkeypatch.setattr(schedules.CatchUp, "_choose", uncapped)
    backend = open_backend(engine_name)
    try:
        with pytest.raises(SimulationFailure, match="over its cap 3"):
            run_seed(CATCH_UP_ALL, 0, backend=backend)
    finally:
        backend.close()


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
    # run_seed can do the shrinking and print the small trace with the seed
    with pytest.raises(SimulationFailure) as reported:
        run_seed(config, seed, dialect=broken, shrink_failures=True)
    shown = reported.value
    assert shown.seed == seed and f"--alkstore-seed={seed}" in str(shown)
    assert shown.shrunk_trace is not None and len(shown.shrunk_trace) <= len(first.trace)
    assert "smallest failing interleaving" in str(shown) and "without ownership" in str(shown)
