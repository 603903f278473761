"""Enqueueing on SQLite: jobs one at a time or many in one statement, and
the unique jobs, whose key a live job holds in the unique index."""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol.dialect import STATE_PROCESSING
from ...protocol.plan import Fetch, Statement
from ...protocol.values.types import NewJob
from ..sql import Sql, Variants
from .spelling import RULES
from .tables import HISTORY, JOBS, QUEUES

_COLUMNS = "queue, payload, priority, max_attempts, run_at, created_at, expires_at, visible_at"
_VALUES = ":queue, :payload, :priority, :max_attempts, :run_at, :now, :expires_at, :run_at"


def _one(headers: bool, key: bool) -> Sql:
    """The single insert, with the optional columns the job has a value for."""
    columns = _COLUMNS + (", headers" if headers else "") + (", concurrency_key" if key else "")
    values = _VALUES + (", :headers" if headers else "") + (", :key" if key else "")
    # No RETURNING: the connection knows the new rowid (Fetch.INSERTED_ID).
    return Sql(f"INSERT INTO {JOBS} ({columns}) VALUES ({values})", Fetch.INSERTED_ID)


# enqueue_many's rows are bound job after job in the columns' order: a
# statement of any number of rows has no names to bind them by.


class Enqueue:
    # A job leaves out the columns it has no value for (the usual job: no
    # headers, nothing instrumented; no concurrency key): binding NULLs cost
    # measurably on the single insert. Keyed by (headers?, concurrency key?).
    _enqueue = Variants({(h, k): _one(h, k) for h in (False, True) for k in (False, True)})

    def enqueue(self, job: NewJob, now_us: int) -> Statement:
        key = job.concurrency_key
        return self._enqueue[job.headers is not None, key is not None].bind(
            queue=job.queue, payload=job.payload_json, priority=job.priority,
            max_attempts=job.max_attempts, run_at=job.run_at_us, now=now_us,
            expires_at=job.expires_at_us, headers=job.headers, key=key,
        )  # fmt: skip

    def enqueue_waking(self, job: NewJob, channel: str, origin: str, now_us: int) -> Statement:
        # Other processes' watchers find the new job in the jobs table
        # (Wakes.pending_job_after): the wake is this process's alone.
        key = job.concurrency_key
        return self._enqueue[job.headers is not None, key is not None].bind(
            queue=job.queue, payload=job.payload_json, priority=job.priority,
            max_attempts=job.max_attempts, run_at=job.run_at_us, now=now_us,
            expires_at=job.expires_at_us, headers=job.headers, key=key, wakes=(channel,),
        )  # fmt: skip

    def enqueue_many(self, jobs: Sequence[NewJob], now_us: int) -> Statement:
        # The optional columns go in only when some job has a value for them
        # (a job's concurrency key with it: no second statement).
        headers = any(job.headers is not None for job in jobs)
        keys = any(job.concurrency_key is not None for job in jobs)
        columns = _COLUMNS + (", headers" if headers else "")
        columns += ", concurrency_key" if keys else ""
        params: list[object] = []
        for job in jobs:
            params += (
                job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
                now_us, job.expires_at_us, job.run_at_us,
            )  # fmt: skip
            if headers:
                params.append(job.headers)
            if keys:
                params.append(job.concurrency_key)
        row = "(" + ", ".join("?" * (8 + headers + keys)) + ")"
        rows = ", ".join([row] * len(jobs))
        sql = f"INSERT INTO {JOBS} ({columns}) VALUES {rows} RETURNING id"
        return Statement(sql, tuple(params), Fetch.ALL)

    # The insert skips a key some live job holds (the unique index
    # jobs_unique is the arbiter); its row is the new id, or none.
    _enqueue_unique = Sql(
        f"INSERT INTO {JOBS} ({_COLUMNS}, headers, unique_key, unique_slot) "
        f"VALUES ({_VALUES}, :headers, :key, :key) "
        f"ON CONFLICT (queue, unique_slot) WHERE {RULES.UNIQUE_HELD} DO NOTHING RETURNING id",
        Fetch.ONE,
    )

    def enqueue_unique(self, job: NewJob, key: str, now_us: int) -> Statement:
        return self._enqueue_unique.bind(
            queue=job.queue, payload=job.payload_json, priority=job.priority,
            max_attempts=job.max_attempts, run_at=job.run_at_us, now=now_us,
            expires_at=job.expires_at_us, headers=job.headers, key=key,
        )  # fmt: skip

    _unique_holder = Sql(
        f"SELECT id, state FROM {JOBS} INDEXED BY __alkstore_jobs_unique "
        f"WHERE queue = :queue AND unique_slot = :key AND {RULES.UNIQUE_HELD}",
        Fetch.ONE,
    )

    def unique_holder(self, queue: str, key: str) -> Statement:
        return self._unique_holder.bind(queue=queue, key=key)

    _take_unique_key = Sql(
        f"UPDATE {JOBS} SET unique_slot = NULL "
        f"WHERE id = :job_id AND queue = :queue AND unique_slot = :key "
        f"AND state = {STATE_PROCESSING} "
        f"AND {RULES.unique_yields_when_processing(QUEUES, ':queue')}",
        Fetch.ROWCOUNT,
    )

    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        return self._take_unique_key.bind(job_id=job_id, queue=queue, key=key)

    _unique_acked = Sql(
        f"SELECT id FROM {HISTORY} INDEXED BY __alkstore_history_unique "
        f"WHERE {RULES.unique_recently_acked(':queue', ':key', ':since')} "
        "ORDER BY finished_at DESC LIMIT 1",
        Fetch.ONE,
    )

    def unique_acked(self, queue: str, key: str, since_us: int) -> Statement:
        return self._unique_acked.bind(queue=queue, key=key, since=since_us)

    _set_unique_processing = Sql(
        f"INSERT INTO {QUEUES} (name, unique_processing) VALUES (:queue, :blocks) "
        "ON CONFLICT (name) DO UPDATE SET unique_processing = excluded.unique_processing"
    )

    def set_unique_processing(self, queue: str, blocks: bool) -> Statement:
        return self._set_unique_processing.bind(queue=queue, blocks=int(blocks))
