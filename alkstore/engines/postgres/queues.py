"""A queue's jobs on PostgreSQL, looked up, swept and counted; its settings
(pause, retention); its dead letters, counted, listed, requeued and purged."""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol.dialect import STATE_PENDING, STATE_PROCESSING
from ...protocol.plan import Fetch, Statement
from ..shapes import DEAD_COLS, HISTORY_COLS, JOB_INFO_COLS, SWEEP_COLS
from ..sql import Sql, Variants
from .spelling import RULES
from .tables import DEAD, HISTORY, JOBS, QUEUES


def _by_id(columns: str, table: str, fetch: Fetch = Fetch.ONE) -> Variants[bool]:
    """A row by id, keyed by whether it must also be in ``:queue``."""
    select = f"SELECT {columns} FROM {table} WHERE id = :job_id"
    return Variants({False: Sql(select, fetch), True: Sql(f"{select} AND queue = :queue", fetch)})


# The sweep's candidates: deadlines that passed (except under a live claim,
# which keeps its chance to ack) and lapsed claims with no attempts left.
# Each arm matches one partial index (jobs_expiry, jobs_exhausted), so the
# planner can combine them with a BitmapOr. SKIP LOCKED: a row some worker
# is settling right now is not the sweep's, and a concurrent sweeper takes
# other rows. The lock held until commit means the core's decision and the
# bury that follows see the row as it was read.
_SWEEP = (
    f"SELECT {SWEEP_COLS} FROM {JOBS} WHERE "
    f"(({RULES.sweep_expired(':now')}) OR ({RULES.sweep_exhausted(':now')}))"
)


class Queues:
    _get_job = _by_id(JOB_INFO_COLS, JOBS)

    def get_job(self, queue: str | None, job_id: int) -> Statement:
        return self._get_job[queue is not None].bind(job_id=job_id, queue=queue)

    _get_dead = _by_id(DEAD_COLS, DEAD)

    def get_dead(self, queue: str | None, job_id: int) -> Statement:
        return self._get_dead[queue is not None].bind(job_id=job_id, queue=queue)

    _get_history = _by_id(HISTORY_COLS, HISTORY)

    def get_history(self, queue: str | None, job_id: int) -> Statement:
        return self._get_history[queue is not None].bind(job_id=job_id, queue=queue)

    # A worker's cancel check: every id it holds in one statement (one
    # snapshot), each looked up by primary key in the three tables. The
    # OFFSET 0 keeps each NOT EXISTS a subplan run per id (a primary-key
    # probe): without it the planner turns them into anti-joins, and with
    # the default estimate for a queue's rows (no statistics yet, or stale
    # ones) it reads the queue's every dead letter and history row once per
    # check to match them against the ids.
    _cancelled_among = Sql(
        "SELECT t.id FROM unnest(:ids::bigint[]) AS t(id) "
        f"WHERE NOT EXISTS (SELECT 1 FROM {JOBS} WHERE id = t.id AND queue = :queue OFFSET 0) "
        f"AND NOT EXISTS (SELECT 1 FROM {DEAD} WHERE id = t.id AND queue = :queue OFFSET 0) "
        f"AND NOT EXISTS (SELECT 1 FROM {HISTORY} WHERE id = t.id AND queue = :queue "
        "AND outcome <> 'cancelled' OFFSET 0)",
        Fetch.ALL,
    )

    def cancelled_among(self, queue: str, job_ids: Sequence[int]) -> Statement:
        # bigint[] whatever element type psycopg picked for the list (as ack_batch).
        return self._cancelled_among.bind(ids=list(job_ids), queue=queue)

    # Keyed by whether the sweep is of one queue.
    _sweep_candidates = Variants({
        False: Sql(f"{_SWEEP} ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED", Fetch.ALL),
        True: Sql(
            f"{_SWEEP} AND queue = :queue ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED",
            Fetch.ALL,
        ),
    })  # fmt: skip

    def sweep_candidates(self, queue: str | None, now_us: int, limit: int) -> Statement:
        return self._sweep_candidates[queue is not None].bind(now=now_us, limit=limit, queue=queue)

    _queue_counts = Sql(
        f"SELECT "
        # ready: claimable right now (a job the next sweep will bury is
        # counted nowhere until it is dead).
        f"COUNT(*) FILTER (WHERE state = {STATE_PENDING} AND {RULES.claimable(':now')}), "
        f"COUNT(*) FILTER (WHERE state = {STATE_PENDING} AND {RULES.hidden(':now')}), "
        f"COUNT(*) FILTER (WHERE state = {STATE_PROCESSING}) "
        f"FROM {JOBS} WHERE queue = :queue",
        Fetch.ONE,
    )

    def queue_counts(self, queue: str, now_us: int) -> Statement:
        return self._queue_counts.bind(queue=queue, now=now_us)

    # The ready job that became due first: the due index walked in
    # visible_at order, stopping at the first ready row.
    _oldest_ready = Sql(
        f"SELECT visible_at FROM {JOBS} "
        f"WHERE queue = :queue AND state = {STATE_PENDING} AND {RULES.claimable(':now')} "
        "ORDER BY visible_at LIMIT 1",
        Fetch.ONE,
    )

    def oldest_ready(self, queue: str, now_us: int) -> Statement:
        return self._oldest_ready.bind(queue=queue, now=now_us)

    _set_paused = Sql(
        f"INSERT INTO {QUEUES} (name, paused) VALUES (:queue, :paused) "
        "ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused"
    )

    def set_paused(self, queue: str, paused: bool) -> Statement:
        return self._set_paused.bind(queue=queue, paused=paused)

    _queue_paused = Sql(f"SELECT paused FROM {QUEUES} WHERE name = :queue", Fetch.ONE)

    def queue_paused(self, queue: str) -> Statement:
        return self._queue_paused.bind(queue=queue)

    _set_retention = Sql(
        f"INSERT INTO {QUEUES} (name, history_us, dead_us, results_us) "
        "VALUES (:queue, :history, :dead, :results) "
        "ON CONFLICT (name) DO UPDATE SET history_us = EXCLUDED.history_us, "
        "dead_us = EXCLUDED.dead_us, results_us = EXCLUDED.results_us"
    )

    def set_retention(
        self, queue: str, history_us: int | None, dead_us: int | None, results_us: int | None
    ) -> Statement:
        return self._set_retention.bind(
            queue=queue, history=history_us, dead=dead_us, results=results_us
        )

    _queue_retention = Sql(
        f"SELECT history_us, dead_us, results_us FROM {QUEUES} WHERE name = :queue", Fetch.ONE
    )

    def queue_retention(self, queue: str) -> Statement:
        return self._queue_retention.bind(queue=queue)

    _dead_count = Sql(f"SELECT COUNT(*) FROM {DEAD} WHERE queue = :queue", Fetch.ONE)

    def dead_count(self, queue: str) -> Statement:
        return self._dead_count.bind(queue=queue)

    _dead_letters = Sql(
        f"SELECT {DEAD_COLS} FROM {DEAD} WHERE queue = :queue ORDER BY died_at, id LIMIT :limit",
        Fetch.ALL,
    )

    def dead_letters(self, queue: str, limit: int) -> Statement:
        return self._dead_letters.bind(queue=queue, limit=limit)

    # One statement: the dead row comes back under its own id (the identity
    # never hands that id out again, so OVERRIDING SYSTEM VALUE cannot
    # collide) and with its concurrency key (so a limited queue still limits
    # it). Its row count says whether the job moved. Its claim number moves
    # on one: a job claimed more than once may have attempt rows (a death
    # is one), which an ack that keeps no record must forget.
    _requeue_dead = Sql(
        f"WITH back AS (DELETE FROM {DEAD} WHERE id = :job_id AND queue = :queue "
        "RETURNING id, queue, payload, priority, max_attempts, created_at, last_error, "
        "claims, headers, concurrency_key) "
        f"INSERT INTO {JOBS} (id, queue, payload, priority, attempts, max_attempts, "
        "run_at, created_at, expires_at, visible_at, state, last_error, claims, headers, "
        "concurrency_key) OVERRIDING SYSTEM VALUE "
        "SELECT id, queue, payload, priority, 0, max_attempts, :now::bigint, created_at, "
        f"NULL::bigint, :now::bigint, {STATE_PENDING}, last_error, claims + 1, headers, "
        "concurrency_key FROM back",
        Fetch.ROWCOUNT,
    )

    def requeue_dead(self, queue: str, job_id: int, now_us: int) -> tuple[Statement, ...]:
        return (self._requeue_dead.bind(job_id=job_id, queue=queue, now=now_us),)

    # Keyed by whether only the letters that died before ``:before`` go.
    _purge_dead = Variants({
        False: Sql(f"DELETE FROM {DEAD} WHERE queue = :queue RETURNING id", Fetch.ALL),
        True: Sql(
            f"DELETE FROM {DEAD} WHERE queue = :queue AND died_at < :before RETURNING id",
            Fetch.ALL,
        ),
    })  # fmt: skip

    def purge_dead(self, queue: str, before_us: int | None) -> Statement:
        return self._purge_dead[before_us is not None].bind(queue=queue, before=before_us)

    _purge_dead_ids = Sql(
        f"DELETE FROM {DEAD} WHERE queue = :queue AND id = ANY(:ids::bigint[]) RETURNING id",
        Fetch.ALL,
    )

    def purge_dead_ids(self, queue: str, job_ids: Sequence[int]) -> Statement:
        return self._purge_dead_ids.bind(queue=queue, ids=list(job_ids))
