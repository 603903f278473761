"""Settling a claimed job on SQLite: acks (moving the job into history or
not), the owned read before a retry or a fail, release, reschedule,
heartbeat, burial and cancellation. A move between tables is two
statements, the copy, then the same delete: the write lock is held from one
to the other."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PENDING
from ...protocol.plan import Fetch, Statement
from ..shapes import DEAD_COLS, HISTORY_INSERT_COLS, per_priority_min
from ..sql import Sql
from .spelling import RULES
from .tables import DEAD, HISTORY, JOBS, QUEUES

_OWNED = RULES.owned(":worker", ":claim", ":now")
# The batch forms have no claim numbers: the worker's live claim.
_OWNED_NOW = RULES.owned(":worker", None, ":now")
# The acks and cancels here take only jobs whose finish needs no record; a
# kept one is left for the moves of .dependencies (ack_kept, cancel_kept).
_PLAIN = RULES.NOT_KEPT
# The (id, claim number) pairs are matched by the row-value IN.
_OWNED_CLAIMS = (
    f"(id, claims) IN (SELECT value ->> 0, value ->> 1 FROM json_each(:pairs)) AND {_OWNED_NOW} "
    f"AND {_PLAIN}"
)


def _to_history(outcome: str, where: str, returning: str = "") -> str:
    """Copy the live rows ``where`` selects into history, finished at ``:now``
    and pruned at ``:prune_at``; the statement that deletes them follows in
    the same transaction, selecting the same rows."""
    return (
        f"INSERT INTO {HISTORY} ({HISTORY_INSERT_COLS}) "
        f"SELECT id, queue, '{outcome}', payload, priority, attempts, max_attempts, run_at, "
        "created_at, :now, claimed_by, last_error, headers, :prune_at, unique_key, concurrency_key "
        f"FROM {JOBS} WHERE {where}{returning}"
    )


class Settling:
    _ack = Sql(f"DELETE FROM {JOBS} WHERE id = :job_id AND {_OWNED} AND {_PLAIN}", Fetch.ROWCOUNT)

    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return self._ack.bind(job_id=job_id, worker=worker, claim=claim, now=now_us)

    _ack_history = Sql(
        _to_history("acked", f"id = :job_id AND {_OWNED} AND {_PLAIN}"), Fetch.ROWCOUNT
    )
    # The copy counted what the delete takes.
    _ack_moved = Sql(_ack.text)

    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._ack_history.bind(
                job_id=job_id, worker=worker, claim=claim, now=now_us, prune_at=prune_at_us
            ),
            self._ack_moved.bind(job_id=job_id, worker=worker, claim=claim, now=now_us),
        )

    _ack_batch = Sql(
        f"DELETE FROM {JOBS} WHERE id IN (SELECT value FROM json_each(:ids)) "
        f"AND queue = :queue AND {_OWNED_NOW} AND {_PLAIN}",
        Fetch.ROWCOUNT,
    )

    def ack_batch(self, queue: str, job_ids: Sequence[int], worker: str, now_us: int) -> Statement:
        ids = orjson.dumps(list(job_ids)).decode()
        return self._ack_batch.bind(ids=ids, queue=queue, worker=worker, now=now_us)

    _ack_batch_history = Sql(
        _to_history(
            "acked",
            f"id IN (SELECT value FROM json_each(:ids)) AND queue = :queue AND {_OWNED_NOW} "
            f"AND {_PLAIN}",
        ),
        Fetch.ROWCOUNT,
    )
    _ack_batch_moved = Sql(_ack_batch.text)

    def ack_batch_history(
        self, queue: str, job_ids: Sequence[int], worker: str, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        ids = orjson.dumps(list(job_ids)).decode()
        return (
            self._ack_batch_history.bind(
                ids=ids, queue=queue, worker=worker, now=now_us, prune_at=prune_at_us
            ),
            self._ack_batch_moved.bind(ids=ids, queue=queue, worker=worker, now=now_us),
        )

    _ack_claims = Sql(f"DELETE FROM {JOBS} WHERE {_OWNED_CLAIMS} RETURNING id", Fetch.ALL)

    def ack_claims(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int
    ) -> Statement:
        pairs = orjson.dumps(list(claims)).decode()
        return self._ack_claims.bind(pairs=pairs, worker=worker, now=now_us)

    # An INSERT's rows come back as the statement is stepped, so the ids are
    # read from the copy; the delete that follows returns nothing (unread
    # RETURNING rows would leave it half done).
    _ack_claims_history = Sql(_to_history("acked", _OWNED_CLAIMS, " RETURNING id"), Fetch.ALL)
    _ack_claims_moved = Sql(f"DELETE FROM {JOBS} WHERE {_OWNED_CLAIMS}")

    def ack_claims_history(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        pairs = orjson.dumps(list(claims)).decode()
        return (
            self._ack_claims_history.bind(
                pairs=pairs, worker=worker, now=now_us, prune_at=prune_at_us
            ),
            self._ack_claims_moved.bind(pairs=pairs, worker=worker, now=now_us),
        )

    # retry and fail read the row, decide, then write, all under the write lock.
    _owned = Sql(
        f"SELECT attempts, max_attempts, keep FROM {JOBS} WHERE id = :job_id AND {_OWNED}",
        Fetch.ONE,
    )

    def owned(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return self._owned.bind(job_id=job_id, worker=worker, claim=claim, now=now_us)

    # The claim index's first entry per priority (a skip-scan): a due index
    # of its own cost every job write one more page, an eighth of an enqueue.
    _next_due = Sql(
        per_priority_min(
            f"{JOBS} INDEXED BY __alkstore_jobs_claim",
            RULES.PRIORITY_FIRST,
            f"queue = :queue AND {RULES.ATTEMPTS_LEFT}",
            f"queue = :queue AND {RULES.ATTEMPTS_LEFT}",
            "visible_at",
        ),
        Fetch.ONE,
    )

    def next_due(self, queue: str) -> Statement:
        return self._next_due.bind(queue=queue)

    _release_claim = Sql(
        f"UPDATE {JOBS} SET state = {STATE_PENDING}, claimed_by = NULL, "
        "run_at = :now, visible_at = :now, attempts = attempts - :refund "
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
        "run_at = :run_at, visible_at = :run_at, last_error = COALESCE(:error, last_error) "
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

    # Two statements move the row: copy it into the dead table (with a prune
    # time if its queue has a dead retention, and its concurrency key, which
    # a requeue restores), delete it.
    _bury_copy = Sql(
        f"INSERT INTO {DEAD} ({DEAD_COLS}, claims, headers, prune_at) "
        "SELECT id, queue, payload, priority, attempts, max_attempts, run_at, "
        "created_at, expires_at, claimed_by, COALESCE(:error, last_error), :reason, :now, "
        "concurrency_key, claims, headers, "
        f"{RULES.dead_prune_at(':now', QUEUES, f'{JOBS}.queue')} "
        f"FROM {JOBS} WHERE id = :job_id",
        Fetch.ROWCOUNT,
    )
    _bury_delete = Sql(f"DELETE FROM {JOBS} WHERE id = :job_id", Fetch.ROWCOUNT)

    def bury(
        self, job_id: int, reason: str, error: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._bury_copy.bind(job_id=job_id, reason=reason, error=error, now=now_us),
            self._bury_delete.bind(job_id=job_id),
        )

    # The single writer holds the job from this read to the delete.
    _cancel_target = Sql(
        f"SELECT state, keep FROM {JOBS} WHERE id = :job_id AND queue = :queue", Fetch.ONE
    )

    def cancel_target(self, queue: str, job_id: int) -> Statement:
        return self._cancel_target.bind(job_id=job_id, queue=queue)

    _cancel = Sql(
        f"DELETE FROM {JOBS} WHERE id = :job_id AND queue = :queue AND {_PLAIN}", Fetch.ROWCOUNT
    )

    def cancel(self, queue: str, job_id: int) -> Statement:
        return self._cancel.bind(job_id=job_id, queue=queue)

    _cancel_history = Sql(
        _to_history("cancelled", f"id = :job_id AND queue = :queue AND {_PLAIN}"), Fetch.ROWCOUNT
    )
    _cancel_moved = Sql(_cancel.text)

    def cancel_history(
        self, queue: str, job_id: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (
            self._cancel_history.bind(job_id=job_id, queue=queue, now=now_us, prune_at=prune_at_us),
            self._cancel_moved.bind(job_id=job_id, queue=queue),
        )
