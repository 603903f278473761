"""Settling a claimed job on PostgreSQL: acks (moving the job into history or
not), the owned read before a retry or a fail, release, reschedule,
heartbeat, burial and cancellation. A move between tables is one
statement: a ``DELETE ... RETURNING`` feeding an ``INSERT``."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PENDING, column_list
from ...protocol.plan import Fetch, Statement
from ..shapes import DEAD_COLS, HISTORY_INSERT_COLS
from ..sql import Sql
from .spelling import RULES
from .tables import DEAD, HISTORY, JOBS, QUEUES

_OWNED = RULES.owned(":worker", ":claim", ":now")
# The batch forms have no claim numbers: the worker's live claim.
_OWNED_NOW = RULES.owned(":worker", None, ":now")
# The acks and cancels here take only jobs whose finish needs no record; a
# kept one is left for the moves of .dependencies (ack_kept, cancel_kept).
# A concurrent mark (keep_jobs) is seen: the delete re-checks the row it
# waited for.
_PLAIN = RULES.NOT_KEPT
# What a finished job takes from its live row into history.
_FINISHED = (
    "id", "queue", "payload", "priority", "attempts", "max_attempts", "run_at", "created_at",
    "claimed_by", "last_error", "headers", "unique_key", "concurrency_key",
)  # fmt: skip
# What a buried job takes from its live row into the dead letters.
_BURIED = (
    "id", "queue", "payload", "priority", "attempts", "max_attempts", "run_at", "created_at",
    "expires_at", "claimed_by", "last_error", "claims", "headers", "concurrency_key",
)  # fmt: skip
# The (id, claim number) pairs: one JSON object from id to claim number (to
# a list of them, should an id come twice), looked up in each row the ids
# find by primary key. The lookup costs the same whatever plan the server
# picked. 'id/claims' text keys matched with = ANY(array) were hashed only
# in a plan made for the values at hand; under the generic plan a prepared
# statement settles on after five runs, each row was compared with every
# key: an ack of 1,000 jobs took 19 ms of server time against 3.5 ms here,
# 400 jobs 3.5 ms against 1.3 ms. A join with the pairs unnested was left
# to the planner, and on a jobs table without fresh statistics (a backlog
# just enqueued, before autovacuum's first analyze) it scanned every
# processing job for each pair: 68 ms to ack 500 jobs with 1,000
# processing, 1.5 s with 6,000.
def claimed_as(row: str = "") -> str:
    """The row is held under the claim number ``:claims`` (``claim_numbers``)
    gives for its id."""
    p = f"{row}." if row else ""
    return f"(:claims::jsonb -> {p}id::text) @> to_jsonb({p}claims)"


def claim_numbers(claims: Sequence[tuple[int, int]]) -> tuple[list[int], str]:
    """The ids of ``claims``, and the JSON object ``claimed_as`` reads."""
    numbers: dict[str, int | list[int]] = {}
    for job_id, claim in claims:
        key = str(job_id)
        seen = numbers.get(key)
        if seen is None:
            numbers[key] = claim
        elif isinstance(seen, list):
            seen.append(claim)
        else:
            numbers[key] = [seen, claim]
    return [job_id for job_id, _ in claims], orjson.dumps(numbers).decode()


_ACK_CLAIMS = (
    f"DELETE FROM {JOBS} j WHERE j.id = ANY(:ids::bigint[]) AND {claimed_as('j')} "
    f"AND {RULES.owned(':worker', None, ':now', row='j')} AND j.{_PLAIN}"
)


def _to_history(delete: str, outcome: str, *, row: str = "") -> str:
    """One statement moves the rows ``delete`` removes into history, finished
    at ``:now`` and pruned at ``:prune_at`` (its row count, or with ``row``
    its rows, the ids moved)."""
    returning = column_list(_FINISHED, table=row)
    ids = " RETURNING id" if row else ""
    return (
        f"WITH gone AS ({delete} RETURNING {returning}) "
        f"INSERT INTO {HISTORY} ({HISTORY_INSERT_COLS}) "
        f"SELECT id, queue, '{outcome}', payload, priority, attempts, max_attempts, run_at, "
        "created_at, :now::bigint, claimed_by, last_error, headers, :prune_at::bigint, "
        "unique_key, concurrency_key "
        f"FROM gone{ids}"
    )


class Settling:
    _ack = Sql(f"DELETE FROM {JOBS} WHERE id = :job_id AND {_OWNED} AND {_PLAIN}", Fetch.ROWCOUNT)

    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return self._ack.bind(job_id=job_id, worker=worker, claim=claim, now=now_us)

    _ack_history = Sql(_to_history(_ack.text, "acked"), Fetch.ROWCOUNT)

    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._ack_history.bind(
                job_id=job_id, worker=worker, claim=claim, now=now_us, prune_at=prune_at_us
            ),
        )

    # A list is dumped as an int2/int4/int8 array by its largest element; the
    # cast makes it bigint[] whatever psycopg picked ('{}' included).
    _ack_batch = Sql(
        f"DELETE FROM {JOBS} WHERE id = ANY(:ids::bigint[]) AND queue = :queue AND {_OWNED_NOW} "
        f"AND {_PLAIN}",
        Fetch.ROWCOUNT,
    )

    def ack_batch(self, queue: str, job_ids: Sequence[int], worker: str, now_us: int) -> Statement:
        return self._ack_batch.bind(ids=list(job_ids), queue=queue, worker=worker, now=now_us)

    _ack_batch_history = Sql(_to_history(_ack_batch.text, "acked"), Fetch.ROWCOUNT)

    def ack_batch_history(
        self, queue: str, job_ids: Sequence[int], worker: str, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._ack_batch_history.bind(
                ids=list(job_ids), queue=queue, worker=worker, now=now_us, prune_at=prune_at_us
            ),
        )

    _ack_claims = Sql(f"{_ACK_CLAIMS} RETURNING j.id", Fetch.ALL)

    def ack_claims(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int
    ) -> Statement:
        ids, numbers = claim_numbers(claims)
        return self._ack_claims.bind(ids=ids, claims=numbers, worker=worker, now=now_us)

    _ack_claims_history = Sql(_to_history(_ACK_CLAIMS, "acked", row="j"), Fetch.ALL)

    def ack_claims_history(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        ids, numbers = claim_numbers(claims)
        return (
            self._ack_claims_history.bind(
                ids=ids, claims=numbers, worker=worker, now=now_us, prune_at=prune_at_us
            ),
        )

    # retry and fail read the row, decide, then write: the row lock taken
    # here keeps a concurrent reclaim or cancel from slipping in between.
    _owned = Sql(
        f"SELECT attempts, max_attempts, keep FROM {JOBS} WHERE id = :job_id AND {_OWNED} "
        "FOR UPDATE",
        Fetch.ONE,
    )

    def owned(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return self._owned.bind(job_id=job_id, worker=worker, claim=claim, now=now_us)

    _next_due = Sql(
        f"SELECT MIN(visible_at) FROM {JOBS} WHERE queue = :queue AND {RULES.ATTEMPTS_LEFT}",
        Fetch.ONE,
    )

    def next_due(self, queue: str) -> Statement:
        return self._next_due.bind(queue=queue)

    _release_claim = Sql(
        f"UPDATE {JOBS} SET state = {STATE_PENDING}, claimed_by = NULL, "
        "run_at = :now, visible_at = :now, attempts = attempts - :refund::bigint "
        f"WHERE id = :job_id AND {_OWNED}",
        Fetch.ROWCOUNT,
    )

    def release_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, refund: int
    ) -> Statement:
        return self._release_claim.bind(
            job_id=job_id, worker=worker, claim=claim, now=now_us, refund=refund
        )

    _reschedule = Sql(
        f"UPDATE {JOBS} SET state = {STATE_PENDING}, claimed_by = NULL, "
        "run_at = :run_at, visible_at = :run_at, last_error = COALESCE(:error::text, last_error) "
        "WHERE id = :job_id"
    )

    def reschedule(self, job_id: int, run_at_us: int, error: str | None) -> Statement:
        return self._reschedule.bind(job_id=job_id, run_at=run_at_us, error=error)

    _extend_claim = Sql(
        f"UPDATE {JOBS} SET visible_at = :until WHERE id = :job_id AND {_OWNED}", Fetch.ROWCOUNT
    )

    def extend_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, until_us: int
    ) -> Statement:
        return self._extend_claim.bind(
            job_id=job_id, worker=worker, claim=claim, now=now_us, until=until_us
        )

    # One statement moves the row: delete it from the live table and insert
    # what was deleted into the dead one (with a prune time if its queue has
    # a dead retention, and its concurrency key, which a requeue restores).
    _bury = Sql(
        f"WITH gone AS (DELETE FROM {JOBS} WHERE id = :job_id RETURNING {', '.join(_BURIED)}) "
        f"INSERT INTO {DEAD} ({DEAD_COLS}, claims, headers, prune_at) SELECT id, queue, payload, "
        "priority, attempts, max_attempts, run_at, created_at, expires_at, claimed_by, "
        "COALESCE(:error::text, last_error), :reason::text, :now::bigint, concurrency_key, claims, "
        f"headers, {RULES.dead_prune_at(':now::bigint', QUEUES, 'gone.queue')} "
        "FROM gone",
        Fetch.ROWCOUNT,
    )

    def bury(
        self, job_id: int, reason: str, error: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (self._bury.bind(job_id=job_id, reason=reason, error=error, now=now_us),)

    # The row lock holds the job from this read to the delete: a claim
    # between the two cannot change what the cancel removes.
    _cancel_target = Sql(
        f"SELECT state, keep FROM {JOBS} WHERE id = :job_id AND queue = :queue FOR UPDATE",
        Fetch.ONE,
    )

    def cancel_target(self, queue: str, job_id: int) -> Statement:
        return self._cancel_target.bind(job_id=job_id, queue=queue)

    _cancel = Sql(
        f"DELETE FROM {JOBS} WHERE id = :job_id AND queue = :queue AND {_PLAIN}", Fetch.ROWCOUNT
    )

    def cancel(self, queue: str, job_id: int) -> Statement:
        return self._cancel.bind(job_id=job_id, queue=queue)

    _cancel_history = Sql(_to_history(_cancel.text, "cancelled"), Fetch.ROWCOUNT)

    def cancel_history(
        self, queue: str, job_id: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._cancel_history.bind(job_id=job_id, queue=queue, now=now_us, prune_at=prune_at_us),
        )
