"""Claiming on PostgreSQL: the plain claim of an unlimited queue (``FOR
UPDATE SKIP LOCKED``), the limited claim (one job per statement, behind the
queue's locked row), and the claim log the rates count in."""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol.dialect import JOB_COLUMNS, STATE_PROCESSING, column_list
from ...protocol.plan import Fetch, Statement
from ...protocol.values.generation import META_KEY as GENERATION_KEY
from ..sql import Sql, Variants
from .spelling import RULES
from .tables import CLAIM_LOG, JOBS, META, QUEUES

# Claim = pick and update in one statement: ``picked`` is a CTE that picks
# the jobs and locks them, this takes them, each row with its queue's
# history retention.
_TAKEN = (
    f"{column_list(JOB_COLUMNS, table='j')}, {RULES.history_retention(QUEUES, ':queue')}, j.keep"
)
_TAKE = f"""UPDATE {JOBS} AS j
            SET state = {STATE_PROCESSING}, attempts = j.attempts + 1, claims = j.claims + 1,
                claimed_by = :worker, run_at = j.visible_at, visible_at = :until
            FROM picked WHERE j.id = picked.id
            RETURNING {_TAKEN}"""


# The plain claim's pick: up to ``n`` claimable jobs of an unlimited,
# running queue, in claim order, locked (the claim and the worker's claim
# in one statement share it).
_PICK = f"""SELECT id FROM {JOBS}
            WHERE queue = {RULES.queue_claims_unlimited(QUEUES, ':queue')}
                AND {RULES.claim_rules_known(META, ':generation')} AND {RULES.claimable(':now')}
            ORDER BY {RULES.CLAIM_ORDER}
            LIMIT :n
            FOR UPDATE SKIP LOCKED"""


def _limited_claim(concurrency: bool, key_rate: bool) -> Sql:
    """The limited claim, checking the key's concurrency room and/or its rate
    (a queue with only a queue-wide rate checks neither: the core counts that
    rate once and asks for no more than its room)."""
    checks = ""
    if concurrency:
        checks += f" AND {RULES.key_has_room(JOBS, ':queue', ':now', ':limit', row='c')}"
    if key_rate:
        rate = RULES.key_under_rate(CLAIM_LOG, ":queue", ":rate_since", ":rate_limit", row="c")
        checks += f" AND {rate}"
    return Sql(
        f"""WITH picked AS (
            SELECT c.id FROM {JOBS} AS c
            WHERE c.queue = :queue AND {RULES.claimable(':now')}
                AND {RULES.queue_running(QUEUES, ':queue')}
                AND {RULES.claim_rules_known(META, ':generation')}{checks}
            ORDER BY {RULES.CLAIM_ORDER}
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
        {_TAKE}""",
        Fetch.ALL,
    )


class Claims:
    # Postgres has no index hints. On a jobs table that autovacuum has not
    # analyzed yet (a new store filled with 100,000 jobs, say) the planner
    # reads every due job through a bitmap scan and sorts them all, for every
    # claim: claims cost O(n) and a backlog drains in O(n^2) (measured: 50 ms
    # per claim of 100 at 100,000 jobs, 4-6 ms with this). For the claim's own
    # transaction only, sorts and bitmap or sequential scans are priced out,
    # which leaves the walk of the claim index in claim order, stopping at the
    # LIMIT. It rides with BEGIN in the same round trip (pipelining).
    _claim_prelude = Sql(
        "SELECT set_config('enable_sort', 'off', true), "
        "set_config('enable_bitmapscan', 'off', true), "
        "set_config('enable_seqscan', 'off', true)"
    )

    def claim_prelude(self) -> tuple[Statement, ...]:
        return (self._claim_prelude.bind(),)

    # The CTE walks the partial claim index in claim order and locks what it
    # picks; SKIP LOCKED makes concurrent claimers take disjoint rows instead
    # of queueing behind each other. A row another claimer changed and
    # committed after our snapshot is re-checked against the WHERE clause on
    # its newest version (READ COMMITTED), so a job is never claimed twice.
    # Reclaim of lapsed claims is the same predicate: a processing job whose
    # visible_at passed, with attempts left, is claimable again. Each claimed
    # row carries its queue's history retention, so the ack knows whether to
    # keep the job with no round trip of its own.
    _claim = Sql(f"WITH picked AS ({_PICK}) {_TAKE}", Fetch.ALL)

    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        return self._claim.bind(
            queue=queue, worker=worker, n=n, now=now_us, until=until_us, generation=generation
        )

    # The worker's claim in one statement, so it can go out with BEGIN and
    # COMMIT in one round trip (pipelining): the claim above, and on each
    # claimed row, when fewer than ``n`` came back, when the queue's next live
    # job falls due. The outer query sees the table as it was before the
    # UPDATE (one snapshot per statement), so the claimed rows are left out
    # of that read and counted at their new ``visible_at`` (``:until``) by
    # LEAST instead; the count and the read are uncorrelated subqueries,
    # evaluated once, the read only for a short claim. Nothing claimed
    # returns no row: the worker then claims step by step (a limited or
    # paused queue, a newer claim generation, or no work).
    _claim_at_once = Sql(
        f"""WITH picked AS ({_PICK}),
        taken AS ({_TAKE})
        SELECT taken.*, CASE WHEN (SELECT count(*) FROM taken) < :n THEN LEAST(
                (SELECT MIN(visible_at) FROM {JOBS} WHERE queue = :queue
                    AND {RULES.ATTEMPTS_LEFT} AND id NOT IN (SELECT id FROM picked)),
                :until::bigint) END
        FROM taken""",
        Fetch.ALL,
    )

    def claim_at_once(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement | None:
        return self._claim_at_once.bind(
            queue=queue, worker=worker, n=n, now=now_us, until=until_us, generation=generation
        )

    # A limited queue (rules.queue_claims_unlimited closed the claim above):
    # its limit is read with its row locked (FOR UPDATE), which queues the
    # limited claims of that queue one behind the other until each commits;
    # every statement after the lock sees the claims committed before it
    # (READ COMMITTED takes a snapshot per statement). Then one job per
    # statement, the first in claim order whose key has room
    # (rules.key_has_room counts the key's live claims in jobs_keyed).
    _claim_limit = Sql(f"{RULES.queue_limit(QUEUES, ':queue')} FOR UPDATE", Fetch.ONE)

    def claim_limit(self, queue: str) -> Statement:
        return self._claim_limit.bind(queue=queue)

    # Keyed by (checks the concurrency room, checks the key's rate).
    _claim_limited = Variants({
        (concurrency, key_rate): _limited_claim(concurrency, key_rate)
        for concurrency in (False, True)
        for key_rate in (False, True)
    })  # fmt: skip

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
        rate_limit, rate_since = key_rate or (None, None)
        return self._claim_limited[concurrency is not None, key_rate is not None].bind(
            queue=queue, worker=worker, now=now_us, until=until_us, generation=generation,
            limit=concurrency, rate_since=rate_since, rate_limit=rate_limit,
        )  # fmt: skip

    _claim_generation = Sql(f"SELECT value FROM {META} WHERE key = '{GENERATION_KEY}'", Fetch.ONE)

    def claim_generation(self) -> Statement:
        return self._claim_generation.bind()

    _set_concurrency_keys = Sql(
        f"UPDATE {JOBS} AS j SET concurrency_key = k.key "
        "FROM unnest(:ids::bigint[], :keys::text[]) AS k(id, key) WHERE j.id = k.id"
    )

    def set_concurrency_keys(self, pairs: Sequence[tuple[int, str]]) -> Statement:
        ids, keys = [job_id for job_id, _ in pairs], [key for _, key in pairs]
        return self._set_concurrency_keys.bind(ids=ids, keys=keys)

    _set_limits = Sql(
        f"INSERT INTO {QUEUES} (name, concurrency_limit, rate_limit, rate_period_us, "
        "key_rate_limit, key_rate_period_us) "
        "VALUES (:queue, :concurrency, :rate_limit, :rate_period, :key_rate_limit, "
        ":key_rate_period) "
        "ON CONFLICT (name) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit, "
        "rate_limit = EXCLUDED.rate_limit, rate_period_us = EXCLUDED.rate_period_us, "
        "key_rate_limit = EXCLUDED.key_rate_limit, "
        "key_rate_period_us = EXCLUDED.key_rate_period_us"
    )

    def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        rate: tuple[int, int] | None,
        key_rate: tuple[int, int] | None,
    ) -> Statement:
        rate_limit, rate_period = rate or (None, None)
        key_rate_limit, key_rate_period = key_rate or (None, None)
        return self._set_limits.bind(
            queue=queue, concurrency=concurrency, rate_limit=rate_limit, rate_period=rate_period,
            key_rate_limit=key_rate_limit, key_rate_period=key_rate_period,
        )  # fmt: skip

    _queue_limits = Sql(
        f"SELECT {RULES.LIMIT_COLUMNS} FROM {QUEUES} WHERE name = :queue", Fetch.ONE
    )

    def queue_limits(self, queue: str) -> Statement:
        return self._queue_limits.bind(queue=queue)

    _claims_in_window = Sql(
        f"SELECT count(*) FROM {CLAIM_LOG} WHERE queue = :queue AND key = {RULES.QUEUE_WIDE} "
        f"AND {RULES.in_window(':since')}",
        Fetch.ONE,
    )

    def claims_in_window(self, queue: str, since_us: int) -> Statement:
        return self._claims_in_window.bind(queue=queue, since=since_us)

    _window_opens = Sql(
        f"SELECT at FROM {CLAIM_LOG} WHERE queue = :queue AND key = {RULES.QUEUE_WIDE} "
        f"AND {RULES.in_window(':since')} ORDER BY at LIMIT 1 OFFSET :skip",
        Fetch.ONE,
    )

    def window_opens(self, queue: str, since_us: int, skip: int) -> Statement:
        return self._window_opens.bind(queue=queue, since=since_us, skip=skip)

    _first_key_claim = Sql(
        f"SELECT min(at) FROM {CLAIM_LOG} WHERE queue = :queue AND {RULES.in_window(':since')} "
        f"AND key <> {RULES.QUEUE_WIDE}",
        Fetch.ONE,
    )

    def first_key_claim(self, queue: str, since_us: int) -> Statement:
        return self._first_key_claim.bind(queue=queue, since=since_us)

    _log_queue_claim = Sql(
        f"INSERT INTO {CLAIM_LOG} (queue, key, at) VALUES (:queue, {RULES.QUEUE_WIDE}, :at)"
    )

    def log_queue_claim(self, queue: str, at_us: int) -> Statement:
        return self._log_queue_claim.bind(queue=queue, at=at_us)

    _log_key_claim = Sql(
        f"INSERT INTO {CLAIM_LOG} (queue, key, at) SELECT queue, concurrency_key, :at FROM {JOBS} "
        "WHERE id = :job_id AND concurrency_key IS NOT NULL"
    )

    def log_key_claim(self, job_id: int, at_us: int) -> Statement:
        return self._log_key_claim.bind(job_id=job_id, at=at_us)

    _prune_claim_log = Sql(f"DELETE FROM {CLAIM_LOG} WHERE queue = :queue AND at <= :before")

    def prune_claim_log(self, queue: str, before_us: int) -> Statement:
        return self._prune_claim_log.bind(queue=queue, before=before_us)
