"""The read models on SQLite (queue names and summaries, pages of jobs,
dead letters and history, throughput), and the housekeeping that prunes
the history and dead letters they read."""

from __future__ import annotations

from ...protocol.dialect import STATE_PENDING, STATE_PROCESSING
from ...protocol.plan import Fetch, Statement
from .. import attempt_log as log
from ..shapes import DEAD_COLS, HISTORY_COLS, JOB_INFO_COLS, distinct_names
from ..sql import Sql, Variants
from . import tables
from .spelling import RULES
from .tables import DEAD, DEPS, HISTORY, JOBS, QUEUES, WAITING

# A finished job's record that a job still waiting, or live, depends on:
# that job reads its result when it runs, so the record outlives its
# retention until then.
_STILL_READ = (
    f"EXISTS (SELECT 1 FROM {DEPS} AS d WHERE d.dep_id = h.id AND "
    f"(EXISTS (SELECT 1 FROM {WAITING} WHERE id = d.job_id) "
    f"OR EXISTS (SELECT 1 FROM {JOBS} WHERE id = d.job_id)))"
)


def _page_of(state: int, also: str = "") -> Sql:
    # One state's range of the list index, walked in id order from ``after``.
    return Sql(
        f"SELECT {JOB_INFO_COLS} FROM {JOBS} INDEXED BY __alkstore_jobs_list "
        f"WHERE queue = :queue AND state = {state} AND id > :after{also} ORDER BY id LIMIT :limit",
        Fetch.ALL,
    )


class Inspection:
    _queue_names = Sql(
        f"WITH RECURSIVE {distinct_names('live', JOBS, 'queue')}, "
        f"{distinct_names('buried', DEAD, 'queue')}, "
        f"{distinct_names('finished', HISTORY, 'queue')}, "
        f"{distinct_names('waits', WAITING, 'queue')} "
        "SELECT name FROM live WHERE name IS NOT NULL "
        "UNION SELECT name FROM waits WHERE name IS NOT NULL "
        "UNION SELECT name FROM buried WHERE name IS NOT NULL "
        "UNION SELECT name FROM finished WHERE name IS NOT NULL "
        f"UNION SELECT name FROM {QUEUES} ORDER BY name",
        Fetch.ALL,
    )

    def queue_names(self) -> Statement:
        return self._queue_names.bind()

    # The counts are queue_counts' (the same rules), in one pass over the
    # queue's live jobs; dead letters and history are counted on their indexes.
    _queue_summary = Sql(
        "SELECT c.ready, c.scheduled, c.processing, c.oldest, "
        f"(SELECT COUNT(*) FROM {DEAD} WHERE queue = :queue), "
        f"(SELECT COUNT(*) FROM {HISTORY} WHERE queue = :queue), "
        "q.paused, q.history_us, q.dead_us, q.concurrency_limit, q.rate_limit, q.rate_period_us, "
        "q.key_rate_limit, q.key_rate_period_us, q.unique_processing, "
        f"(SELECT COUNT(*) FROM {WAITING} WHERE queue = :queue) "
        "FROM (SELECT "
        f"COALESCE(SUM(state = {STATE_PENDING} AND {RULES.claimable(':now')}), 0) AS ready, "
        f"COALESCE(SUM(state = {STATE_PENDING} AND {RULES.hidden(':now')}), 0) AS scheduled, "
        f"COALESCE(SUM(state = {STATE_PROCESSING}), 0) AS processing, "
        f"MIN(CASE WHEN state = {STATE_PENDING} AND {RULES.claimable(':now')} THEN run_at END) "
        "AS oldest "
        f"FROM {JOBS} WHERE queue = :queue) AS c "
        f"LEFT JOIN {QUEUES} AS q ON q.name = :queue",
        Fetch.ONE,
    )

    def queue_summary(self, queue: str, now_us: int) -> Statement:
        return self._queue_summary.bind(queue=queue, now=now_us)

    # Keyed by the page's filter (protocol.dialect.LIVE_FILTERS).
    _job_page = Variants({
        "pending": _page_of(STATE_PENDING),
        "ready": _page_of(STATE_PENDING, f" AND {RULES.claimable(':now')}"),
        "scheduled": _page_of(STATE_PENDING, f" AND {RULES.hidden(':now')}"),
        "processing": _page_of(STATE_PROCESSING),
    })  # fmt: skip

    def job_page(
        self, queue: str, which: str, after: int, limit: int, now_us: int
    ) -> Statement:
        return self._job_page[which].bind(queue=queue, after=after, limit=limit, now=now_us)

    _dead_page = Sql(
        f"SELECT {DEAD_COLS} FROM {DEAD} INDEXED BY __alkstore_dead_list "
        "WHERE queue = :queue AND id > :after ORDER BY id LIMIT :limit",
        Fetch.ALL,
    )

    def dead_page(self, queue: str, after: int, limit: int) -> Statement:
        return self._dead_page.bind(queue=queue, after=after, limit=limit)

    _history_page = Sql(
        f"SELECT {HISTORY_COLS} FROM {HISTORY} INDEXED BY __alkstore_history_list "
        "WHERE queue = :queue AND outcome = :outcome AND id > :after ORDER BY id LIMIT :limit",
        Fetch.ALL,
    )

    def history_page(self, queue: str, outcome: str, after: int, limit: int) -> Statement:
        return self._history_page.bind(queue=queue, outcome=outcome, after=after, limit=limit)

    # Throughput: a range of the (queue, time) index, which holds every column
    # the count needs, grouped into buckets of the window.
    _finished_per_bucket = Sql(
        f"SELECT (finished_at - :since) / :bucket, COUNT(*) FROM {HISTORY} "
        "INDEXED BY __alkstore_history_queue "
        "WHERE queue = :queue AND finished_at >= :since AND finished_at < :until GROUP BY 1",
        Fetch.ALL,
    )

    def finished_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        return self._finished_per_bucket.bind(
            queue=queue, since=since_us, until=until_us, bucket=bucket_us
        )

    # Deaths, requeued letters' included: their attempt rows (engines/attempt_log.py).
    _dead_per_bucket = Sql(log.deaths_per_bucket(tables), Fetch.ALL)

    def dead_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        return self._dead_per_bucket.bind(
            queue=queue, since=since_us, until=until_us, bucket=bucket_us
        )

    # Housekeeping: a batch at a time, oldest prune time first, on the prune
    # indexes (the dead one is partial: only letters with a prune time).
    _prune_history = Sql(
        f"DELETE FROM {HISTORY} WHERE id IN (SELECT id FROM {HISTORY} AS h "
        "INDEXED BY __alkstore_history_prune "
        f"WHERE {RULES.prune_due(':now')} AND NOT {_STILL_READ} ORDER BY prune_at LIMIT :limit) "
        "RETURNING id",
        Fetch.ALL,
    )

    def prune_history(self, now_us: int, limit: int) -> Statement:
        return self._prune_history.bind(now=now_us, limit=limit)

    _prune_dead = Sql(
        f"DELETE FROM {DEAD} WHERE id IN (SELECT id FROM {DEAD} "
        f"INDEXED BY __alkstore_dead_prune WHERE {RULES.prune_due(':now')} "
        "ORDER BY prune_at LIMIT :limit) RETURNING id",
        Fetch.ALL,
    )

    def prune_dead(self, now_us: int, limit: int) -> Statement:
        return self._prune_dead.bind(now=now_us, limit=limit)
