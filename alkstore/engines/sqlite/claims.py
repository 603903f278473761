"""Claiming on SQLite: the plain claim of an unlimited queue, the limited
claim (one job per statement, under per-key concurrency and rates), and the
claim log the rates count in."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PROCESSING
from ...protocol.plan import Fetch, Statement
from ...protocol.values.generation import META_KEY as GENERATION_KEY
from ..shapes import JOB_COLS
from ..sql import Sql, Variants
from .spelling import RULES
from .tables import CLAIM_LOG, JOBS, META, QUEUES


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
        f"""UPDATE {JOBS}
    SET state = {STATE_PROCESSING}, attempts = attempts + 1, claims = claims + 1,
        claimed_by = :worker, run_at = visible_at, visible_at = :until
    WHERE id = (
        SELECT c.id FROM {JOBS} AS c INDEXED BY __alkstore_jobs_claim
        WHERE c.queue = :queue AND {RULES.claimable(':now')}
            AND {RULES.queue_running(QUEUES, ':queue')}
            AND {RULES.claim_rules_known(META, ':generation')}{checks}
        ORDER BY {RULES.CLAIM_ORDER}
        LIMIT 1)
    RETURNING {JOB_COLS}, {RULES.history_retention(QUEUES, ':queue')}, keep""",
        Fetch.ALL,
    )


class Claims:
    # The claim names its index (INDEXED BY): nothing to set first.
    _CLAIM_PRELUDE: tuple[Statement, ...] = ()

    def claim_prelude(self) -> tuple[Statement, ...]:
        return self._CLAIM_PRELUDE

    # Claim = pick and update in one statement; SQLite's single writer means
    # no other claim runs between the pick and the update. Reclaim of lapsed
    # claims is the same predicate: a processing job whose visible_at passed,
    # with attempts left, is claimable again. Each row carries its queue's
    # history retention, so the ack knows whether to keep the job (no round
    # trip of its own).
    _claim = Sql(
        f"""UPDATE {JOBS}
    SET state = {STATE_PROCESSING}, attempts = attempts + 1, claims = claims + 1,
        claimed_by = :worker, run_at = visible_at, visible_at = :until
    WHERE id IN (
        SELECT id FROM {JOBS} INDEXED BY __alkstore_jobs_claim
        WHERE queue = {RULES.queue_claims_unlimited(QUEUES, ':queue')}
            AND {RULES.claim_rules_known(META, ':generation')} AND {RULES.claimable(':now')}
        ORDER BY {RULES.CLAIM_ORDER}
        LIMIT :n)
    RETURNING {JOB_COLS}, {RULES.history_retention(QUEUES, ':queue')}, keep""",
        Fetch.ALL,
    )

    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        return self._claim.bind(
            queue=queue, worker=worker, n=n, now=now_us, until=until_us, generation=generation
        )

    def claim_at_once(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement | None:
        # The plan's statements run in this process one after the other:
        # folding them into one would save no round trip.
        return None

    # A limited queue (rules.queue_claims_unlimited closed the claim above):
    # its limit, then one job per statement, the first in claim order whose
    # key has room (rules.key_has_room counts the key's live claims in
    # jobs_keyed). The write transaction is the lock: no other claim runs
    # until it commits, and each statement sees the claims made before it in
    # this one.
    _claim_limit = Sql(RULES.queue_limit(QUEUES, ":queue"), Fetch.ONE)

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
        f"UPDATE {JOBS} SET concurrency_key = k.value ->> 1 "
        f"FROM json_each(:pairs) AS k WHERE {JOBS}.id = k.value ->> 0"
    )

    def set_concurrency_keys(self, pairs: Sequence[tuple[int, str]]) -> Statement:
        return self._set_concurrency_keys.bind(pairs=orjson.dumps(list(pairs)).decode())

    _set_limits = Sql(
        f"INSERT INTO {QUEUES} (name, concurrency_limit, rate_limit, rate_period_us, "
        "key_rate_limit, key_rate_period_us) "
        "VALUES (:queue, :concurrency, :rate_limit, :rate_period, :key_rate_limit, "
        ":key_rate_period) "
        "ON CONFLICT (name) DO UPDATE SET concurrency_limit = excluded.concurrency_limit, "
        "rate_limit = excluded.rate_limit, rate_period_us = excluded.rate_period_us, "
        "key_rate_limit = excluded.key_rate_limit, key_rate_period_us = excluded.key_rate_period_us"
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
        f"SELECT count(*) FROM {CLAIM_LOG} INDEXED BY __alkstore_claim_log_window "
        f"WHERE queue = :queue AND key = {RULES.QUEUE_WIDE} AND {RULES.in_window(':since')}",
        Fetch.ONE,
    )

    def claims_in_window(self, queue: str, since_us: int) -> Statement:
        return self._claims_in_window.bind(queue=queue, since=since_us)

    _window_opens = Sql(
        f"SELECT at FROM {CLAIM_LOG} INDEXED BY __alkstore_claim_log_window "
        f"WHERE queue = :queue AND key = {RULES.QUEUE_WIDE} AND {RULES.in_window(':since')} "
        "ORDER BY at LIMIT 1 OFFSET :skip",
        Fetch.ONE,
    )

    def window_opens(self, queue: str, since_us: int, skip: int) -> Statement:
        return self._window_opens.bind(queue=queue, since=since_us, skip=skip)

    _first_key_claim = Sql(
        f"SELECT min(at) FROM {CLAIM_LOG} INDEXED BY __alkstore_claim_log_age "
        f"WHERE queue = :queue AND {RULES.in_window(':since')} AND key <> {RULES.QUEUE_WIDE}",
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

    _prune_claim_log = Sql(
        f"DELETE FROM {CLAIM_LOG} INDEXED BY __alkstore_claim_log_age "
        "WHERE queue = :queue AND at <= :before"
    )

    def prune_claim_log(self, queue: str, before_us: int) -> Statement:
        return self._prune_claim_log.bind(queue=queue, before=before_us)
