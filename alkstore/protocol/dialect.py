"""What the core needs from an engine: statements, by name.

An engine module implements this protocol with its own SQL text, placeholder
style and name mapping. The row shapes are fixed here so that plans can read
rows the same way on every engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .plan import Statement
from .values.types import NewJob, NewSchedule

# Column order of a live job row, as every engine returns it.
JOB_COLUMNS = (
    "id", "queue", "payload", "priority", "attempts", "max_attempts", "run_at",
    "created_at", "expires_at", "claimed_by", "visible_at", "state", "last_error", "claims",
    "headers",
)  # fmt: skip
# Column order of a claimed job row: a live job row, then how long its queue
# keeps finished jobs (``history_us``: None keeps none), which the ack obeys,
# and whether it is kept (its finish recorded and settling its dependents).
CLAIM_COLUMNS = (*JOB_COLUMNS, "history_us", "keep")
# Column order of a live job row as the inspection reads it (``get_job``,
# ``job_page``): a live job row, then its flow-control keys.
JOB_INFO_COLUMNS = (*JOB_COLUMNS, "unique_key", "concurrency_key")
# Column order of a dead-letter row. It keeps the job's concurrency key
# (``requeue_dead`` brings the job back with it, still limited), not its
# unique key.
DEAD_COLUMNS = (
    "id", "queue", "payload", "priority", "attempts", "max_attempts", "run_at",
    "created_at", "expires_at", "claimed_by", "last_error", "reason", "died_at",
    "concurrency_key",
)  # fmt: skip
# Column order of a stream event row.
EVENT_COLUMNS = ("offset", "stream", "key", "payload", "created_at")
# Column order of a history row (a finished job kept for inspection). It
# keeps the job's unique key (``unique_for`` finds acked jobs by it) and
# its concurrency key.
HISTORY_COLUMNS = (
    "id", "queue", "outcome", "payload", "priority", "attempts", "max_attempts", "run_at",
    "created_at", "finished_at", "worker", "last_error", "unique_key", "concurrency_key",
    "result",
)  # fmt: skip
# Column order of a waiting job's row (its dependencies not all finished):
# what it needs to become a live job, its unfinished dependencies and what
# a failed one does to it (0: cancel it, 1: run it anyway).
WAITING_COLUMNS = (
    "id", "queue", "payload", "priority", "max_attempts", "run_at", "created_at",
    "expires_at", "headers", "concurrency_key", "remaining", "on_failure",
)  # fmt: skip
# Column order of a schedule row as listed.
SCHEDULE_COLUMNS = (
    "name", "queue", "expression", "payload", "options", "next_fire_at", "last_fire_at",
    "paused", "created_at", "tz", "catch_up", "catch_up_max", "catch_up_grace_us",
)  # fmt: skip
# Column order of a due schedule as a tick reads it.
DUE_SCHEDULE_COLUMNS = (
    "name", "queue", "expression", "tz", "payload", "options", "next_fire_at",
    "catch_up", "catch_up_max", "catch_up_grace_us",
)  # fmt: skip

# The rows of the read models, whose columns are computed: each engine
# writes its select list in this order.
# A queue's summary: the counts of ``queue_counts``, the visible_at of the
# oldest ready job, the dead and history counts, and its ``queues`` row
# (NULLs for a queue that has none): pause, retention, per-key concurrency
# limit and unique policy.
QUEUE_SUMMARY_COLUMNS = (
    "ready", "scheduled", "processing", "oldest_ready", "dead", "history", "paused",
    "history_us", "dead_us", "concurrency_limit", "rate_limit", "rate_period_us",
    "key_rate_limit", "key_rate_period_us", "unique_processing", "waiting",
)  # fmt: skip
# A stream's summary: its counter row (NULLs for a stream without one), its
# event count and its oldest event (NULLs for none).
STREAM_SUMMARY_COLUMNS = (
    "last_offset", "max_age_us", "max_events", "events", "oldest_offset", "oldest_created_at",
)  # fmt: skip
# A stream consumer's row.
CONSUMER_COLUMNS = ("consumer", "offset", "keep")
# A lock's row, and whether the lock rules say it is held now.
LOCK_COLUMNS = ("name", "owner", "token", "expires_at", "held")
# One attempt of a job's history (protocol.values.attempts).
ATTEMPT_COLUMNS = (
    "attempt", "outcome", "worker", "started_at", "finished_at", "error", "trace",
)  # fmt: skip

# What ``job_page`` lists of a queue's live jobs: every pending job, those
# claimable now (``ready``), those due later (``scheduled``: the stats'
# columns), or the claimed ones.
LIVE_FILTERS = ("pending", "ready", "scheduled", "processing")


def column_list(columns: tuple[str, ...], *, table: str = "") -> str:
    """``columns`` as an SQL select list, in the row shape's order, each
    qualified by ``table`` if given; ``offset`` (a reserved word on both
    engines) quoted. Engines build their select lists from the shapes above,
    so a row and the code that reads it cannot drift apart."""
    prefix = f"{table}." if table else ""
    return ", ".join(prefix + ('"offset"' if c == "offset" else c) for c in columns)

# Ownership of a claimed job is (claimed_by, claims): ``claims`` counts every
# claim of the job and never goes back (unlike ``attempts``, which a release
# refunds), so a handle from an earlier claim never matches a later one.

STATE_PENDING = 0
STATE_PROCESSING = 1


class Dialect(Protocol):
    """Statement builders of one engine. Every method is pure."""

    name: str
    # Largest NOTIFY payload in bytes the contract's ``PayloadTooLarge``
    # check enforces (None: no limit on this engine).
    notify_payload_limit: int | None

    # wakes
    def notify(self, channel: str, origin: str, now_us: int) -> Statement: ...
    def notify_new_jobs(self, channel: str, origin: str, now_us: int) -> Statement | None:
        """The wake of a queue's channel for jobs its transaction inserted
        (fresh ids): a statement like ``notify``'s, or None where other
        processes find new jobs in the jobs table itself (SQLite: ids only
        grow, so a watcher reads which queues gained jobs since it last
        looked). On None the plan puts ``channel`` on the insert's wakes,
        for this process's receivers."""
        ...

    # queues
    def enqueue(self, job: NewJob, now_us: int) -> Statement:
        """Insert ``job``; its result is the new id (``Fetch.INSERTED_ID``)."""
        ...
    def enqueue_waking(self, job: NewJob, channel: str, origin: str, now_us: int) -> Statement:
        """``enqueue``, also waking ``channel`` once it commits, in this
        process (the statement's ``wakes``) and in others (as
        ``notify_new_jobs`` does): one statement."""
        ...
    def enqueue_many(self, jobs: Sequence[NewJob], now_us: int) -> Statement:
        """One statement inserting every job (at most ``ENQUEUE_CHUNK``),
        each with its headers and concurrency key; its rows are the new ids,
        in any order."""
        ...
    # unique jobs (a live job holds its key in the unique index)
    def enqueue_unique(self, job: NewJob, key: str, now_us: int) -> Statement:
        """Insert ``job`` holding ``key`` unless a live job of its queue
        holds it; its row is ``(id,)`` of the new job, or none."""
        ...
    def unique_holder(self, queue: str, key: str) -> Statement:
        """Its row is ``(id, state)`` of the live job holding ``key``, or none."""
        ...
    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        """Job ``job_id`` gives ``key`` up, if it is processing and its queue
        lets a processing job yield its key; counts the rows (0 or 1)."""
        ...
    def unique_acked(self, queue: str, key: str, since_us: int) -> Statement:
        """Its row is ``(id,)`` of the newest job of ``queue`` with ``key``
        acked at or after ``since_us`` and kept in history, or none."""
        ...
    def set_unique_processing(self, queue: str, blocks: bool) -> Statement:
        """Record whether a processing job of ``queue`` keeps its unique key."""
        ...
    def claim_prelude(self) -> tuple[Statement, ...]:
        """Statements a claim runs first in its transaction (``Fetch.NONE``):
        whatever keeps the claim on its index walk however stale the
        planner's statistics."""
        ...
    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        """Claim up to ``n`` jobs of an unlimited, running queue, in claim
        order; none at all while the store's claim generation is newer than
        ``generation`` (the claiming code's, ``protocol.generation``)."""
        ...
    def claim_at_once(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement | None:
        """``claim`` as one statement that also reads when the queue's next
        live job falls due: its rows are ``claim``'s, each with that instant
        as one more column, NULL when all ``n`` were claimed (the next-due
        read of ``claim_for_worker``, the claimed jobs counted at
        ``until_us``); no row when nothing was claimed. None on an engine
        where a statement costs no round trip (SQLite): the worker claims
        step by step there."""
        ...
    def claim_limit(self, queue: str) -> Statement:
        """Its row is the queue's limits (``LIMIT_COLUMNS``: concurrency
        limit, rate limit and period, per-key rate limit and period) when
        ``queue`` is limited and running (none otherwise); taken by a claim
        ``claim`` found closed. On an engine with concurrent writers it locks
        the queue's row until commit, so limited claims of a queue run one
        after the other."""
        ...
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
        """Claim the first claimable job (claim order) whose concurrency key
        has fewer than ``concurrency`` live claims (None: not checked) and,
        with ``key_rate`` = (limit, since_us), fewer than ``limit`` claims
        logged after ``since_us``, or none: zero or one row, shaped like
        ``claim``'s; none while the store's claim generation is newer than
        ``generation``."""
        ...
    def claim_generation(self) -> Statement:
        """Its one row holds the store's claim generation (None: none
        recorded); read when a claim came back empty, to say why."""
        ...
    def set_concurrency_keys(self, pairs: Sequence[tuple[int, str]]) -> Statement:
        """Give each (job id, concurrency key) job its key, in the
        transaction that inserted it."""
        ...
    def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        rate: tuple[int, int] | None,
        key_rate: tuple[int, int] | None,
    ) -> Statement:
        """Record ``queue``'s limits, replacing what it had: the per-key
        concurrency limit, the rate and the per-key rate as (limit,
        period_us); None lifts one."""
        ...
    def queue_limits(self, queue: str) -> Statement:
        """Its row is the queue's ``LIMIT_COLUMNS``, or none for a queue
        never configured."""
        ...
    def claims_in_window(self, queue: str, since_us: int) -> Statement:
        """Its row is ``(count,)``: claims of ``queue`` logged for its own
        rate after ``since_us``."""
        ...
    def window_opens(self, queue: str, since_us: int, skip: int) -> Statement:
        """Its row is ``(at,)``: the instant of the claim of ``queue`` logged
        for its own rate after ``since_us``, ``skip`` entries from the
        oldest (none when there are fewer)."""
        ...
    def first_key_claim(self, queue: str, since_us: int) -> Statement:
        """Its row is ``(at,)``: the oldest claim of ``queue`` logged under a
        concurrency key after ``since_us`` (NULL when there is none)."""
        ...
    def log_queue_claim(self, queue: str, at_us: int) -> Statement:
        """Log one claim of ``queue`` for its own rate."""
        ...
    def log_key_claim(self, job_id: int, at_us: int) -> Statement:
        """Log the claim of job ``job_id`` under its concurrency key (nothing
        for a job without one)."""
        ...
    def prune_claim_log(self, queue: str, before_us: int) -> Statement:
        """Forget ``queue``'s claims logged at or before ``before_us`` (out
        of every window)."""
        ...
    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement: ...
    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        """``ack``, moving the job into history (outcome ``acked``, pruned at
        ``prune_at_us``) instead of deleting it. The first statement's row
        count says whether it was still owned; the rest (an engine that
        copies before it deletes) only run if it was. So for every move below."""
        ...
    def ack_batch(
        self, queue: str, job_ids: Sequence[int], worker: str, now_us: int
    ) -> Statement: ...
    def ack_batch_history(
        self, queue: str, job_ids: Sequence[int], worker: str, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        """``ack_batch``, moving the jobs into history; the first statement's
        row count is how many were still owned."""
        ...
    def ack_claims(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int
    ) -> Statement:
        """Ack every (job id, claim number) still owned by ``worker``; its
        rows are the ids acked."""
        ...
    def ack_claims_history(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        """``ack_claims``, moving the jobs into history; the first statement's
        rows are the ids acked."""
        ...
    def owned(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement: ...
    def next_due(self, queue: str) -> Statement: ...
    def release_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, refund: int
    ) -> Statement: ...
    # ``error`` below has been through ``claim.storable_error``: every engine
    # can store it as given.
    def reschedule(self, job_id: int, run_at_us: int, error: str | None) -> Statement: ...
    def extend_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, until_us: int
    ) -> Statement: ...
    def bury(
        self, job_id: int, reason: str, error: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        """Move the job to the dead letters, with a prune time if its queue
        has a dead retention (``rules.dead_prune_at``)."""
        ...
    def cancel_target(self, queue: str, job_id: int) -> Statement:
        """Its row is ``(state,)`` of the live job ``job_id`` of ``queue``
        (none: no such job), locked until commit on an engine with
        concurrent writers, so the cancel that follows removes the job in
        that state."""
        ...
    def cancel(self, queue: str, job_id: int) -> Statement: ...
    def cancel_history(
        self, queue: str, job_id: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        """``cancel``, moving the job into history (outcome ``cancelled``);
        the first statement's row count says whether there was one."""
        ...
    # ``queue`` None below: the job in whichever queue holds it.
    def get_job(self, queue: str | None, job_id: int) -> Statement:
        """The live job row (``JOB_INFO_COLUMNS``), if any."""
        ...
    def get_dead(self, queue: str | None, job_id: int) -> Statement: ...
    def get_history(self, queue: str | None, job_id: int) -> Statement:
        """The history row (``HISTORY_COLUMNS``) of a finished job, if kept."""
        ...
    def cancelled_among(self, queue: str, job_ids: Sequence[int]) -> Statement:
        """Its rows are ``(id,)`` of those of ``job_ids`` that are neither
        live nor dead in ``queue`` nor kept in its history with an outcome
        other than ``cancelled``, in any order: one statement (one snapshot)
        for every id."""
        ...

    def sweep_candidates(self, queue: str | None, now_us: int, limit: int) -> Statement: ...
    def queue_counts(self, queue: str, now_us: int) -> Statement: ...
    def oldest_ready(self, queue: str, now_us: int) -> Statement:
        """Its row is ``(visible_at,)`` of the ready job (``queue_counts``'s
        ``ready``) that became due first; none, or ``(NULL,)``, when no job
        is ready."""
        ...

    def set_paused(self, queue: str, paused: bool) -> Statement:
        """Record whether ``queue`` is paused (claims take nothing from it)."""
        ...

    def queue_paused(self, queue: str) -> Statement:
        """Its row is ``(paused,)``, or none for a queue never paused."""
        ...

    def set_retention(
        self, queue: str, history_us: int | None, dead_us: int | None, results_us: int | None
    ) -> Statement:
        """Record how long ``queue`` keeps finished jobs, dead letters and
        kept jobs' results (None: none kept / until purged / a day); its
        pause flag stays."""
        ...

    def queue_retention(self, queue: str) -> Statement:
        """Its row is ``(history_us, dead_us, results_us)``, or none for a
        queue never configured."""
        ...

    def dead_count(self, queue: str) -> Statement: ...
    def dead_letters(self, queue: str, limit: int) -> Statement: ...
    def requeue_dead(self, queue: str, job_id: int, now_us: int) -> tuple[Statement, ...]: ...
    def purge_dead(self, queue: str, before_us: int | None) -> Statement: ...
    def purge_dead_ids(self, queue: str, job_ids: Sequence[int]) -> Statement:
        """Delete those of ``job_ids`` that are dead letters of ``queue``; counts them."""
        ...

    def queue_names(self) -> Statement:
        """Every queue with live jobs, dead letters, history rows or a row in
        the ``queues`` table, sorted; one ``(name,)`` row each. The job
        tables are walked one name at a time (an index skip-scan), never
        read whole."""
        ...

    def queue_summary(self, queue: str, now_us: int) -> Statement:
        """One row, ``QUEUE_SUMMARY_COLUMNS``."""
        ...

    def job_page(
        self, queue: str, which: str, after: int, limit: int, now_us: int
    ) -> Statement:
        """Live jobs (``JOB_INFO_COLUMNS``) of ``queue`` with ids above ``after``,
        ascending, at most ``limit``; ``which`` is one of ``LIVE_FILTERS``."""
        ...

    def dead_page(self, queue: str, after: int, limit: int) -> Statement:
        """Dead letters (``DEAD_COLUMNS``) with ids above ``after``, ascending."""
        ...

    def history_page(self, queue: str, outcome: str, after: int, limit: int) -> Statement:
        """History rows (``HISTORY_COLUMNS``) of ``outcome`` with ids above
        ``after``, ascending."""
        ...

    def finished_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        """Rows ``(bucket, count)``: ``queue``'s history rows finished at or
        after ``since_us`` and before ``until_us``, counted by bucket
        ``(finished_at - since_us) // bucket_us`` (a range of the history's
        (queue, finished_at) index)."""
        ...

    def dead_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        """``finished_per_bucket`` for ``queue``'s deaths (its attempt rows
        that are not retries), a requeued letter's included."""
        ...

    def prune_history(self, now_us: int, limit: int) -> Statement:
        """Delete up to ``limit`` history rows whose prune time has come; counts them."""
        ...

    def prune_dead(self, now_us: int, limit: int) -> Statement:
        """Delete up to ``limit`` dead letters whose prune time has come; counts them."""
        ...

    # streams
    def next_offset(self, stream: str) -> Statement: ...
    def head_offset(self, stream: str) -> Statement:
        """Its row is ``(last offset given out,)``, or none for a stream never published to."""
        ...

    def insert_event(
        self, stream: str, offset: int, key: str | None, payload_json: str, now_us: int
    ) -> Statement: ...
    def read_since(self, stream: str, offset: int, limit: int) -> Statement: ...
    def events_before(self, stream: str, offset: int, limit: int) -> Statement:
        """Events (``EVENT_COLUMNS``) with offsets below ``offset``, newest
        first, at most ``limit`` (the primary key walked backwards)."""
        ...

    def save_offset(self, stream: str, consumer: str, offset: int) -> Statement: ...
    def get_offset(self, stream: str, consumer: str) -> Statement: ...
    def trim(self, stream: str, offset: int) -> Statement: ...
    def stream_names(self) -> Statement:
        """Every stream with a counter row, events or saved offsets, sorted;
        one ``(name,)`` row each (events and offsets walked one name at a time)."""
        ...

    def stream_summary(self, stream: str) -> Statement:
        """One row, ``STREAM_SUMMARY_COLUMNS``."""
        ...

    def stream_consumers(self, stream: str) -> Statement:
        """The stream's consumers (``CONSUMER_COLUMNS``), sorted by name."""
        ...

    def set_stream_retention(
        self, stream: str, max_age_us: int | None, max_events: int | None
    ) -> Statement:
        """Record ``stream``'s retention (creating its counter row at offset 0 if need be)."""
        ...

    def protect_consumer(self, stream: str, consumer: str) -> Statement:
        """Mark ``consumer`` as holding ``stream``'s events back from retention
        (a consumer that never saved gets offset 0: it holds everything)."""
        ...

    def unprotect_consumer(self, stream: str, consumer: str) -> Statement:
        """Clear the mark; counts the rows changed."""
        ...

    def retained_streams(self, after: str, limit: int) -> Statement:
        """Streams with a retention setting named above ``after``, ascending, at
        most ``limit``: rows ``(name, last_offset, max_age_us, max_events)``."""
        ...

    def first_young_event(self, stream: str, cutoff_us: int) -> Statement:
        """Its row is ``(offset,)`` of the lowest event created at or after
        ``cutoff_us``, or none."""
        ...

    def prune_events(self, stream: str, upto: int, limit: int) -> Statement:
        """Delete up to ``limit`` of ``stream``'s events at or below offset
        ``upto``, none above a protected consumer's saved offset
        (``rules.protected_floor``); counts them."""
        ...

    # schedules
    def upsert_schedule(self, schedule: NewSchedule) -> Statement: ...
    def delete_schedule(self, name: str) -> Statement: ...
    def due_schedules(self, now_us: int, limit: int) -> Statement:
        """Up to ``limit`` due schedules (``DUE_SCHEDULE_COLUMNS``), earliest first."""
        ...

    def advance_schedule(
        self, name: str, fire_at_us: int, next_fire_us: int, last_fire_us: int | None
    ) -> Statement:
        """Move the fire time on from ``fire_at_us`` to ``next_fire_us``
        (compare-and-set) and record ``last_fire_us`` as the schedule's last
        fire (None: it fired nothing, the last fire stays)."""
        ...

    def next_schedule_time(self) -> Statement: ...
    def list_schedules(self) -> Statement:
        """Every schedule (``SCHEDULE_COLUMNS``), sorted by name."""
        ...

    def schedule_state(self, name: str) -> Statement:
        """The row ``(expression, tz, next_fire_at, paused)`` of a schedule about
        to be changed (Postgres locks it), or none."""
        ...

    def pause_schedule(self, name: str) -> Statement:
        """Mark it paused; counts the rows (0: no such schedule)."""
        ...

    def resume_schedule(self, name: str, fire_at_us: int, next_fire_us: int) -> Statement:
        """Unpause it with ``next_fire_us`` as its next fire time, if it still
        has the fire time ``fire_at_us`` read before; counts the rows."""
        ...

    # locks
    def lock_guard(self, exclusive: bool) -> tuple[Statement, ...]:
        """Statements an acquisition (shared) or a prune of lock rows
        (exclusive) runs first in its transaction: none may read the token
        floor while a prune that raises it has not committed."""
        ...

    def acquire_lock(self, name: str, owner: str, now_us: int, until_us: int) -> Statement: ...
    def renew_lock(
        self, name: str, owner: str, token: int, now_us: int, until_us: int
    ) -> Statement: ...
    def release_lock(self, name: str, owner: str, token: int, now_us: int) -> Statement:
        """Free the lock while (owner, token) holds it, stamping the release
        time in ``expires_at`` (so housekeeping knows how long it has been free)."""
        ...

    def list_locks(self, now_us: int) -> Statement:
        """Every lock (``LOCK_COLUMNS``, held by the lock rules at ``now_us``), sorted by name."""
        ...

    def stale_lock(self, cutoff_us: int) -> Statement:
        """Its row is ``(name,)`` of a lock row free since ``cutoff_us``, or none."""
        ...

    def prune_locks(self, cutoff_us: int, limit: int) -> Statement:
        """Delete up to ``limit`` lock rows free since ``cutoff_us``; its rows
        are their tokens."""
        ...

    def token_floor(self) -> Statement:
        """Its row is ``(floor,)``, or none before the first prune of a lock row."""
        ...

    def set_token_floor(self, token: int) -> Statement:
        """Store ``token`` as the floor (the caller holds the exclusive guard)."""
        ...


    # dependencies, results and workflows (a job's graph; docs/workflows.md)
    def allocate_job_ids(self, n: int) -> tuple[Statement, ...]:
        """Take ``n`` fresh ids from the jobs' own sequence (ids no job was
        or will be given); the last statement's rows are the ids ``(id,)``."""
        ...
    def enqueue_waiting(
        self,
        jobs: Sequence[NewJob],
        ids: Sequence[int],
        remaining: int,
        on_failure: int,
        now_us: int,
    ) -> Statement:
        """Insert ``jobs`` (at most ``ENQUEUE_CHUNK``) as waiting jobs under
        ``ids``, each with ``remaining`` unfinished dependencies and the
        policy ``on_failure`` (``ON_FAILURE_CANCEL``, ``ON_FAILURE_RUN``)."""
        ...
    def keep_jobs(self, job_ids: Sequence[int]) -> Statement:
        """Mark the live jobs among ``job_ids`` kept; its rows are ``(id,)``
        of those marked. On an engine with concurrent writers the rows stay
        locked until commit, so an ack running meanwhile sees the mark."""
        ...
    def hold_waiting(self, job_ids: Sequence[int]) -> Statement:
        """Rows ``(id,)`` of those of ``job_ids`` waiting, each held until
        commit against its release or cancel (which would miss an edge to
        it added meanwhile), not against the count of its dependencies."""
        ...
    def dependency_states(self, job_ids: Sequence[int]) -> Statement:
        """Rows ``(id, kind, detail)`` for those of ``job_ids`` that are not
        live: ``waiting``, a history outcome (``acked``, ``cancelled``, with
        the last error), or ``dead`` with its reason."""
        ...
    def add_dependencies(self, edges: Sequence[tuple[int, int, bool]]) -> Statement:
        """Record each (dependency, dependent, counted) edge; ``counted``:
        the dependency has finished already and is not counted again."""
        ...
    def count_finished(self, dep_ids: Sequence[int]) -> Statement:
        """Count each of ``dep_ids`` finished, once: mark their uncounted
        edges counted; its rows are ``(dependent id, dependency id)``, one
        per edge counted."""
        ...
    def uncounted_dependents(self, dep_ids: Sequence[int]) -> Statement:
        """Rows ``(dependent id, dependency id)`` of the uncounted edges of
        ``dep_ids``, read, not marked: for jobs just acked, which no later
        finish can count again."""
        ...
    def waiting_policies(self, job_ids: Sequence[int]) -> Statement:
        """Rows ``(id, on_failure)`` of those of ``job_ids`` still waiting."""
        ...
    def decrement_waiting(self, job_ids: Sequence[int], n: int) -> Statement:
        """``n`` more dependencies of each waiting job of ``job_ids``
        finished; rows ``(id, remaining)``."""
        ...
    def release_waiting(
        self, job_ids: Sequence[int], now_us: int, counting: int = 0
    ) -> tuple[Statement, ...]:
        """Move the waiting jobs of ``job_ids`` whose dependencies all
        finished, once ``counting`` more finishes are counted (0: as their
        count stands), into jobs, pending, due at their run_at or now,
        kept; the first statement's rows are ``(id, queue)`` of those moved."""
        ...
    def cancel_waiting(
        self, job_ids: Sequence[int], reason: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        """Move the waiting jobs of ``job_ids`` into history as cancelled,
        ``reason`` as their last error; first statement's rows ``(id, queue)``."""
        ...
    def get_waiting(self, queue: str | None, job_id: int) -> Statement:
        """The waiting job's row (``WAITING_COLUMNS``), if it waits (in ``queue``)."""
        ...
    def waiting_count(self, queue: str) -> Statement:
        """Its row is ``(count,)`` of ``queue``'s waiting jobs."""
        ...
    def waiting_page(self, queue: str, after: int, limit: int) -> Statement:
        """Waiting jobs (``WAITING_COLUMNS``) of ``queue`` with ids above
        ``after``, ascending, at most ``limit``."""
        ...
    def ack_kept(
        self,
        worker: str,
        items: Sequence[tuple[int, int | None, str | None, str | None]],
        now_us: int,
        queue: str | None = None,
    ) -> tuple[Statement, ...]:
        """Move the jobs of ``items`` (id, claim number or None for the
        worker's live claim, result JSON or None, headers JSON or None) that
        ``worker`` owns (of ``queue``, when given) into history as acked
        with their results (and the headers given, in place of the job's),
        kept for their queue's results retention (``rules.kept_prune_at``);
        the first statement's rows are ``(id, queue)`` of those moved. Items
        all have claim numbers or none."""
        ...
    def cancel_kept(
        self, queue: str, job_id: int, reason: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        """Move the live job into history as cancelled (``reason`` as its
        last error, if given), kept for the results retention; the first
        statement's rows are ``(id, queue)``."""
        ...
    def job_outcome(self, job_id: int) -> Statement:
        """Its row says where the job is, and its queue: ``('live', state,
        None, None, queue)``, ``('waiting', None, None, None, queue)``,
        ``('history', outcome, result, last error, queue)``, ``('dead',
        reason, None, last error, queue)``; none: nowhere."""
        ...
    def job_id_high(self) -> Statement:
        """Its row is ``(the highest job id ever handed out,)``."""
        ...
    def dependency_results(self, job_id: int) -> Statement:
        """Rows ``(dependency id, outcome, result, headers)`` of the job's
        dependencies (NULLs for one not finished or not kept)."""
        ...
    def dependencies(self, job_id: int) -> Statement:
        """Rows ``(dependency id, counted)``, ascending."""
        ...
    def dependents(self, job_id: int) -> Statement:
        """Rows ``(dependent id, counted)``, ascending."""
        ...
    def forget_dependencies(self, job_ids: Sequence[int]) -> Statement:
        """Delete the edges of the dependents ``job_ids`` (their records are gone)."""
        ...
    def create_workflow(self, name: str, now_us: int) -> Statement:
        """Its result is the new workflow's id (``Fetch.INSERTED_ID``)."""
        ...
    def add_workflow_steps(
        self, workflow_id: int, steps: Sequence[tuple[str, int, int]]
    ) -> Statement:
        """Record each (step name, job id, position in the definition) of
        the workflow: its steps read back in the order they were defined."""
        ...
    def workflow(self, workflow_id: int) -> Statement:
        """Its row is ``(id, name, created_at)``, if there is one."""
        ...
    def workflow_steps(self, workflow_id: int) -> Statement:
        """Rows ``(step, job id, where, state or outcome or reason, result,
        last error, queue)``: ``where`` as ``job_outcome``'s (None: gone)."""
        ...
    def workflow_edges(self, workflow_id: int) -> Statement:
        """Rows ``(dependency id, dependent id)`` of the workflow's steps."""
        ...
    def workflow_open_steps(self, workflow_id: int) -> Statement:
        """Rows ``(job id,)`` of the workflow's steps still live or waiting,
        in id order: index probes per step, no read of what finished."""
        ...
    def workflow_of(self, job_id: int) -> Statement:
        """Its row is ``(workflow id, step, workflow name)``, if the job is a step."""
        ...
    def workflow_page(self, before: int, limit: int) -> Statement:
        """Rows ``(id, name, created_at, steps)`` of workflows with ids below
        ``before``, newest first, at most ``limit``."""
        ...
    def stale_workflows(self, cutoff_us: int, limit: int) -> Statement:
        """Rows ``(id,)`` of workflows created before ``cutoff_us`` none of
        whose steps is live or waiting, oldest first, at most ``limit``."""
        ...
    def forget_workflows(self, workflow_ids: Sequence[int]) -> tuple[Statement, ...]:
        """Delete the workflows and their steps; the last statement counts them."""
        ...

    # -- attempts (protocol.values.attempts) ----------------------------------------
    def record_attempt(
        self,
        job_id: int,
        outcome: str,
        started_us: int | None,
        error: str | None,
        trace: str | None,
        now_us: int,
    ) -> tuple[Statement, ...]:
        """Record how live job ``job_id``'s current attempt ended (its number,
        queue and worker read from its row, which must still be live), then
        drop its rows beyond the newest ``ATTEMPTS_KEPT``."""
        ...
    def place_attempts(self, job_id: int, buried: bool) -> Statement:
        """Move the job's rows among the dead letters' (``buried``: it was
        just buried) or back among the live jobs' (it was requeued): where
        they sit in the job index, so lasting rows do not pin pages that
        churn (``engines/attempt_log.py``)."""
        ...
    def job_attempts(self, job_id: int) -> Statement:
        """Rows ``ATTEMPT_COLUMNS`` of the job's attempts, oldest first."""
        ...
    def forget_attempts(self, job_ids: Sequence[int]) -> Statement:
        """Delete the attempts of ``job_ids`` (their records are gone)."""
        ...


class NotificationLog(Protocol):
    """Statements of an engine whose cross-process wakes are rows in a table
    that a watcher reads back (SQLite). An engine with a wake channel of its
    own (Postgres's LISTEN/NOTIFY) has no such table and implements only
    ``Dialect``."""

    def notifications_since(self, after_id: int, limit: int) -> Statement:
        """Notification rows (id, channel, origin) above ``after_id``, at most ``limit``."""
        ...

    def last_notification_id(self) -> Statement:
        """The newest notification row's id (0 when there is none)."""
        ...

    def prune_notifications(self, before_us: int, limit: int) -> Statement:
        """Delete up to ``limit`` notification rows older than ``before_us``; counts them."""
        ...

    def last_job_id(self) -> Statement:
        """The newest job's id (0 when there is none): new jobs get larger ones."""
        ...

    def pending_job_after(self, queue: str, after_id: int) -> Statement:
        """A row if ``queue`` has a pending job with an id above ``after_id``."""
        ...


class Vacuuming(Protocol):
    """Statements of an engine whose deleted and updated rows stay in the
    table until a vacuum reclaims them (Postgres). SQLite reuses a deleted
    row's page itself and implements only ``Dialect``."""

    # A table is due when its dead rows exceed threshold + scale x its live ones.
    vacuum_threshold: int
    vacuum_scale: float

    def churn_stats(self) -> Statement:
        """(table, live rows, dead rows) of each table whose rows churn."""
        ...

    def vacuum(self, table: str) -> str:
        """The command that vacuums ``table``, run outside any transaction."""
        ...
