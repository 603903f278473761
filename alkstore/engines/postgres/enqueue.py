"""Enqueueing on PostgreSQL: jobs one at a time or many in one statement,
and the unique jobs, whose key a live job holds in the unique index."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from ...protocol.dialect import STATE_PROCESSING
from ...protocol.plan import Fetch, Statement
from ...protocol.values.types import NewJob
from ..sql import Sql, Variants
from .names import channel_identifier
from .spelling import RULES
from .tables import HISTORY, JOBS, QUEUES

_COLUMNS = "queue, payload, priority, max_attempts, run_at, created_at, expires_at, visible_at"
_VALUES = ":queue, :payload, :priority, :max_attempts, :run_at, :now, :expires_at, :run_at"


def _insert(headers: bool, key: bool) -> str:
    """The single insert, with the optional columns the job has a value for."""
    columns = _COLUMNS + (", headers" if headers else "") + (", concurrency_key" if key else "")
    values = _VALUES + (", :headers" if headers else "") + (", :key" if key else "")
    return f"INSERT INTO {JOBS} ({columns}) VALUES ({values}) RETURNING id"


def _one(headers: bool, key: bool) -> Sql:
    return Sql(_insert(headers, key), Fetch.INSERTED_ID)


def _one_waking(headers: bool, key: bool) -> Sql:
    # The insert and its wake in one statement, so that a single enqueue is
    # one statement, which runs as a transaction of its own (no BEGIN or
    # COMMIT to send, parse and answer). The uncorrelated subquery in FROM
    # runs once; pg_notify is delivered at commit, as a NOTIFY statement's.
    return Sql(
        f"WITH j AS ({_insert(headers, key)}) "
        "SELECT j.id FROM j, (SELECT pg_notify(:channel::text, '')) AS n",
        Fetch.INSERTED_ID,
    )


def _many(headers: bool, keys: bool) -> Sql:
    # WITH ORDINALITY and ORDER BY make the identity hand out ids in the
    # jobs' order. The batch travels as one JSON array of rows: the server
    # parses it in C, where dumping six Python lists as Postgres arrays cost
    # the client about twice the server's work (psycopg's list dumper is
    # Python, element by element). The optional columns follow the six a
    # job always has, in this order: headers, concurrency key.
    extra = [name for name, present in (("headers", headers), ("concurrency_key", keys))
             if present]  # fmt: skip
    columns = "".join(f", {name}" for name in extra)
    values = "".join(f", e->>{6 + i}" for i in range(len(extra)))
    return Sql(
        f"INSERT INTO {JOBS} ({_COLUMNS}{columns}) "
        "SELECT e->>0, e->>1, (e->>2)::int, (e->>3)::bigint, (e->>4)::bigint, :now, "
        f"(e->>5)::bigint, (e->>4)::bigint{values} "
        "FROM json_array_elements(:jobs::text::json) WITH ORDINALITY AS t(e, ord) "
        "ORDER BY ord RETURNING id",
        Fetch.ALL,
    )


class Enqueue:
    # The schema of a store outside the default one (as ``Wakes``'s).
    _channel_scope: str

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

    _enqueue_waking = Variants({
        (h, k): _one_waking(h, k) for h in (False, True) for k in (False, True)
    })  # fmt: skip

    def enqueue_waking(self, job: NewJob, channel: str, origin: str, now_us: int) -> Statement:
        key = job.concurrency_key
        return self._enqueue_waking[job.headers is not None, key is not None].bind(
            queue=job.queue, payload=job.payload_json, priority=job.priority,
            max_attempts=job.max_attempts, run_at=job.run_at_us, now=now_us,
            expires_at=job.expires_at_us, headers=job.headers, key=key,
            channel=channel_identifier(channel, self._channel_scope), wakes=(channel,),
        )  # fmt: skip

    # Keyed by (any job has headers?, any job has a concurrency key?). A
    # job's key goes in with it: set afterwards, by an UPDATE joining the
    # new ids, it was left to a planner that read the whole jobs table
    # for every batch while the table had no statistics.
    _enqueue_many = Variants({(h, k): _many(h, k) for h in (False, True) for k in (False, True)})

    def enqueue_many(self, jobs: Sequence[NewJob], now_us: int) -> Statement:
        headers = any(j.headers is not None for j in jobs)
        keys = any(j.concurrency_key is not None for j in jobs)
        rows: list[tuple[object, ...]] = [
            (j.queue, j.payload_json, j.priority, j.max_attempts, j.run_at_us, j.expires_at_us)
            for j in jobs
        ]
        if headers or keys:
            rows = [
                row + ((j.headers,) if headers else ()) + ((j.concurrency_key,) if keys else ())
                for row, j in zip(rows, jobs, strict=True)
            ]
        return self._enqueue_many[headers, keys].bind(now=now_us, jobs=orjson.dumps(rows).decode())

    # The insert skips a key some live job holds (the unique index
    # jobs_unique is the arbiter: a concurrent insert of the same key waits
    # for ours to commit or roll back, then skips or goes in); its row is the
    # new id, or none.
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
        f"SELECT id, state FROM {JOBS} WHERE queue = :queue AND unique_slot = :key "
        f"AND {RULES.UNIQUE_HELD}",
        Fetch.ONE,
    )

    def unique_holder(self, queue: str, key: str) -> Statement:
        return self._unique_holder.bind(queue=queue, key=key)

    # The row lock orders this against the holder's own settlement: a retry
    # that made it pending again (committed first) fails the state test on
    # the row's newest version.
    _take_unique_key = Sql(
        f"UPDATE {JOBS} SET unique_slot = NULL WHERE id = :job_id AND queue = :queue "
        f"AND unique_slot = :key AND state = {STATE_PROCESSING} "
        f"AND {RULES.unique_yields_when_processing(QUEUES, ':queue')}",
        Fetch.ROWCOUNT,
    )

    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        return self._take_unique_key.bind(job_id=job_id, queue=queue, key=key)

    _unique_acked = Sql(
        f"SELECT id FROM {HISTORY} "
        f"WHERE {RULES.unique_recently_acked(':queue', ':key', ':since')} "
        "ORDER BY finished_at DESC LIMIT 1",
        Fetch.ONE,
    )

    def unique_acked(self, queue: str, key: str, since_us: int) -> Statement:
        return self._unique_acked.bind(queue=queue, key=key, since=since_us)

    _set_unique_processing = Sql(
        f"INSERT INTO {QUEUES} (name, unique_processing) VALUES (:queue, :blocks) "
        "ON CONFLICT (name) DO UPDATE SET unique_processing = EXCLUDED.unique_processing"
    )

    def set_unique_processing(self, queue: str, blocks: bool) -> Statement:
        return self._set_unique_processing.bind(queue=queue, blocks=blocks)
