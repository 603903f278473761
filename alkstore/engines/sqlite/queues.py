"""A queue's jobs on SQLite, looked up, swept and counted; its settings
(pause, retention); its dead letters, counted, listed, requeued and purged."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PENDING, STATE_PROCESSING
from ...protocol.plan import Fetch, Statement
from ..shapes import DEAD_COLS, HISTORY_COLS, JOB_INFO_COLS, SWEEP_COLS, per_priority_min
from ..sql import Sql, Variants
from .spelling import RULES
from .tables import DEAD, HISTORY, JOBS, QUEUES


def _by_id(columns: str, table: str, fetch: Fetch = Fetch.ONE) -> Variants[bool]:
    """A row by id, keyed by whether it must also be in ``:queue``."""
    select = f"SELECT {columns} FROM {table} WHERE id = :job_id"
    return Variants({False: Sql(select, fetch), True: Sql(f"{select} AND queue = :queue", fetch)})


def _sweep(scope: str) -> Sql:
    # Two index probes: deadlines that passed, and lapsed claims with no
    # attempts left. The core decides per row what, if anything, to do.
    # Live claims are left out of the first probe: they are never buried,
    # and a page full of them would hide the rows behind them from the
    # sweep (the core drives it page by page until a page moves few rows).
    return Sql(
        f"SELECT {SWEEP_COLS} FROM {JOBS} INDEXED BY __alkstore_jobs_expiry "
        f"WHERE {RULES.sweep_expired(':now')}{scope} "
        f"UNION "
        f"SELECT {SWEEP_COLS} FROM {JOBS} INDEXED BY __alkstore_jobs_exhausted "
        f"WHERE {RULES.sweep_exhausted(':now')}{scope} "
        f"ORDER BY id LIMIT :limit",
        Fetch.ALL,
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

    # A worker's cancel check: every id it holds in one statement, each looked
    # up by primary key in the three tables (a job is in one of them at most).
    _cancelled_among = Sql(
        "SELECT ids.value FROM json_each(:ids) AS ids "
        f"WHERE NOT EXISTS (SELECT 1 FROM {JOBS} WHERE id = ids.value AND queue = :queue) "
        f"AND NOT EXISTS (SELECT 1 FROM {DEAD} WHERE id = ids.value AND queue = :queue) "
        f"AND NOT EXISTS (SELECT 1 FROM {HISTORY} WHERE id = ids.value AND queue = :queue "
        "AND outcome <> 'cancelled')",
        Fetch.ALL,
    )

    def cancelled_among(self, queue: str, job_ids: Sequence[int]) -> Statement:
        return self._cancelled_among.bind(ids=orjson.dumps(list(job_ids)).decode(), queue=queue)

    # Keyed by whether the sweep is of one queue.
    _sweep_candidates = Variants({False: _sweep(""), True: _sweep(" AND queue = :queue")})

    def sweep_candidates(self, queue: str | None, now_us: int, limit: int) -> Statement:
        return self._sweep_candidates[queue is not None].bind(now=now_us, limit=limit, queue=queue)

    _queue_counts = Sql(
        f"SELECT "
        # ready: claimable right now (a job the next sweep will bury is
        # counted nowhere until it is dead).
        f"COALESCE(SUM(state = {STATE_PENDING} AND {RULES.claimable(':now')}), 0), "
        f"COALESCE(SUM(state = {STATE_PENDING} AND {RULES.hidden(':now')}), 0), "
        f"COALESCE(SUM(state = {STATE_PROCESSING}), 0) "
        f"FROM {JOBS} WHERE queue = :queue",
        Fetch.ONE,
    )

    def queue_counts(self, queue: str, now_us: int) -> Statement:
        return self._queue_counts.bind(queue=queue, now=now_us)

    # The ready job that became due first: per priority, the claim index
    # walked in visible_at order to its first ready row (a skip-scan).
    _oldest_ready = Sql(
        per_priority_min(
            f"{JOBS} INDEXED BY __alkstore_jobs_claim",
            RULES.PRIORITY_FIRST,
            f"queue = :queue AND {RULES.ATTEMPTS_LEFT}",
            f"queue = :queue AND state = {STATE_PENDING} AND {RULES.claimable(':now')}",
            "visible_at",
        ),
        Fetch.ONE,
    )

    def oldest_ready(self, queue: str, now_us: int) -> Statement:
        return self._oldest_ready.bind(queue=queue, now=now_us)

    _set_paused = Sql(
        f"INSERT INTO {QUEUES} (name, paused) VALUES (:queue, :paused) "
        "ON CONFLICT (name) DO UPDATE SET paused = excluded.paused"
    )

    def set_paused(self, queue: str, paused: bool) -> Statement:
        return self._set_paused.bind(queue=queue, paused=int(paused))

    _queue_paused = Sql(f"SELECT paused FROM {QUEUES} WHERE name = :queue", Fetch.ONE)

    def queue_paused(self, queue: str) -> Statement:
        return self._queue_paused.bind(queue=queue)

    _set_retention = Sql(
        f"INSERT INTO {QUEUES} (name, history_us, dead_us, results_us) "
        "VALUES (:queue, :history, :dead, :results) "
        "ON CONFLICT (name) DO UPDATE SET history_us = excluded.history_us, "
        "dead_us = excluded.dead_us, results_us = excluded.results_us"
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

    # Two statements: the dead row comes back under its own id (AUTOINCREMENT
    # never hands that id out again) and with its concurrency key (so a
    # limited queue still limits it), then leaves the dead table. The first
    # one's row count says whether the job moved. Its claim number moves on
    # one: a job claimed more than once may have attempt rows (a death is
    # one), which an ack that keeps no record must forget.
    _requeue_copy = Sql(
        f"INSERT INTO {JOBS} (id, queue, payload, priority, attempts, "
        "max_attempts, run_at, created_at, expires_at, visible_at, state, last_error, "
        "claims, headers, concurrency_key) "
        "SELECT id, queue, payload, priority, 0, max_attempts, :now, created_at, NULL, :now, "
        f"{STATE_PENDING}, last_error, claims + 1, headers, concurrency_key FROM {DEAD} "
        "WHERE id = :job_id AND queue = :queue",
        Fetch.ROWCOUNT,
    )
    _requeue_delete = Sql(
        f"DELETE FROM {DEAD} WHERE id = :job_id AND queue = :queue", Fetch.ROWCOUNT
    )

    def requeue_dead(self, queue: str, job_id: int, now_us: int) -> tuple[Statement, ...]:
        return (
            self._requeue_copy.bind(job_id=job_id, queue=queue, now=now_us),
            self._requeue_delete.bind(job_id=job_id, queue=queue),
        )

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
        f"DELETE FROM {DEAD} WHERE queue = :queue AND id IN (SELECT value FROM json_each(:ids)) "
        "RETURNING id",
        Fetch.ALL,
    )

    def purge_dead_ids(self, queue: str, job_ids: Sequence[int]) -> Statement:
        return self._purge_dead_ids.bind(queue=queue, ids=orjson.dumps(list(job_ids)).decode())
