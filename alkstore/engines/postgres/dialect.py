"""SQL text of every step on PostgreSQL (13+; tested on 15).

Statements use ``$1, $2, ...`` placeholders and are sent one at a time with
the extended protocol (``PQsendQueryParams``): never two statements in one
string. Parameters are dumped by psycopg, which types a Python ``int`` as
``int2``/``int4``/``int8`` by its value and a ``str`` or ``None`` as
``unknown`` (the server infers the type from the context). That is fine for
columns and comparisons; where the context does not fix a type (``COALESCE``,
a select list, an array) the SQL casts explicitly.

Names (queues, streams, locks, schedules, consumers, workers, owners) are
always bound ``text`` parameters compared byte for byte (``COLLATE "C"``
columns), never identifiers: distinct names can never alias. Wake channels
are identifiers, mapped by :mod:`.names`. Table names are schema-qualified
and quoted; the schema is validated once, at construction.

Row shapes and ``Fetch`` kinds are those of ``protocol.dialect`` and match
the SQLite engine statement for statement.

Layout (the same as :mod:`alkstore.engines.sqlite.dialect`, so the two read
side by side): the column lists, then the SQL text of every statement (here
built once per schema, in ``_build``), then the ``Dialect`` methods that bind
it; both halves in the order of :class:`alkstore.protocol.dialect.Dialect`
(wakes, queues, streams, schedules, locks). The semantic rules (claimable,
owned, lock held or free, ...) are not written here: each is a fragment of
:mod:`.rules`, used by every statement that needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson

from ...protocol.dialect import (
    DEAD_COLUMNS,
    DUE_SCHEDULE_COLUMNS,
    EVENT_COLUMNS,
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    JOB_INFO_COLUMNS,
    SCHEDULE_COLUMNS,
    STATE_PENDING,
    STATE_PROCESSING,
    column_list,
)
from ...protocol.plan import Fetch, Statement
from ...protocol.values.generation import META_KEY as GENERATION_KEY
from ...protocol.values.types import NewJob, NewSchedule
from .names import channel_identifier, check_schema, listen_sql, unlisten_sql
from .rules import (
    ATTEMPTS_LEFT,
    CLAIM_ORDER,
    LIMIT_COLUMNS,
    QUEUE_WIDE,
    SCHEDULE_RUNNING,
    TOKEN_FLOOR_KEY,
    UNIQUE_HELD,
    claim_rules_known,
    claimable,
    dead_prune_at,
    fencing_token,
    fire_time_unchanged,
    hidden,
    history_retention,
    in_window,
    keep_fire_time,
    keep_higher_offset,
    key_has_room,
    key_under_rate,
    lock_free,
    lock_free_since,
    lock_held,
    new_lock_token,
    owned,
    protected_floor,
    prune_due,
    queue_claims_unlimited,
    queue_limit,
    queue_running,
    schedule_due,
    sweep_exhausted,
    sweep_expired,
    unique_recently_acked,
    unique_yields_when_processing,
    within_age,
)
from .schema import DEFAULT_SCHEMA, lock_guard_key, qualified

if TYPE_CHECKING:
    from ...protocol.dialect import Dialect

# -- column lists (the row shapes of protocol.dialect) -----------------------
_JOB_COLS = column_list(JOB_COLUMNS)
_JOB_INFO_COLS = column_list(JOB_INFO_COLUMNS)
_DEAD_COLS = column_list(DEAD_COLUMNS)
_EVENT_COLS = column_list(EVENT_COLUMNS)
_HISTORY_COLS = column_list(HISTORY_COLUMNS)
_SCHEDULE_COLS = column_list(SCHEDULE_COLUMNS)
_SWEEP_COLS = "id, state, visible_at, expires_at, attempts, max_attempts"
# The columns a finished job's move into history fills (the read shape,
# HISTORY_COLUMNS, leaves out its metadata and prune time).
_HISTORY_INSERT_COLS = (
    "id, queue, outcome, payload, priority, attempts, max_attempts, run_at, created_at, "
    "finished_at, worker, last_error, headers, prune_at, unique_key, concurrency_key"
)
# What a finished job takes from its live row into history.
_FINISHED = (
    "id", "queue", "payload", "priority", "attempts", "max_attempts", "run_at", "created_at",
    "claimed_by", "last_error", "headers", "unique_key", "concurrency_key",
)  # fmt: skip


def _names(cte: str, table: str, column: str) -> str:
    """A recursive CTE ``cte(name)`` of the distinct values of ``column``,
    each found by one index seek from the one before (a skip-scan); the last
    row is NULL."""
    first = f"SELECT {column} FROM {table} ORDER BY {column} LIMIT 1"
    after = f"SELECT {column} FROM {table} WHERE {column} > {cte}.name ORDER BY {column} LIMIT 1"
    return (
        f"{cte}(name) AS (SELECT ({first}) UNION ALL "
        f"SELECT ({after}) FROM {cte} WHERE {cte}.name IS NOT NULL)"
    )


class PostgresDialect:
    """Statement builders for one Postgres schema. Pure: every method only
    builds a ``Statement``."""

    name = "postgres"
    # The server's NOTIFY payload limit (NOTIFY_PAYLOAD_MAX_LENGTH with the
    # default 8 kB block size). alkstore never sends a payload (wakes are
    # opaque), but the contract's PayloadTooLarge check is made client-side
    # against this number, so both engines' users see the same rule.
    notify_payload_limit: int | None = 8000

    def __init__(self, schema: str = DEFAULT_SCHEMA) -> None:
        self.schema = check_schema(schema)
        self.jobs = qualified(self.schema, "jobs")
        self.dead = qualified(self.schema, "dead")
        self.streams = qualified(self.schema, "streams")
        self.events = qualified(self.schema, "events")
        self.offsets = qualified(self.schema, "offsets")
        self.locks = qualified(self.schema, "locks")
        self.schedules = qualified(self.schema, "schedules")
        self.queues = qualified(self.schema, "queues")
        self.history = qualified(self.schema, "history")
        self.claim_log = qualified(self.schema, "claim_log")
        self._channel_scope = "" if self.schema == DEFAULT_SCHEMA else self.schema
        self.meta = qualified(self.schema, "meta")
        self._lock_key = lock_guard_key(self.schema)
        self._build()

    def _claim_limited_text(self, concurrency: bool, key_rate: bool) -> str:
        """The limited claim's text, checking the key's concurrency room
        and/or its rate (a queue with only a queue-wide rate checks neither:
        the core counts that rate once and asks for no more than its room).
        Inputs: $1 queue, $2 now, $3 worker, $4 until, $5 the claim
        generation, then the concurrency limit, then the rate window's start
        and limit."""
        jobs, queues = self.jobs, self.queues
        rules, n = "", 6
        if concurrency:
            rules += f" AND {key_has_room(jobs, '$1', '$2', f'${n}', row='c')}"
            n += 1
        if key_rate:
            rules += f" AND {key_under_rate(self.claim_log, '$1', f'${n}', f'${n + 1}', row='c')}"
        return f"""WITH picked AS (
            SELECT c.id FROM {jobs} AS c
            WHERE c.queue = $1 AND {claimable('$2')} AND {queue_running(queues, '$1')}
                AND {claim_rules_known(self.meta, '$5')}{rules}
            ORDER BY {CLAIM_ORDER}
            LIMIT 1
            FOR UPDATE SKIP LOCKED)
        UPDATE {jobs} AS j
            SET state = {STATE_PROCESSING}, attempts = j.attempts + 1, claims = j.claims + 1,
                claimed_by = $3, run_at = j.visible_at, visible_at = $4
            FROM picked WHERE j.id = picked.id
            RETURNING {column_list(JOB_COLUMNS, table="j")}, {history_retention(queues, '$1')}"""

    def _to_history(
        self, delete: str, outcome: str, finished: str, prune_at: str, *, row: str = ""
    ) -> str:
        """One statement moves the rows ``delete`` removes into history (its
        row count, or with ``row`` its rows, the ids moved)."""
        returning = column_list(_FINISHED, table=row)
        ids = " RETURNING id" if row else ""
        return (
            f"WITH gone AS ({delete} RETURNING {returning}) "
            f"INSERT INTO {self.history} ({_HISTORY_INSERT_COLS}) "
            f"SELECT id, queue, '{outcome}', payload, priority, attempts, max_attempts, run_at, "
            f"created_at, {finished}::bigint, claimed_by, last_error, headers, {prune_at}::bigint, "
            "unique_key, concurrency_key "
            f"FROM gone{ids}"
        )

    def _build(self) -> None:
        """The SQL text of every statement for this schema, built once."""
        jobs, dead, queues, history = self.jobs, self.dead, self.queues, self.history

        # -- wakes -----------------------------------------------------------
        # Delivered at commit, never on rollback; the payload is always empty
        # (wakes are opaque).
        self._notify = "SELECT pg_notify($1::text, '')"

        # -- queues ----------------------------------------------------------
        # Jobs without headers (the usual case: nothing instrumented) leave
        # the column out, as on SQLite.
        self._enqueue = (
            f"INSERT INTO {jobs} (queue, payload, priority, max_attempts, run_at, "
            "created_at, expires_at, visible_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $5) "
            "RETURNING id"
        )
        self._enqueue_headers = (
            f"INSERT INTO {jobs} (queue, payload, priority, max_attempts, run_at, "
            "created_at, expires_at, visible_at, headers) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $5, $8) RETURNING id"
        )
        # Many jobs in one statement. WITH ORDINALITY and ORDER BY make the
        # identity hand out ids in the jobs' order. The batch travels as one
        # JSON array of rows: the server parses it in C, where dumping six
        # Python lists as Postgres arrays cost the client about twice the
        # server's work (psycopg's list dumper is Python, element by element).
        many = (
            f"INSERT INTO {jobs} (queue, payload, priority, max_attempts, run_at, "
            "created_at, expires_at, visible_at{}) "
            "SELECT e->>0, e->>1, (e->>2)::int, (e->>3)::bigint, (e->>4)::bigint, $1, "
            "(e->>5)::bigint, (e->>4)::bigint{} "
            "FROM json_array_elements($2::text::json) WITH ORDINALITY AS t(e, ord) "
            "ORDER BY ord RETURNING id"
        )
        self._enqueue_many = many.format("", "")
        self._enqueue_many_headers = many.format(", headers", ", e->>6")
        # A unique enqueue: the insert skips a key some live job holds (the
        # unique index jobs_unique is the arbiter: a concurrent insert of
        # the same key waits for ours to commit or roll back, then skips or
        # goes in); its row is the new id, or none.
        self._enqueue_unique = (
            f"INSERT INTO {jobs} (queue, payload, priority, max_attempts, run_at, "
            "created_at, expires_at, visible_at, headers, unique_key, unique_slot) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $5, $8, $9, $9) "
            f"ON CONFLICT (queue, unique_slot) WHERE {UNIQUE_HELD} DO NOTHING RETURNING id"
        )
        self._unique_holder = (
            f"SELECT id, state FROM {jobs} WHERE queue = $1 AND unique_slot = $2 "
            f"AND {UNIQUE_HELD}"
        )
        # The row lock orders this against the holder's own settlement: a
        # retry that made it pending again (committed first) fails the
        # state test on the row's newest version.
        self._take_unique_key = (
            f"UPDATE {jobs} SET unique_slot = NULL WHERE id = $1 AND queue = $2 "
            f"AND unique_slot = $3 AND state = {STATE_PROCESSING} "
            f"AND {unique_yields_when_processing(queues, '$2')}"
        )
        self._unique_acked = (
            f"SELECT id FROM {history} WHERE {unique_recently_acked('$1', '$2', '$3')} "
            "ORDER BY finished_at DESC LIMIT 1"
        )
        self._set_unique_processing = (
            f"INSERT INTO {queues} (name, unique_processing) VALUES ($1, $2) "
            "ON CONFLICT (name) DO UPDATE SET unique_processing = EXCLUDED.unique_processing"
        )
        # Postgres has no index hints. On a jobs table that autovacuum has
        # not analyzed yet (a new store filled with 100,000 jobs, say) the
        # planner reads every due job through a bitmap scan and sorts them
        # all, for every claim: claims cost O(n) and a backlog drains in
        # O(n^2) (measured: 50 ms per claim of 100 at 100,000 jobs, 4-6 ms
        # with this). For the claim's own transaction only, sorts and bitmap
        # or sequential scans are priced out, which leaves the walk of the
        # claim index in claim order, stopping at the LIMIT. It rides with
        # BEGIN in the same round trip (pipelining).
        self._claim_prelude = (
            Statement(
                "SELECT set_config('enable_sort', 'off', true), "
                "set_config('enable_bitmapscan', 'off', true), "
                "set_config('enable_seqscan', 'off', true)"
            ),
        )
        # Claim = pick and update in one statement. The CTE walks the partial
        # claim index in claim order and locks what it picks; SKIP LOCKED
        # makes concurrent claimers take disjoint rows instead of queueing
        # behind each other. A row another claimer changed and committed
        # after our snapshot is re-checked against the WHERE clause on its
        # newest version (READ COMMITTED), so a job is never claimed twice.
        # Reclaim of lapsed claims is the same predicate: a processing job
        # whose visible_at passed, with attempts left, is claimable again.
        self._claim = f"""WITH picked AS (
            SELECT id FROM {jobs}
            WHERE queue = {queue_claims_unlimited(queues, '$1')}
                AND {claim_rules_known(self.meta, '$6')} AND {claimable('$2')}
            ORDER BY {CLAIM_ORDER}
            LIMIT $3
            FOR UPDATE SKIP LOCKED)
        UPDATE {jobs} AS j
            SET state = {STATE_PROCESSING}, attempts = j.attempts + 1, claims = j.claims + 1,
                claimed_by = $4, run_at = j.visible_at, visible_at = $5
            FROM picked WHERE j.id = picked.id
            RETURNING {column_list(JOB_COLUMNS, table="j")}, {history_retention(queues, '$1')}"""
        # A limited queue (rules.queue_claims_unlimited closed the claim
        # above): its limit is read with its row locked (FOR UPDATE), which
        # queues the limited claims of that queue one behind the other until
        # each commits; every statement after the lock sees the claims
        # committed before it (READ COMMITTED takes a snapshot per
        # statement). Then one job per statement, the first in claim order
        # whose key has room (rules.key_has_room counts the key's live
        # claims in jobs_keyed).
        self._claim_limit = f"{queue_limit(queues, '$1')} FOR UPDATE"
        self._claim_limited = {
            (concurrency, key_rate): self._claim_limited_text(concurrency, key_rate)
            for concurrency in (False, True)
            for key_rate in (False, True)
        }
        self._claim_generation = f"SELECT value FROM {self.meta} WHERE key = '{GENERATION_KEY}'"
        self._set_concurrency_keys = (
            f"UPDATE {jobs} AS j SET concurrency_key = k.key "
            "FROM unnest($1::bigint[], $2::text[]) AS k(id, key) WHERE j.id = k.id"
        )
        self._set_limits = (
            f"INSERT INTO {queues} (name, concurrency_limit, rate_limit, rate_period_us, "
            "key_rate_limit, key_rate_period_us) VALUES ($1, $2, $3, $4, $5, $6) "
            "ON CONFLICT (name) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit, "
            "rate_limit = EXCLUDED.rate_limit, rate_period_us = EXCLUDED.rate_period_us, "
            "key_rate_limit = EXCLUDED.key_rate_limit, "
            "key_rate_period_us = EXCLUDED.key_rate_period_us"
        )
        self._queue_limits = f"SELECT {LIMIT_COLUMNS} FROM {queues} WHERE name = $1"
        log = self.claim_log
        self._claims_in_window = (
            f"SELECT count(*) FROM {log} WHERE queue = $1 AND key = {QUEUE_WIDE} "
            f"AND {in_window('$2')}"
        )
        self._window_opens = (
            f"SELECT at FROM {log} WHERE queue = $1 AND key = {QUEUE_WIDE} "
            f"AND {in_window('$2')} ORDER BY at LIMIT 1 OFFSET $3"
        )
        self._first_key_claim = (
            f"SELECT min(at) FROM {log} WHERE queue = $1 AND {in_window('$2')} "
            f"AND key <> {QUEUE_WIDE}"
        )
        self._log_queue_claim = f"INSERT INTO {log} (queue, key, at) VALUES ($1, {QUEUE_WIDE}, $2)"
        self._log_key_claim = (
            f"INSERT INTO {log} (queue, key, at) SELECT queue, concurrency_key, $1 FROM {jobs} "
            "WHERE id = $2 AND concurrency_key IS NOT NULL"
        )
        self._prune_claim_log = f"DELETE FROM {log} WHERE queue = $1 AND at <= $2"
        # Each claimed row carries its queue's history retention (above), so
        # the ack knows whether to keep the job with no round trip of its own.
        self._ack = f"DELETE FROM {jobs} WHERE id = $1 AND {owned('$2', '$3', '$4')}"
        self._ack_history = self._to_history(self._ack, "acked", "$4", "$5")
        # The batch form has ids but no claim numbers: the worker's live claim.
        self._ack_batch = (
            f"DELETE FROM {jobs} WHERE id = ANY($1::bigint[]) AND queue = $2 "
            f"AND {owned('$3', None, '$4')}"
        )
        self._ack_batch_history = self._to_history(self._ack_batch, "acked", "$4", "$5")
        # The (id, claim number) pairs are matched by the join.
        ack_claims = (
            f"DELETE FROM {jobs} j USING unnest($1::bigint[], $2::bigint[]) AS c(id, claims) "
            f"WHERE j.id = c.id AND j.claims = c.claims AND {owned('$3', None, '$4', row='j')}"
        )
        self._ack_claims = f"{ack_claims} RETURNING j.id"
        self._ack_claims_history = self._to_history(ack_claims, "acked", "$4", "$5", row="j")
        # retry and fail read the row, decide, then write: the row lock taken
        # here keeps a concurrent reclaim or cancel from slipping in between.
        self._owned = (
            f"SELECT attempts, max_attempts FROM {jobs} "
            f"WHERE id = $1 AND {owned('$2', '$3', '$4')} FOR UPDATE"
        )
        self._next_due = f"SELECT MIN(visible_at) FROM {jobs} WHERE queue = $1 AND {ATTEMPTS_LEFT}"
        self._release_claim = (
            f"UPDATE {jobs} SET state = {STATE_PENDING}, claimed_by = NULL, "
            f"run_at = $1, visible_at = $1, attempts = attempts - $2::bigint "
            f"WHERE id = $3 AND {owned('$4', '$5', '$6')}"
        )
        self._reschedule = (
            f"UPDATE {jobs} SET state = {STATE_PENDING}, claimed_by = NULL, "
            "run_at = $1, visible_at = $1, last_error = COALESCE($2::text, last_error) "
            "WHERE id = $3"
        )
        self._extend_claim = (
            f"UPDATE {jobs} SET visible_at = $1 WHERE id = $2 AND {owned('$3', '$4', '$5')}"
        )
        # One statement moves the row: delete it from the live table and
        # insert what was deleted into the dead one (with a prune time if its
        # queue has a dead retention, and its concurrency key, which a
        # requeue restores).
        self._bury = (
            f"WITH gone AS (DELETE FROM {jobs} WHERE id = $1 RETURNING id, queue, payload, "
            "priority, attempts, max_attempts, run_at, created_at, expires_at, claimed_by, "
            f"last_error, claims, headers, concurrency_key) INSERT INTO {dead} ({_DEAD_COLS}, "
            "claims, headers, prune_at) SELECT id, queue, payload, priority, attempts, "
            "max_attempts, run_at, created_at, expires_at, claimed_by, "
            "COALESCE($2::text, last_error), $3::text, $4::bigint, concurrency_key, claims, "
            f"headers, {dead_prune_at('$4::bigint', queues, 'gone.queue')} "
            "FROM gone"
        )
        # The row lock holds the job from this read to the delete: a claim
        # between the two cannot change what the cancel removes.
        self._cancel_target = f"SELECT state FROM {jobs} WHERE id = $1 AND queue = $2 FOR UPDATE"
        self._cancel = f"DELETE FROM {jobs} WHERE id = $1 AND queue = $2"
        self._cancel_history = self._to_history(self._cancel, "cancelled", "$3", "$4")
        self._get_job = f"SELECT {_JOB_INFO_COLS} FROM {jobs} WHERE id = $1 AND queue = $2"
        self._get_job_any = f"SELECT {_JOB_INFO_COLS} FROM {jobs} WHERE id = $1"
        self._get_dead = f"SELECT {_DEAD_COLS} FROM {dead} WHERE id = $1 AND queue = $2"
        self._get_dead_any = f"SELECT {_DEAD_COLS} FROM {dead} WHERE id = $1"
        self._get_history = f"SELECT {_HISTORY_COLS} FROM {history} WHERE id = $1 AND queue = $2"
        self._get_history_any = f"SELECT {_HISTORY_COLS} FROM {history} WHERE id = $1"
        # A worker's cancel check: every id it holds in one statement (one
        # snapshot), each looked up by primary key in the three tables. The
        # OFFSET 0 keeps each NOT EXISTS a subplan run per id (a primary-key
        # probe): without it the planner turns them into anti-joins, and
        # with the default estimate for a queue's rows (no statistics yet, or
        # stale ones) it reads the queue's every dead letter and history row
        # once per check to match them against the ids.
        self._cancelled_among = (
            "SELECT t.id FROM unnest($1::bigint[]) AS t(id) "
            f"WHERE NOT EXISTS (SELECT 1 FROM {jobs} WHERE id = t.id AND queue = $2 OFFSET 0) "
            f"AND NOT EXISTS (SELECT 1 FROM {dead} WHERE id = t.id AND queue = $2 OFFSET 0) "
            f"AND NOT EXISTS (SELECT 1 FROM {history} WHERE id = t.id AND queue = $2 "
            "AND outcome <> 'cancelled' OFFSET 0)"
        )
        # The sweep's candidates: deadlines that passed (except under a live
        # claim, which keeps its chance to ack) and lapsed claims with no
        # attempts left. Each arm matches one partial index (jobs_expiry,
        # jobs_exhausted), so the planner can combine them with a BitmapOr.
        # SKIP LOCKED: a row some worker is settling right now is not the
        # sweep's, and a concurrent sweeper takes other rows. The lock held
        # until commit means the core's decision and the bury that follows
        # see the row as it was read.
        sweep = (
            f"SELECT {_SWEEP_COLS} FROM {jobs} WHERE "
            f"(({sweep_expired('$1')}) OR ({sweep_exhausted('$1')}))"
        )
        self._sweep_all = f"{sweep} ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
        self._sweep_queue = f"{sweep} AND queue = $3 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED"
        self._queue_counts = (
            f"SELECT "
            # ready: claimable right now (a job the next sweep will bury is
            # counted nowhere until it is dead).
            f"COUNT(*) FILTER (WHERE state = {STATE_PENDING} AND {claimable('$1')}), "
            f"COUNT(*) FILTER (WHERE state = {STATE_PENDING} AND {hidden('$1')}), "
            f"COUNT(*) FILTER (WHERE state = {STATE_PROCESSING}) "
            f"FROM {jobs} WHERE queue = $2"
        )
        # The ready job that became due first: the due index walked in
        # visible_at order, stopping at the first ready row.
        self._oldest_ready = (
            f"SELECT visible_at FROM {jobs} "
            f"WHERE queue = $1 AND state = {STATE_PENDING} AND {claimable('$2')} "
            "ORDER BY visible_at LIMIT 1"
        )
        self._set_paused = (
            f"INSERT INTO {queues} (name, paused) VALUES ($1, $2) "
            "ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused"
        )
        self._queue_paused = f"SELECT paused FROM {queues} WHERE name = $1"
        self._set_retention = (
            f"INSERT INTO {queues} (name, history_us, dead_us) VALUES ($1, $2, $3) "
            "ON CONFLICT (name) DO UPDATE SET history_us = EXCLUDED.history_us, "
            "dead_us = EXCLUDED.dead_us"
        )
        self._queue_retention = f"SELECT history_us, dead_us FROM {queues} WHERE name = $1"
        self._dead_count = f"SELECT COUNT(*) FROM {dead} WHERE queue = $1"
        self._dead_letters = (
            f"SELECT {_DEAD_COLS} FROM {dead} WHERE queue = $1 ORDER BY died_at, id LIMIT $2"
        )
        # One statement: the dead row comes back under its own id (the
        # identity never hands that id out again, so OVERRIDING SYSTEM VALUE
        # cannot collide) and with its concurrency key (so a limited queue
        # still limits it). Its row count says whether the job moved.
        self._requeue_dead = (
            f"WITH back AS (DELETE FROM {dead} WHERE id = $1 AND queue = $2 "
            "RETURNING id, queue, payload, priority, max_attempts, created_at, last_error, "
            "claims, headers, concurrency_key) "
            f"INSERT INTO {jobs} (id, queue, payload, priority, attempts, max_attempts, "
            "run_at, created_at, expires_at, visible_at, state, last_error, claims, headers, "
            "concurrency_key) OVERRIDING SYSTEM VALUE "
            "SELECT id, queue, payload, priority, 0, max_attempts, $3::bigint, created_at, "
            f"NULL::bigint, $3::bigint, {STATE_PENDING}, last_error, claims, headers, "
            "concurrency_key FROM back"
        )
        self._purge_all = f"DELETE FROM {dead} WHERE queue = $1"
        self._purge_before = f"DELETE FROM {dead} WHERE queue = $1 AND died_at < $2"
        self._purge_ids = f"DELETE FROM {dead} WHERE queue = $1 AND id = ANY($2::bigint[])"
        self._queue_names = (
            f"WITH RECURSIVE {_names('live', jobs, 'queue')}, "
            f"{_names('buried', dead, 'queue')}, {_names('finished', history, 'queue')} "
            "SELECT name FROM live WHERE name IS NOT NULL "
            "UNION SELECT name FROM buried WHERE name IS NOT NULL "
            "UNION SELECT name FROM finished WHERE name IS NOT NULL "
            f"UNION SELECT name FROM {queues} ORDER BY name"
        )
        # The counts are queue_counts' (the same rules), in one pass over the
        # queue's live jobs; dead letters and history are counted on their
        # indexes.
        self._queue_summary = (
            "SELECT c.ready, c.scheduled, c.processing, c.oldest, "
            f"(SELECT COUNT(*) FROM {dead} WHERE queue = $2), "
            f"(SELECT COUNT(*) FROM {history} WHERE queue = $2), "
            "q.paused, q.history_us, q.dead_us, q.concurrency_limit, q.rate_limit, "
            "q.rate_period_us, q.key_rate_limit, q.key_rate_period_us, q.unique_processing "
            "FROM (SELECT "
            f"COUNT(*) FILTER (WHERE state = {STATE_PENDING} AND {claimable('$1')}) AS ready, "
            f"COUNT(*) FILTER (WHERE state = {STATE_PENDING} AND {hidden('$1')}) AS scheduled, "
            f"COUNT(*) FILTER (WHERE state = {STATE_PROCESSING}) AS processing, "
            f"MIN(run_at) FILTER (WHERE state = {STATE_PENDING} AND {claimable('$1')}) AS oldest "
            f"FROM {jobs} WHERE queue = $2) AS c "
            f"LEFT JOIN {queues} AS q ON q.name = $2"
        )

        def job_page(state: int, also: str = "") -> str:
            # One state's range of the list index, walked in id order from
            # ``after``.
            return (
                f"SELECT {_JOB_INFO_COLS} FROM {jobs} "
                f"WHERE queue = $1 AND state = {state} AND id > $2{also} ORDER BY id LIMIT $3"
            )

        self._job_pages = {
            "pending": job_page(STATE_PENDING),
            "ready": job_page(STATE_PENDING, f" AND {claimable('$4')}"),
            "scheduled": job_page(STATE_PENDING, f" AND {hidden('$4')}"),
            "processing": job_page(STATE_PROCESSING),
        }
        self._dead_page = (
            f"SELECT {_DEAD_COLS} FROM {dead} WHERE queue = $1 AND id > $2 ORDER BY id LIMIT $3"
        )
        self._history_page = (
            f"SELECT {_HISTORY_COLS} FROM {history} "
            "WHERE queue = $1 AND outcome = $2 AND id > $3 ORDER BY id LIMIT $4"
        )
        # Throughput: a range of the (queue, time, id) index, which holds
        # every column the count needs, grouped into buckets of the window.
        self._finished_per_bucket = (
            f"SELECT (finished_at - $2::bigint) / $4::bigint, COUNT(*) FROM {history} "
            "WHERE queue = $1 AND finished_at >= $2 AND finished_at < $3 GROUP BY 1"
        )
        self._dead_per_bucket = (
            f"SELECT (died_at - $2::bigint) / $4::bigint, COUNT(*) FROM {dead} "
            "WHERE queue = $1 AND died_at >= $2 AND died_at < $3 GROUP BY 1"
        )
        # Housekeeping: a batch at a time, oldest prune time first, on the
        # prune indexes (the dead one is partial: only letters with a prune
        # time). SKIP LOCKED: concurrent prunes take disjoint batches.
        self._prune_history = (
            f"DELETE FROM {self.history} WHERE id IN (SELECT id FROM {self.history} "
            f"WHERE {prune_due('$1')} ORDER BY prune_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
        )
        self._prune_dead = (
            f"DELETE FROM {dead} WHERE id IN (SELECT id FROM {dead} "
            f"WHERE {prune_due('$1')} ORDER BY prune_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
        )

        # -- streams ---------------------------------------------------------
        # The counter row of the stream is created or bumped, and stays
        # locked until this transaction ends: a second publisher to the same
        # stream waits here until the first commits (or rolls back, and then
        # reuses its offset). So offsets are handed out in commit order, and
        # a reader that has seen offset N can never later find a newly
        # committed event below N (a sequence would hand out numbers at
        # insert time, and two transactions could commit out of order).
        # Publishers of different streams do not contend.
        self._head_offset = f"SELECT last_offset FROM {self.streams} WHERE name = $1"
        self._next_offset = (
            f"INSERT INTO {self.streams} AS s (name, last_offset) VALUES ($1, 1) "
            "ON CONFLICT (name) DO UPDATE SET last_offset = s.last_offset + 1 "
            "RETURNING last_offset"
        )
        self._insert_event = (
            f'INSERT INTO {self.events} (stream, "offset", key, payload, created_at) '
            "VALUES ($1, $2, $3, $4, $5)"
        )
        self._read_since = (
            f"SELECT {_EVENT_COLS} FROM {self.events} "
            'WHERE stream = $1 AND "offset" > $2 ORDER BY "offset" LIMIT $3'
        )
        # A page of events, newest first: the primary key walked backwards.
        self._events_before = (
            f"SELECT {_EVENT_COLS} FROM {self.events} "
            'WHERE stream = $1 AND "offset" < $2 ORDER BY "offset" DESC LIMIT $3'
        )
        # Monotonic: a lower offset than the stored one changes nothing.
        self._save_offset = (
            f'INSERT INTO {self.offsets} AS o (stream, consumer, "offset") VALUES ($1, $2, $3) '
            f"ON CONFLICT (stream, consumer) DO UPDATE SET {keep_higher_offset(row='o')}"
        )
        self._get_offset = (
            f'SELECT "offset" FROM {self.offsets} WHERE stream = $1 AND consumer = $2'
        )
        self._trim = f'DELETE FROM {self.events} WHERE stream = $1 AND "offset" < $2'
        self._stream_names = (
            f"WITH RECURSIVE {_names('logged', self.events, 'stream')}, "
            f"{_names('consumed', self.offsets, 'stream')} "
            f"SELECT name FROM {self.streams} "
            "UNION SELECT name FROM logged WHERE name IS NOT NULL "
            "UNION SELECT name FROM consumed WHERE name IS NOT NULL ORDER BY name"
        )
        self._stream_summary = (
            "SELECT s.last_offset, s.max_age_us, s.max_events, "
            f"(SELECT COUNT(*) FROM {self.events} WHERE stream = $1), "
            'o."offset", o.created_at '
            f"FROM (SELECT 1) AS one LEFT JOIN {self.streams} AS s ON s.name = $1 "
            f'LEFT JOIN LATERAL (SELECT "offset", created_at FROM {self.events} '
            'WHERE stream = $1 ORDER BY "offset" LIMIT 1) AS o ON true'
        )
        self._stream_consumers = (
            f'SELECT consumer, "offset", keep FROM {self.offsets} '
            "WHERE stream = $1 ORDER BY consumer"
        )
        # A stream's retention lives in its counter row, created at offset 0
        # (no event yet) if need be; publishing later continues from it.
        self._set_stream_retention = (
            f"INSERT INTO {self.streams} (name, last_offset, max_age_us, max_events) "
            "VALUES ($1, 0, $2, $3) ON CONFLICT (name) DO UPDATE SET "
            "max_age_us = EXCLUDED.max_age_us, max_events = EXCLUDED.max_events"
        )
        self._protect_consumer = (
            f'INSERT INTO {self.offsets} AS o (stream, consumer, "offset", keep) '
            "VALUES ($1, $2, 0, true) ON CONFLICT (stream, consumer) DO UPDATE SET keep = true "
            "WHERE NOT o.keep"
        )
        self._unprotect_consumer = (
            f"UPDATE {self.offsets} SET keep = false WHERE stream = $1 AND consumer = $2 AND keep"
        )
        # A plain read: the counter rows stay free for publishers.
        self._retained_streams = (
            f"SELECT name, last_offset, max_age_us, max_events FROM {self.streams} "
            "WHERE (max_age_us IS NOT NULL OR max_events IS NOT NULL) AND name > $1 "
            "ORDER BY name LIMIT $2"
        )
        # Walks the primary key from the stream's oldest event: it passes
        # only the events old enough to go.
        self._first_young_event = (
            f'SELECT "offset" FROM {self.events} '
            f'WHERE stream = $1 AND {within_age("$2")} ORDER BY "offset" LIMIT 1'
        )
        # Never past a protected consumer: its saved offset is read in the
        # delete itself, so a protect() that committed before it is obeyed.
        self._prune_events = (
            f'DELETE FROM {self.events} WHERE stream = $1 AND "offset" IN '
            f'(SELECT "offset" FROM {self.events} WHERE stream = $1 AND "offset" <= $2 AND '
            f'"offset" <= COALESCE({protected_floor(self.offsets, "$1")}, "offset") '
            'ORDER BY "offset" LIMIT $3 FOR UPDATE SKIP LOCKED)'
        )

        # -- schedules -------------------------------------------------------
        sched = self.schedules
        # Same expression: keep the pending fire time (re-registration at
        # every process start must not skip or repeat a fire). The paused
        # flag is left as it is: re-registering never resumes a schedule.
        self._upsert_schedule = (
            f"INSERT INTO {sched} AS s (name, queue, expression, payload, options, "
            "next_fire_at, created_at, tz, catch_up, catch_up_max, catch_up_grace_us) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
            "ON CONFLICT (name) DO UPDATE SET queue = EXCLUDED.queue, "
            "payload = EXCLUDED.payload, options = EXCLUDED.options, "
            f"next_fire_at = {keep_fire_time(row='s')}, expression = EXCLUDED.expression, "
            "tz = EXCLUDED.tz, catch_up = EXCLUDED.catch_up, "
            "catch_up_max = EXCLUDED.catch_up_max, catch_up_grace_us = EXCLUDED.catch_up_grace_us"
        )
        self._delete_schedule = f"DELETE FROM {sched} WHERE name = $1"
        # SKIP LOCKED: a row another ticker holds is that ticker's fire; the
        # compare-and-set in advance_schedule stays the guarantee either way.
        self._due_schedules = (
            f"SELECT {column_list(DUE_SCHEDULE_COLUMNS)} FROM {sched} "
            f"WHERE {schedule_due('$1')} ORDER BY next_fire_at LIMIT $2 FOR UPDATE SKIP LOCKED"
        )
        # Compare-and-set on the fire time read by due_schedules: of the
        # tickers that read the same fire time, exactly one moves it (and
        # enqueues its jobs), and records the last fire time it enqueued (if
        # any) as the schedule's last.
        self._advance_schedule = (
            f"UPDATE {sched} SET next_fire_at = $1, "
            "last_fire_at = COALESCE($4::bigint, last_fire_at) "
            f"WHERE name = $2 AND {fire_time_unchanged('$3')}"
        )
        # A paused schedule's fire time, passed or not, is nobody's to sleep until.
        self._next_schedule_time = (
            f"SELECT MIN(next_fire_at) FROM {sched} WHERE {SCHEDULE_RUNNING}"
        )
        self._list_schedules = f"SELECT {_SCHEDULE_COLS} FROM {sched} ORDER BY name"
        # The row lock keeps a ticker or another resume off the row between
        # this read and the resume's write.
        self._schedule_state = (
            f"SELECT expression, tz, next_fire_at, paused FROM {sched} WHERE name = $1 FOR UPDATE"
        )
        self._pause_schedule = f"UPDATE {sched} SET paused = true WHERE name = $1"
        # Compare-and-set on the fire time the resume read: a resume never
        # moves a fire time it did not see.
        self._resume_schedule = (
            f"UPDATE {sched} SET next_fire_at = $1, paused = false "
            f"WHERE name = $2 AND {fire_time_unchanged('$3')}"
        )

        # -- locks -----------------------------------------------------------
        locks = self.locks
        # An acquisition reads the token floor in its statement's snapshot: if
        # a prune that deletes the name's row and raises the floor committed
        # after that snapshot, the insert would find no row and start below
        # the floor. So acquisitions hold a shared advisory lock and prunes an
        # exclusive one, taken in a statement of its own before the rest
        # (the next statement's snapshot is then taken after the other side
        # committed). Fetch.NONE: it rides with the next round trip.
        self._lock_guard = (
            (Statement("SELECT pg_advisory_xact_lock_shared($1::bigint)", (self._lock_key,)),),
            (Statement("SELECT pg_advisory_xact_lock($1::bigint)", (self._lock_key,)),),
        )
        # One statement: take a free or lapsed lock (new token), refresh one we
        # hold (same token), or change nothing and return no row. A conflict
        # whose WHERE is false returns no row (the row is locked until commit,
        # which is harmless in a one-statement transaction). A name with no
        # row (never taken, or pruned) starts above the token floor.
        self._acquire_lock = (
            f"INSERT INTO {locks} AS l (name, owner, token, expires_at) "
            f"VALUES ($1, $2, {new_lock_token(self.meta)}, $3) "
            "ON CONFLICT (name) DO UPDATE SET "
            f"token = {fencing_token('EXCLUDED.owner', '$4', row='l')}, "
            "owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
            f"WHERE {lock_free('$4', row='l')} OR l.owner = EXCLUDED.owner "
            "RETURNING token"
        )
        self._renew_lock = (
            f"UPDATE {locks} SET expires_at = $1 WHERE name = $2 AND {lock_held('$3', '$4', '$5')}"
        )
        # The row stays (owner cleared, the release time in expires_at) so the
        # next token continues the sequence; housekeeping prunes it a grace
        # period later.
        self._release_lock = (
            f"UPDATE {locks} SET owner = NULL, expires_at = $4 "
            f"WHERE name = $1 AND {lock_held('$2', '$3', '$4')}"
        )
        # Held: anything but free, by the rule acquisitions go by.
        self._list_locks = (
            f"SELECT name, owner, token, expires_at, NOT {lock_free('$1')} "
            f"FROM {locks} ORDER BY name"
        )
        # Looked at before the guard, so a store with nothing to prune never
        # makes acquisitions wait.
        self._stale_lock = f"SELECT name FROM {locks} WHERE {lock_free_since('$1')} LIMIT 1"
        # The caller holds the exclusive guard and raises the token floor to
        # the highest token returned, in the same transaction.
        self._prune_locks = (
            f"DELETE FROM {locks} WHERE name IN (SELECT name FROM {locks} "
            f"WHERE {lock_free_since('$1')} ORDER BY expires_at, name LIMIT $2 "
            "FOR UPDATE SKIP LOCKED) RETURNING token"
        )
        self._token_floor = f"SELECT value FROM {self.meta} WHERE key = $1"
        self._set_token_floor = (
            f"INSERT INTO {self.meta} (key, value) VALUES ($1, $2) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )

    # -- wakes ---------------------------------------------------------------
    def notify(self, channel: str, origin: str, now_us: int) -> Statement:
        # ``origin`` and ``now_us`` are SQLite-watcher bookkeeping with no
        # use here: NOTIFY carries the sender's pid.
        return Statement(self._notify, (self.channel_identifier(channel),), wakes=(channel,))

    # Postgres only (the listener's, not the protocol's).
    def channel_identifier(self, channel: str) -> str:
        """The LISTEN/NOTIFY identifier of ``channel`` in this schema (see
        :mod:`.names`: stores in other schemas of the database do not hear it)."""
        return channel_identifier(channel, self._channel_scope)

    def listen(self, channel: str) -> str:
        """``LISTEN`` SQL for ``channel``; no parameters. Run it outside any
        transaction block on the listening connection (inside one it only
        takes effect at commit)."""
        return listen_sql(channel, self._channel_scope)

    def unlisten(self, channel: str) -> str:
        """``UNLISTEN`` SQL for ``channel``; no parameters."""
        return unlisten_sql(channel, self._channel_scope)

    # -- queues --------------------------------------------------------------
    def enqueue(self, job: NewJob, now_us: int) -> Statement:
        params = (
            job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
            now_us, job.expires_at_us,
        )  # fmt: skip
        if job.headers is None:
            return Statement(self._enqueue, params, Fetch.ONE)
        return Statement(self._enqueue_headers, (*params, job.headers), Fetch.ONE)

    def enqueue_many(self, jobs: Sequence[NewJob], now_us: int) -> Statement:
        rows: list[tuple[object, ...]]
        if any(j.headers is not None for j in jobs):
            sql = self._enqueue_many_headers
            rows = [
                (j.queue, j.payload_json, j.priority, j.max_attempts, j.run_at_us,
                 j.expires_at_us, j.headers)
                for j in jobs
            ]  # fmt: skip
        else:
            sql = self._enqueue_many
            rows = [
                (j.queue, j.payload_json, j.priority, j.max_attempts, j.run_at_us,
                 j.expires_at_us)
                for j in jobs
            ]  # fmt: skip
        return Statement(sql, (now_us, orjson.dumps(rows).decode()), Fetch.ALL)

    def enqueue_unique(self, job: NewJob, key: str, now_us: int) -> Statement:
        params = (
            job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
            now_us, job.expires_at_us, job.headers, key,
        )  # fmt: skip
        return Statement(self._enqueue_unique, params, Fetch.ONE)

    def unique_holder(self, queue: str, key: str) -> Statement:
        return Statement(self._unique_holder, (queue, key), Fetch.ONE)

    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        return Statement(self._take_unique_key, (job_id, queue, key), Fetch.ROWCOUNT)

    def unique_acked(self, queue: str, key: str, since_us: int) -> Statement:
        return Statement(self._unique_acked, (queue, key, since_us), Fetch.ONE)

    def set_unique_processing(self, queue: str, blocks: bool) -> Statement:
        return Statement(self._set_unique_processing, (queue, blocks))

    def claim_prelude(self) -> tuple[Statement, ...]:
        return self._claim_prelude

    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        params = (queue, now_us, n, worker, until_us, generation)
        return Statement(self._claim, params, Fetch.ALL)

    def claim_limit(self, queue: str) -> Statement:
        return Statement(self._claim_limit, (queue,), Fetch.ONE)

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
        params: tuple[object, ...] = (queue, now_us, worker, until_us, generation)
        if concurrency is not None:
            params += (concurrency,)
        if key_rate is not None:
            params += (key_rate[1], key_rate[0])
        sql = self._claim_limited[concurrency is not None, key_rate is not None]
        return Statement(sql, params, Fetch.ALL)

    def claim_generation(self) -> Statement:
        return Statement(self._claim_generation, (), Fetch.ONE)

    def set_concurrency_keys(self, pairs: Sequence[tuple[int, str]]) -> Statement:
        return Statement(
            self._set_concurrency_keys, ([p[0] for p in pairs], [p[1] for p in pairs])
        )

    def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        rate: tuple[int, int] | None,
        key_rate: tuple[int, int] | None,
    ) -> Statement:
        return Statement(self._set_limits, (queue, concurrency, *(rate or (None, None)),
                                            *(key_rate or (None, None))))  # fmt: skip

    def queue_limits(self, queue: str) -> Statement:
        return Statement(self._queue_limits, (queue,), Fetch.ONE)

    def claims_in_window(self, queue: str, since_us: int) -> Statement:
        return Statement(self._claims_in_window, (queue, since_us), Fetch.ONE)

    def window_opens(self, queue: str, since_us: int, skip: int) -> Statement:
        return Statement(self._window_opens, (queue, since_us, skip), Fetch.ONE)

    def first_key_claim(self, queue: str, since_us: int) -> Statement:
        return Statement(self._first_key_claim, (queue, since_us), Fetch.ONE)

    def log_queue_claim(self, queue: str, at_us: int) -> Statement:
        return Statement(self._log_queue_claim, (queue, at_us))

    def log_key_claim(self, job_id: int, at_us: int) -> Statement:
        return Statement(self._log_key_claim, (at_us, job_id))

    def prune_claim_log(self, queue: str, before_us: int) -> Statement:
        return Statement(self._prune_claim_log, (queue, before_us))

    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return Statement(self._ack, (job_id, worker, claim, now_us), Fetch.ROWCOUNT)

    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        params = (job_id, worker, claim, now_us, prune_at_us)
        return (Statement(self._ack_history, params, Fetch.ROWCOUNT),)

    def ack_batch(self, queue: str, job_ids: Sequence[int], worker: str, now_us: int) -> Statement:
        # A list is dumped as an int2/int4/int8 array by its largest element;
        # the cast makes it bigint[] whatever psycopg picked ('{}' included).
        return Statement(self._ack_batch, (list(job_ids), queue, worker, now_us), Fetch.ROWCOUNT)

    def ack_batch_history(
        self, queue: str, job_ids: Sequence[int], worker: str, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        params = (list(job_ids), queue, worker, now_us, prune_at_us)
        return (Statement(self._ack_batch_history, params, Fetch.ROWCOUNT),)

    def ack_claims(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int
    ) -> Statement:
        ids = [job_id for job_id, _ in claims]
        numbers = [claim for _, claim in claims]
        return Statement(self._ack_claims, (ids, numbers, worker, now_us), Fetch.ALL)

    def ack_claims_history(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        ids = [job_id for job_id, _ in claims]
        numbers = [claim for _, claim in claims]
        params = (ids, numbers, worker, now_us, prune_at_us)
        return (Statement(self._ack_claims_history, params, Fetch.ALL),)

    def owned(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return Statement(self._owned, (job_id, worker, claim, now_us), Fetch.ONE)

    def next_due(self, queue: str) -> Statement:
        return Statement(self._next_due, (queue,), Fetch.ONE)

    def release_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, refund: int
    ) -> Statement:
        return Statement(
            self._release_claim,
            (now_us, refund, job_id, worker, claim, now_us),
            Fetch.ROWCOUNT,
        )

    def reschedule(self, job_id: int, run_at_us: int, error: str | None) -> Statement:
        return Statement(self._reschedule, (run_at_us, error, job_id))

    def extend_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, until_us: int
    ) -> Statement:
        return Statement(
            self._extend_claim, (until_us, job_id, worker, claim, now_us), Fetch.ROWCOUNT
        )

    def bury(
        self, job_id: int, reason: str, error: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (Statement(self._bury, (job_id, error, reason, now_us), Fetch.ROWCOUNT),)

    def cancel_target(self, queue: str, job_id: int) -> Statement:
        return Statement(self._cancel_target, (job_id, queue), Fetch.ONE)

    def cancel(self, queue: str, job_id: int) -> Statement:
        return Statement(self._cancel, (job_id, queue), Fetch.ROWCOUNT)

    def cancel_history(
        self, queue: str, job_id: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        params = (job_id, queue, now_us, prune_at_us)
        return (Statement(self._cancel_history, params, Fetch.ROWCOUNT),)

    def get_job(self, queue: str | None, job_id: int) -> Statement:
        if queue is None:
            return Statement(self._get_job_any, (job_id,), Fetch.ONE)
        return Statement(self._get_job, (job_id, queue), Fetch.ONE)

    def get_dead(self, queue: str | None, job_id: int) -> Statement:
        if queue is None:
            return Statement(self._get_dead_any, (job_id,), Fetch.ONE)
        return Statement(self._get_dead, (job_id, queue), Fetch.ONE)

    def get_history(self, queue: str | None, job_id: int) -> Statement:
        if queue is None:
            return Statement(self._get_history_any, (job_id,), Fetch.ONE)
        return Statement(self._get_history, (job_id, queue), Fetch.ONE)

    def cancelled_among(self, queue: str, job_ids: Sequence[int]) -> Statement:
        # bigint[] whatever element type psycopg picked for the list (as ack_batch).
        return Statement(self._cancelled_among, (list(job_ids), queue), Fetch.ALL)

    def sweep_candidates(self, queue: str | None, now_us: int, limit: int) -> Statement:
        if queue is None:
            return Statement(self._sweep_all, (now_us, limit), Fetch.ALL)
        return Statement(self._sweep_queue, (now_us, limit, queue), Fetch.ALL)

    def queue_counts(self, queue: str, now_us: int) -> Statement:
        return Statement(self._queue_counts, (now_us, queue), Fetch.ONE)

    def oldest_ready(self, queue: str, now_us: int) -> Statement:
        return Statement(self._oldest_ready, (queue, now_us), Fetch.ONE)

    def set_paused(self, queue: str, paused: bool) -> Statement:
        return Statement(self._set_paused, (queue, paused))

    def queue_paused(self, queue: str) -> Statement:
        return Statement(self._queue_paused, (queue,), Fetch.ONE)

    def set_retention(self, queue: str, history_us: int | None, dead_us: int | None) -> Statement:
        return Statement(self._set_retention, (queue, history_us, dead_us))

    def queue_retention(self, queue: str) -> Statement:
        return Statement(self._queue_retention, (queue,), Fetch.ONE)

    def dead_count(self, queue: str) -> Statement:
        return Statement(self._dead_count, (queue,), Fetch.ONE)

    def dead_letters(self, queue: str, limit: int) -> Statement:
        return Statement(self._dead_letters, (queue, limit), Fetch.ALL)

    def requeue_dead(self, queue: str, job_id: int, now_us: int) -> tuple[Statement, ...]:
        return (Statement(self._requeue_dead, (job_id, queue, now_us), Fetch.ROWCOUNT),)

    def purge_dead(self, queue: str, before_us: int | None) -> Statement:
        if before_us is None:
            return Statement(self._purge_all, (queue,), Fetch.ROWCOUNT)
        return Statement(self._purge_before, (queue, before_us), Fetch.ROWCOUNT)

    def purge_dead_ids(self, queue: str, job_ids: Sequence[int]) -> Statement:
        return Statement(self._purge_ids, (queue, list(job_ids)), Fetch.ROWCOUNT)

    def queue_names(self) -> Statement:
        return Statement(self._queue_names, fetch=Fetch.ALL)

    def queue_summary(self, queue: str, now_us: int) -> Statement:
        return Statement(self._queue_summary, (now_us, queue), Fetch.ONE)

    def job_page(
        self, queue: str, which: str, after: int, limit: int, now_us: int
    ) -> Statement:
        sql = self._job_pages[which]
        params = (queue, after, limit, now_us) if "$4" in sql else (queue, after, limit)
        return Statement(sql, params, Fetch.ALL)

    def dead_page(self, queue: str, after: int, limit: int) -> Statement:
        return Statement(self._dead_page, (queue, after, limit), Fetch.ALL)

    def history_page(self, queue: str, outcome: str, after: int, limit: int) -> Statement:
        return Statement(self._history_page, (queue, outcome, after, limit), Fetch.ALL)

    def finished_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        params = (queue, since_us, until_us, bucket_us)
        return Statement(self._finished_per_bucket, params, Fetch.ALL)

    def dead_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        params = (queue, since_us, until_us, bucket_us)
        return Statement(self._dead_per_bucket, params, Fetch.ALL)

    def prune_history(self, now_us: int, limit: int) -> Statement:
        return Statement(self._prune_history, (now_us, limit), Fetch.ROWCOUNT)

    def prune_dead(self, now_us: int, limit: int) -> Statement:
        return Statement(self._prune_dead, (now_us, limit), Fetch.ROWCOUNT)

    # -- streams -------------------------------------------------------------
    def next_offset(self, stream: str) -> Statement:
        return Statement(self._next_offset, (stream,), Fetch.ONE)

    def head_offset(self, stream: str) -> Statement:
        return Statement(self._head_offset, (stream,), Fetch.ONE)

    def insert_event(
        self, stream: str, offset: int, key: str | None, payload_json: str, now_us: int
    ) -> Statement:
        return Statement(self._insert_event, (stream, offset, key, payload_json, now_us))

    def read_since(self, stream: str, offset: int, limit: int) -> Statement:
        return Statement(self._read_since, (stream, offset, limit), Fetch.ALL)

    def events_before(self, stream: str, offset: int, limit: int) -> Statement:
        return Statement(self._events_before, (stream, offset, limit), Fetch.ALL)

    def save_offset(self, stream: str, consumer: str, offset: int) -> Statement:
        return Statement(self._save_offset, (stream, consumer, offset))

    def get_offset(self, stream: str, consumer: str) -> Statement:
        return Statement(self._get_offset, (stream, consumer), Fetch.ONE)

    def trim(self, stream: str, offset: int) -> Statement:
        return Statement(self._trim, (stream, offset), Fetch.ROWCOUNT)

    def stream_names(self) -> Statement:
        return Statement(self._stream_names, fetch=Fetch.ALL)

    def stream_summary(self, stream: str) -> Statement:
        return Statement(self._stream_summary, (stream,), Fetch.ONE)

    def stream_consumers(self, stream: str) -> Statement:
        return Statement(self._stream_consumers, (stream,), Fetch.ALL)

    def set_stream_retention(
        self, stream: str, max_age_us: int | None, max_events: int | None
    ) -> Statement:
        return Statement(self._set_stream_retention, (stream, max_age_us, max_events))

    def protect_consumer(self, stream: str, consumer: str) -> Statement:
        return Statement(self._protect_consumer, (stream, consumer))

    def unprotect_consumer(self, stream: str, consumer: str) -> Statement:
        return Statement(self._unprotect_consumer, (stream, consumer), Fetch.ROWCOUNT)

    def retained_streams(self, after: str, limit: int) -> Statement:
        return Statement(self._retained_streams, (after, limit), Fetch.ALL)

    def first_young_event(self, stream: str, cutoff_us: int) -> Statement:
        return Statement(self._first_young_event, (stream, cutoff_us), Fetch.ONE)

    def prune_events(self, stream: str, upto: int, limit: int) -> Statement:
        return Statement(self._prune_events, (stream, upto, limit), Fetch.ROWCOUNT)

    # -- schedules -----------------------------------------------------------
    def upsert_schedule(self, schedule: NewSchedule) -> Statement:
        return Statement(self._upsert_schedule, tuple(schedule))

    def delete_schedule(self, name: str) -> Statement:
        return Statement(self._delete_schedule, (name,), Fetch.ROWCOUNT)

    def due_schedules(self, now_us: int, limit: int) -> Statement:
        return Statement(self._due_schedules, (now_us, limit), Fetch.ALL)

    def advance_schedule(
        self, name: str, fire_at_us: int, next_fire_us: int, last_fire_us: int | None
    ) -> Statement:
        return Statement(
            self._advance_schedule, (next_fire_us, name, fire_at_us, last_fire_us), Fetch.ROWCOUNT
        )

    def next_schedule_time(self) -> Statement:
        return Statement(self._next_schedule_time, fetch=Fetch.ONE)

    def list_schedules(self) -> Statement:
        return Statement(self._list_schedules, fetch=Fetch.ALL)

    def schedule_state(self, name: str) -> Statement:
        return Statement(self._schedule_state, (name,), Fetch.ONE)

    def pause_schedule(self, name: str) -> Statement:
        return Statement(self._pause_schedule, (name,), Fetch.ROWCOUNT)

    def resume_schedule(self, name: str, fire_at_us: int, next_fire_us: int) -> Statement:
        return Statement(
            self._resume_schedule, (next_fire_us, name, fire_at_us), Fetch.ROWCOUNT
        )

    # -- locks ---------------------------------------------------------------
    def lock_guard(self, exclusive: bool) -> tuple[Statement, ...]:
        return self._lock_guard[1 if exclusive else 0]

    def acquire_lock(self, name: str, owner: str, now_us: int, until_us: int) -> Statement:
        return Statement(self._acquire_lock, (name, owner, until_us, now_us), Fetch.ONE)

    def renew_lock(
        self, name: str, owner: str, token: int, now_us: int, until_us: int
    ) -> Statement:
        return Statement(self._renew_lock, (until_us, name, owner, token, now_us), Fetch.ROWCOUNT)

    def release_lock(self, name: str, owner: str, token: int, now_us: int) -> Statement:
        return Statement(self._release_lock, (name, owner, token, now_us), Fetch.ROWCOUNT)

    def list_locks(self, now_us: int) -> Statement:
        return Statement(self._list_locks, (now_us,), Fetch.ALL)

    def stale_lock(self, cutoff_us: int) -> Statement:
        return Statement(self._stale_lock, (cutoff_us,), Fetch.ONE)

    def prune_locks(self, cutoff_us: int, limit: int) -> Statement:
        return Statement(self._prune_locks, (cutoff_us, limit), Fetch.ALL)

    def token_floor(self) -> Statement:
        return Statement(self._token_floor, (TOKEN_FLOOR_KEY,), Fetch.ONE)

    def set_token_floor(self, token: int) -> Statement:
        return Statement(self._set_token_floor, (TOKEN_FLOOR_KEY, str(token)))


if TYPE_CHECKING:
    # mypy proves the class satisfies the protocol, signatures included.
    _conforms: Dialect = PostgresDialect()
