"""``Config``: what a simulation runs (actors and their programs, timeouts,
the fault budget).

A module of its own because both halves of the simulation read it: the
stepping engine (``stepping.py``) builds the actors it names, and their
programs (``actors.py``) take their counts and choices from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Config:
    """What runs: actors and their programs, timeouts, and the fault budget."""

    jobs: int = 4
    producers: int = 1
    workers: int = 2
    lock_holders: int = 0
    lock_rounds: int = 2
    publishers: int = 0
    events: int = 3
    readers: int = 0
    # Scheduler tickers racing on one "@every" schedule (into the workers' queue).
    tickers: int = 0
    ticks: int = 3
    schedule_every_s: int = 5
    # Its catch-up policy ("latest", "all" or "skip"), the cap of "all",
    # and how many of its fire times have passed when the tickers start.
    catch_up: str = "latest"
    catch_up_max: int | None = None
    missed_fire_times: int = 1
    visibility_timeout_s: float = 10.0
    lock_ttl_s: float = 10.0
    max_attempts: int = 3
    crashes: int = 1
    # Connection drops: an actor's connection dies mid-transaction; the
    # operation fails, the actor (same identity) carries on on a new one.
    drops: int = 0
    clock_jumps: int = 1
    rollback_txs: bool = True
    worker_actions: tuple[str, ...] = ("ack", "retry", "fail", "heartbeat", "release", "stall")
    max_steps: int = 2_000
    pre_enqueued: bool = False
    # The workers' queue keeps its finished jobs in history (set before any
    # actor runs): every ack moves its job there.
    keep_history: bool = False
    # Producers enqueue with unique keys, each choosing one of this many
    # (0: plain enqueues). A processing job keeps its key (the default).
    unique_keys: int = 0
    # Producers enqueue with concurrency keys, each choosing one of this
    # many (0: no keys), and the workers' queue limits each key to
    # ``concurrency_limit`` live claims (set before any actor runs).
    concurrency_keys: int = 0
    concurrency_limit: int | None = 1
    # The workers' queue admits at most ``rate_limit`` claims in any
    # ``rate_period_s`` (None: no rate), and ``key_rate_limit`` claims per
    # concurrency key in any such window (set before any actor runs).
    rate_limit: int | None = None
    key_rate_limit: int | None = None
    rate_period_s: float = 5.0
    # How many jobs a worker's claim asks for.
    claim_n: int = 1
    # Actors that list the workers' queue (``list_jobs``, every state) after
    # each commit, up to ``inspections`` times each.
    inspectors: int = 0
    inspections: int = 4
    # Producers enqueue workflows instead of single jobs: steps a and b, c
    # after both, d after c (c's and d's policy on a failed dependency,
    # cancel or run, chosen), and, once one has committed, single jobs
    # waiting for a job of an earlier one; workers ack with or without a
    # result. Every job of these is kept, so every ack moves it to history.
    graphs: bool = False
