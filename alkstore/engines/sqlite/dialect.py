"""SQL text of every step on SQLite (3.35+ for RETURNING).

Statements use ``?`` placeholders, bound in the order they appear. Names are
always bound parameters, never spliced into SQL, so any string is a distinct
name and nothing needs quoting.

Layout (the same as :mod:`alkstore.engines.postgres.dialect`, so the two read
side by side): the column lists, then the SQL text of every statement, then
the ``Dialect`` methods that bind it; both halves in the order of
:class:`alkstore.protocol.dialect.Dialect` (wakes, queues, streams,
schedules, locks). The semantic rules (claimable, owned, lock held or free,
...) are not written here: each is a fragment of :mod:`.rules`, used by
every statement that needs it. A ``?`` a fragment adds is bound where the
fragment stands in the text.
"""

from __future__ import annotations

from collections.abc import Sequence

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

# -- wakes -------------------------------------------------------------------
# Wakes for other processes go through a table that their watchers poll.
_NOTIFY = "INSERT INTO __alkstore_notifications (channel, origin, created_at) VALUES (?, ?, ?)"
_NOTIFICATIONS_SINCE = (
    "SELECT id, channel, origin FROM __alkstore_notifications WHERE id > ? ORDER BY id LIMIT ?"
)
_LAST_NOTIFICATION_ID = "SELECT COALESCE(MAX(id), 0) FROM __alkstore_notifications"
# Rows older than the retention, oldest first, a batch at a time (the age
# index): see docs/wakes.md for why no live watcher still needs them.
_PRUNE_NOTIFICATIONS = (
    "DELETE FROM __alkstore_notifications WHERE id IN (SELECT id FROM "
    "__alkstore_notifications INDEXED BY __alkstore_notifications_age "
    "WHERE created_at < ? ORDER BY created_at LIMIT ?)"
)

# -- queues ------------------------------------------------------------------
# Jobs without headers (the usual case: nothing instrumented) leave the
# column out: binding a NULL per job cost about 0.3 us, 15% of a batch
# insert's time here.
_ENQUEUE = (
    "INSERT INTO __alkstore_jobs (queue, payload, priority, max_attempts, run_at, "
    "created_at, expires_at, visible_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
_ENQUEUE_HEADERS = (
    "INSERT INTO __alkstore_jobs (queue, payload, priority, max_attempts, run_at, "
    "created_at, expires_at, visible_at, headers) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "RETURNING id"
)
# Followed by one row of placeholders per job, then RETURNING id.
_ENQUEUE_MANY = (
    "INSERT INTO __alkstore_jobs (queue, payload, priority, max_attempts, run_at, "
    "created_at, expires_at, visible_at) VALUES"
)
_ENQUEUE_MANY_ROW = "(?, ?, ?, ?, ?, ?, ?, ?)"
_ENQUEUE_MANY_HEADERS = (
    "INSERT INTO __alkstore_jobs (queue, payload, priority, max_attempts, run_at, "
    "created_at, expires_at, visible_at, headers) VALUES"
)
_ENQUEUE_MANY_HEADERS_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
# A unique enqueue: the insert skips a key some live job holds (the unique
# index jobs_unique is the arbiter); its row is the new id, or none.
_ENQUEUE_UNIQUE = (
    "INSERT INTO __alkstore_jobs (queue, payload, priority, max_attempts, run_at, "
    "created_at, expires_at, visible_at, headers, unique_key, unique_slot) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    f"ON CONFLICT (queue, unique_slot) WHERE {UNIQUE_HELD} DO NOTHING RETURNING id"
)
_UNIQUE_HOLDER = (
    "SELECT id, state FROM __alkstore_jobs INDEXED BY __alkstore_jobs_unique "
    f"WHERE queue = ? AND unique_slot = ? AND {UNIQUE_HELD}"
)
_TAKE_UNIQUE_KEY = (
    "UPDATE __alkstore_jobs SET unique_slot = NULL "
    f"WHERE id = ? AND queue = ? AND unique_slot = ? AND state = {STATE_PROCESSING} "
    f"AND {unique_yields_when_processing('__alkstore_queues', '?')}"
)
_UNIQUE_ACKED = (
    "SELECT id FROM __alkstore_history INDEXED BY __alkstore_history_unique "
    f"WHERE {unique_recently_acked('?', '?', '?')} ORDER BY finished_at DESC LIMIT 1"
)
_SET_UNIQUE_PROCESSING = (
    "INSERT INTO __alkstore_queues (name, unique_processing) VALUES (?, ?) "
    "ON CONFLICT (name) DO UPDATE SET unique_processing = excluded.unique_processing"
)
# The claim names its index (INDEXED BY): nothing to set first.
_CLAIM_PRELUDE: tuple[Statement, ...] = ()
# Claim = pick and update in one statement; SQLite's single writer means no
# other claim runs between the pick and the update. Reclaim of lapsed claims
# is the same predicate: a processing job whose visible_at passed, with
# attempts left, is claimable again. Each row carries its queue's history
# retention, so the ack knows whether to keep the job (no round trip of its own).
_CLAIM = f"""UPDATE __alkstore_jobs
    SET state = {STATE_PROCESSING}, attempts = attempts + 1, claims = claims + 1,
        claimed_by = ?, run_at = visible_at, visible_at = ?
    WHERE id IN (
        SELECT id FROM __alkstore_jobs INDEXED BY __alkstore_jobs_claim
        WHERE queue = {queue_claims_unlimited('__alkstore_queues', '?')}
            AND {claim_rules_known('__alkstore_meta', '?')} AND {claimable('?')}
        ORDER BY {CLAIM_ORDER}
        LIMIT ?)
    RETURNING {_JOB_COLS}, {history_retention('__alkstore_queues', '?')}"""
# A limited queue (rules.queue_claims_unlimited closed the claim above): its
# limit, then one job per statement, the first in claim order whose key has
# room (rules.key_has_room counts the key's live claims in jobs_keyed). The
# write transaction is the lock: no other claim runs until it commits, and
# each statement sees the claims made before it in this one.
_CLAIM_LIMIT = queue_limit("__alkstore_queues", "?")


def _claim_limited(concurrency: bool, key_rate: bool) -> str:
    """The limited claim's text, checking the key's concurrency room and/or
    its rate (a queue with only a queue-wide rate checks neither: the core
    counts that rate once and asks for no more than its room)."""
    rules = ""
    if concurrency:
        rules += f" AND {key_has_room('__alkstore_jobs', '?', '?', '?', row='c')}"
    if key_rate:
        rules += f" AND {key_under_rate('__alkstore_claim_log', '?', '?', '?', row='c')}"
    return f"""UPDATE __alkstore_jobs
    SET state = {STATE_PROCESSING}, attempts = attempts + 1, claims = claims + 1,
        claimed_by = ?, run_at = visible_at, visible_at = ?
    WHERE id = (
        SELECT c.id FROM __alkstore_jobs AS c INDEXED BY __alkstore_jobs_claim
        WHERE c.queue = ? AND {claimable('?')} AND {queue_running('__alkstore_queues', '?')}
            AND {claim_rules_known('__alkstore_meta', '?')}{rules}
        ORDER BY {CLAIM_ORDER}
        LIMIT 1)
    RETURNING {_JOB_COLS}, {history_retention('__alkstore_queues', '?')}"""


_CLAIM_LIMITED = {
    (concurrency, key_rate): _claim_limited(concurrency, key_rate)
    for concurrency in (False, True)
    for key_rate in (False, True)
}
_CLAIM_GENERATION = f"SELECT value FROM __alkstore_meta WHERE key = '{GENERATION_KEY}'"
_SET_CONCURRENCY_KEYS = (
    "UPDATE __alkstore_jobs SET concurrency_key = k.value ->> 1 "
    "FROM json_each(?) AS k WHERE __alkstore_jobs.id = k.value ->> 0"
)
_SET_LIMITS = (
    "INSERT INTO __alkstore_queues (name, concurrency_limit, rate_limit, rate_period_us, "
    "key_rate_limit, key_rate_period_us) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET concurrency_limit = excluded.concurrency_limit, "
    "rate_limit = excluded.rate_limit, rate_period_us = excluded.rate_period_us, "
    "key_rate_limit = excluded.key_rate_limit, key_rate_period_us = excluded.key_rate_period_us"
)
_QUEUE_LIMITS = f"SELECT {LIMIT_COLUMNS} FROM __alkstore_queues WHERE name = ?"
_CLAIMS_IN_WINDOW = (
    "SELECT count(*) FROM __alkstore_claim_log INDEXED BY __alkstore_claim_log_window "
    f"WHERE queue = ? AND key = {QUEUE_WIDE} AND {in_window('?')}"
)
_WINDOW_OPENS = (
    "SELECT at FROM __alkstore_claim_log INDEXED BY __alkstore_claim_log_window "
    f"WHERE queue = ? AND key = {QUEUE_WIDE} AND {in_window('?')} ORDER BY at LIMIT 1 OFFSET ?"
)
_FIRST_KEY_CLAIM = (
    "SELECT min(at) FROM __alkstore_claim_log INDEXED BY __alkstore_claim_log_age "
    f"WHERE queue = ? AND {in_window('?')} AND key <> {QUEUE_WIDE}"
)
_LOG_QUEUE_CLAIM = f"INSERT INTO __alkstore_claim_log (queue, key, at) VALUES (?, {QUEUE_WIDE}, ?)"
_LOG_KEY_CLAIM = (
    "INSERT INTO __alkstore_claim_log (queue, key, at) "
    "SELECT queue, concurrency_key, ? FROM __alkstore_jobs "
    "WHERE id = ? AND concurrency_key IS NOT NULL"
)
_PRUNE_CLAIM_LOG = (
    "DELETE FROM __alkstore_claim_log INDEXED BY __alkstore_claim_log_age "
    "WHERE queue = ? AND at <= ?"
)
_ACK = f"DELETE FROM __alkstore_jobs WHERE id = ? AND {owned('?', '?', '?')}"


def _to_history(outcome: str, where: str, returning: str = "") -> str:
    """Copy the live rows ``where`` selects into history; the statement that
    deletes them follows in the same transaction, selecting the same rows
    (the write lock is held throughout). Binds: finished_at, prune_at, then
    ``where``'s."""
    return (
        f"INSERT INTO __alkstore_history ({_HISTORY_INSERT_COLS}) "
        f"SELECT id, queue, '{outcome}', payload, priority, attempts, max_attempts, run_at, "
        "created_at, ?, claimed_by, last_error, headers, ?, unique_key, concurrency_key "
        f"FROM __alkstore_jobs WHERE {where}{returning}"
    )


_ACK_HISTORY = _to_history("acked", f"id = ? AND {owned('?', '?', '?')}")
# The batch form has ids but no claim numbers: the worker's live claim.
_ACK_BATCH = (
    "DELETE FROM __alkstore_jobs WHERE id IN (SELECT value FROM json_each(?)) "
    f"AND queue = ? AND {owned('?', None, '?')}"
)
_ACK_BATCH_HISTORY = _to_history(
    "acked",
    f"id IN (SELECT value FROM json_each(?)) AND queue = ? AND {owned('?', None, '?')}",
)
# The (id, claim number) pairs are matched by the row-value IN.
_OWNED_CLAIMS = (
    "(id, claims) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?)) "
    f"AND {owned('?', None, '?')}"
)
_ACK_CLAIMS_DELETE = f"DELETE FROM __alkstore_jobs WHERE {_OWNED_CLAIMS}"
_ACK_CLAIMS = f"{_ACK_CLAIMS_DELETE} RETURNING id"
# An INSERT's rows come back as the statement is stepped, so the ids are
# read from the copy; the delete that follows returns nothing (unread
# RETURNING rows would leave it half done).
_ACK_CLAIMS_HISTORY = _to_history("acked", _OWNED_CLAIMS, " RETURNING id")
# retry and fail read the row, decide, then write, all under the write lock.
_OWNED = (
    f"SELECT attempts, max_attempts FROM __alkstore_jobs WHERE id = ? AND {owned('?', '?', '?')}"
)
_NEXT_DUE = (
    "SELECT MIN(visible_at) FROM __alkstore_jobs INDEXED BY __alkstore_jobs_due "
    f"WHERE queue = ? AND {ATTEMPTS_LEFT}"
)
_RELEASE_CLAIM = (
    f"UPDATE __alkstore_jobs SET state = {STATE_PENDING}, claimed_by = NULL, "
    "run_at = ?, visible_at = ?, attempts = attempts - ? "
    f"WHERE id = ? AND {owned('?', '?', '?')}"
)
_RESCHEDULE = (
    f"UPDATE __alkstore_jobs SET state = {STATE_PENDING}, claimed_by = NULL, "
    "run_at = ?, visible_at = ?, last_error = COALESCE(?, last_error) WHERE id = ?"
)
_EXTEND_CLAIM = (
    f"UPDATE __alkstore_jobs SET visible_at = ? WHERE id = ? AND {owned('?', '?', '?')}"
)
# Two statements move the row: copy it into the dead table (with a prune
# time if its queue has a dead retention, and its concurrency key, which a
# requeue restores), delete it.
_BURY_COPY = (
    f"INSERT INTO __alkstore_dead ({_DEAD_COLS}, claims, headers, prune_at) "
    "SELECT id, queue, payload, priority, attempts, max_attempts, run_at, "
    "created_at, expires_at, claimed_by, COALESCE(?, last_error), ?, ?, concurrency_key, "
    "claims, headers, "
    f"{dead_prune_at('?', '__alkstore_queues', '__alkstore_jobs.queue')} "
    "FROM __alkstore_jobs WHERE id = ?"
)
_BURY_DELETE = "DELETE FROM __alkstore_jobs WHERE id = ?"
# The single writer holds the job from this read to the delete.
_CANCEL_TARGET = "SELECT state FROM __alkstore_jobs WHERE id = ? AND queue = ?"
_CANCEL = "DELETE FROM __alkstore_jobs WHERE id = ? AND queue = ?"
_CANCEL_HISTORY = _to_history("cancelled", "id = ? AND queue = ?")
_GET_JOB = f"SELECT {_JOB_INFO_COLS} FROM __alkstore_jobs WHERE id = ? AND queue = ?"
_GET_JOB_ANY = f"SELECT {_JOB_INFO_COLS} FROM __alkstore_jobs WHERE id = ?"
_GET_DEAD = f"SELECT {_DEAD_COLS} FROM __alkstore_dead WHERE id = ? AND queue = ?"
_GET_DEAD_ANY = f"SELECT {_DEAD_COLS} FROM __alkstore_dead WHERE id = ?"
_GET_HISTORY = f"SELECT {_HISTORY_COLS} FROM __alkstore_history WHERE id = ? AND queue = ?"
_GET_HISTORY_ANY = f"SELECT {_HISTORY_COLS} FROM __alkstore_history WHERE id = ?"
# A worker's cancel check: every id it holds in one statement, each looked
# up by primary key in the three tables (a job is in one of them at most).
_CANCELLED_AMONG = (
    "SELECT ids.value FROM json_each(?) AS ids "
    "WHERE NOT EXISTS (SELECT 1 FROM __alkstore_jobs WHERE id = ids.value AND queue = ?) "
    "AND NOT EXISTS (SELECT 1 FROM __alkstore_dead WHERE id = ids.value AND queue = ?) "
    "AND NOT EXISTS (SELECT 1 FROM __alkstore_history WHERE id = ids.value AND queue = ? "
    "AND outcome <> 'cancelled')"
)


def _sweep(scope: str) -> str:
    # Two index probes: deadlines that passed, and lapsed claims with no
    # attempts left. The core decides per row what, if anything, to do.
    # Live claims are left out of the first probe: they are never buried,
    # and a page full of them would hide the rows behind them from the
    # sweep (the core drives it page by page until a page moves few rows).
    return (
        f"SELECT {_SWEEP_COLS} "
        f"FROM __alkstore_jobs INDEXED BY __alkstore_jobs_expiry "
        f"WHERE {sweep_expired('?')}{scope} "
        f"UNION "
        f"SELECT {_SWEEP_COLS} "
        f"FROM __alkstore_jobs INDEXED BY __alkstore_jobs_exhausted "
        f"WHERE {sweep_exhausted('?')}{scope} "
        f"ORDER BY id LIMIT ?"
    )


_SWEEP_ALL = _sweep("")
_SWEEP_QUEUE = _sweep(" AND queue = ?")
_QUEUE_COUNTS = (
    f"SELECT "
    # ready: claimable right now (a job the next sweep will bury is
    # counted nowhere until it is dead).
    f"COALESCE(SUM(state = {STATE_PENDING} AND {claimable('?')}), 0), "
    f"COALESCE(SUM(state = {STATE_PENDING} AND {hidden('?')}), 0), "
    f"COALESCE(SUM(state = {STATE_PROCESSING}), 0) "
    f"FROM __alkstore_jobs WHERE queue = ?"
)
# The ready job that became due first: the due index walked in visible_at
# order, stopping at the first ready row.
_OLDEST_READY = (
    "SELECT visible_at FROM __alkstore_jobs INDEXED BY __alkstore_jobs_due "
    f"WHERE queue = ? AND state = {STATE_PENDING} AND {claimable('?')} "
    "ORDER BY visible_at LIMIT 1"
)
_SET_PAUSED = (
    "INSERT INTO __alkstore_queues (name, paused) VALUES (?, ?) "
    "ON CONFLICT (name) DO UPDATE SET paused = excluded.paused"
)
_QUEUE_PAUSED = "SELECT paused FROM __alkstore_queues WHERE name = ?"
_SET_RETENTION = (
    "INSERT INTO __alkstore_queues (name, history_us, dead_us) VALUES (?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET history_us = excluded.history_us, "
    "dead_us = excluded.dead_us"
)
_QUEUE_RETENTION = "SELECT history_us, dead_us FROM __alkstore_queues WHERE name = ?"
_DEAD_COUNT = "SELECT COUNT(*) FROM __alkstore_dead WHERE queue = ?"
_DEAD_LETTERS = (
    f"SELECT {_DEAD_COLS} FROM __alkstore_dead WHERE queue = ? ORDER BY died_at, id LIMIT ?"
)
# Two statements: the dead row comes back under its own id (AUTOINCREMENT
# never hands that id out again) and with its concurrency key (so a limited
# queue still limits it), then leaves the dead table. The first one's row
# count says whether the job moved.
_REQUEUE_COPY = (
    "INSERT INTO __alkstore_jobs (id, queue, payload, priority, attempts, "
    "max_attempts, run_at, created_at, expires_at, visible_at, state, last_error, "
    "claims, headers, concurrency_key) "
    f"SELECT id, queue, payload, priority, 0, max_attempts, ?, created_at, NULL, ?, "
    f"{STATE_PENDING}, last_error, claims, headers, concurrency_key FROM __alkstore_dead "
    "WHERE id = ? AND queue = ?"
)
_REQUEUE_DELETE = "DELETE FROM __alkstore_dead WHERE id = ? AND queue = ?"
_PURGE_ALL = "DELETE FROM __alkstore_dead WHERE queue = ?"
_PURGE_BEFORE = "DELETE FROM __alkstore_dead WHERE queue = ? AND died_at < ?"
_PURGE_IDS = (
    "DELETE FROM __alkstore_dead WHERE queue = ? AND id IN (SELECT value FROM json_each(?))"
)
# Housekeeping: a batch at a time, oldest prune time first, on the prune
# indexes (the dead one is partial: only letters with a prune time).
_PRUNE_HISTORY = (
    "DELETE FROM __alkstore_history WHERE id IN (SELECT id FROM __alkstore_history "
    f"INDEXED BY __alkstore_history_prune WHERE {prune_due('?')} ORDER BY prune_at LIMIT ?)"
)
_PRUNE_DEAD = (
    "DELETE FROM __alkstore_dead WHERE id IN (SELECT id FROM __alkstore_dead "
    f"INDEXED BY __alkstore_dead_prune WHERE {prune_due('?')} ORDER BY prune_at LIMIT ?)"
)


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


_QUEUE_NAMES = (
    f"WITH RECURSIVE {_names('live', '__alkstore_jobs', 'queue')}, "
    f"{_names('buried', '__alkstore_dead', 'queue')}, "
    f"{_names('finished', '__alkstore_history', 'queue')} "
    "SELECT name FROM live WHERE name IS NOT NULL "
    "UNION SELECT name FROM buried WHERE name IS NOT NULL "
    "UNION SELECT name FROM finished WHERE name IS NOT NULL "
    "UNION SELECT name FROM __alkstore_queues ORDER BY name"
)
# The counts are queue_counts' (the same rules), in one pass over the
# queue's live jobs; dead letters and history are counted on their indexes.
_QUEUE_SUMMARY = (
    "SELECT c.ready, c.scheduled, c.processing, c.oldest, "
    "(SELECT COUNT(*) FROM __alkstore_dead WHERE queue = ?), "
    "(SELECT COUNT(*) FROM __alkstore_history WHERE queue = ?), "
    "q.paused, q.history_us, q.dead_us, q.concurrency_limit, q.rate_limit, q.rate_period_us, "
    "q.key_rate_limit, q.key_rate_period_us, q.unique_processing "
    "FROM (SELECT "
    f"COALESCE(SUM(state = {STATE_PENDING} AND {claimable('?')}), 0) AS ready, "
    f"COALESCE(SUM(state = {STATE_PENDING} AND {hidden('?')}), 0) AS scheduled, "
    f"COALESCE(SUM(state = {STATE_PROCESSING}), 0) AS processing, "
    f"MIN(CASE WHEN state = {STATE_PENDING} AND {claimable('?')} THEN run_at END) AS oldest "
    "FROM __alkstore_jobs WHERE queue = ?) AS c "
    "LEFT JOIN __alkstore_queues AS q ON q.name = ?"
)


def _job_page(state: int, also: str = "") -> str:
    # One state's range of the list index, walked in id order from ``after``.
    return (
        f"SELECT {_JOB_INFO_COLS} FROM __alkstore_jobs INDEXED BY __alkstore_jobs_list "
        f"WHERE queue = ? AND state = {state} AND id > ?{also} ORDER BY id LIMIT ?"
    )


_JOB_PAGES = {
    "pending": _job_page(STATE_PENDING),
    "ready": _job_page(STATE_PENDING, f" AND {claimable('?')}"),
    "scheduled": _job_page(STATE_PENDING, f" AND {hidden('?')}"),
    "processing": _job_page(STATE_PROCESSING),
}
# Binds of each page's rule after (queue, after): the now(s) it compares with.
_JOB_PAGE_NOWS = {"pending": 0, "ready": 2, "scheduled": 1, "processing": 0}
_DEAD_PAGE = (
    f"SELECT {_DEAD_COLS} FROM __alkstore_dead INDEXED BY __alkstore_dead_list "
    "WHERE queue = ? AND id > ? ORDER BY id LIMIT ?"
)
_HISTORY_PAGE = (
    f"SELECT {_HISTORY_COLS} FROM __alkstore_history INDEXED BY __alkstore_history_list "
    "WHERE queue = ? AND outcome = ? AND id > ? ORDER BY id LIMIT ?"
)
# Throughput: a range of the (queue, time) index, which holds every column
# the count needs, grouped into buckets of the window.
_FINISHED_PER_BUCKET = (
    "SELECT (finished_at - ?) / ?, COUNT(*) FROM __alkstore_history "
    "INDEXED BY __alkstore_history_queue "
    "WHERE queue = ? AND finished_at >= ? AND finished_at < ? GROUP BY 1"
)
_DEAD_PER_BUCKET = (
    "SELECT (died_at - ?) / ?, COUNT(*) FROM __alkstore_dead INDEXED BY __alkstore_dead_queue "
    "WHERE queue = ? AND died_at >= ? AND died_at < ? GROUP BY 1"
)

# -- streams -----------------------------------------------------------------
# The per-stream counter row serialises publishers of one stream (SQLite has
# one writer anyway), so offsets are dense and assigned in commit order.
_HEAD_OFFSET = "SELECT last_offset FROM __alkstore_streams WHERE name = ?"
_NEXT_OFFSET = (
    "INSERT INTO __alkstore_streams (name, last_offset) VALUES (?, 1) "
    "ON CONFLICT (name) DO UPDATE SET last_offset = last_offset + 1 "
    "RETURNING last_offset"
)
_INSERT_EVENT = (
    'INSERT INTO __alkstore_events (stream, "offset", key, payload, created_at) '
    "VALUES (?, ?, ?, ?, ?)"
)
_READ_SINCE = (
    f"SELECT {_EVENT_COLS} FROM __alkstore_events "
    'WHERE stream = ? AND "offset" > ? ORDER BY "offset" LIMIT ?'
)
# Monotonic: a lower offset than the stored one changes nothing.
# A page of events, newest first: the primary key walked backwards.
_EVENTS_BEFORE = (
    f"SELECT {_EVENT_COLS} FROM __alkstore_events "
    'WHERE stream = ? AND "offset" < ? ORDER BY "offset" DESC LIMIT ?'
)
_SAVE_OFFSET = (
    'INSERT INTO __alkstore_offsets (stream, consumer, "offset") VALUES (?, ?, ?) '
    f"ON CONFLICT (stream, consumer) DO UPDATE SET {keep_higher_offset()}"
)
_GET_OFFSET = 'SELECT "offset" FROM __alkstore_offsets WHERE stream = ? AND consumer = ?'
_TRIM = 'DELETE FROM __alkstore_events WHERE stream = ? AND "offset" < ?'
_STREAM_NAMES = (
    f"WITH RECURSIVE {_names('logged', '__alkstore_events', 'stream')}, "
    f"{_names('consumed', '__alkstore_offsets', 'stream')} "
    "SELECT name FROM __alkstore_streams "
    "UNION SELECT name FROM logged WHERE name IS NOT NULL "
    "UNION SELECT name FROM consumed WHERE name IS NOT NULL ORDER BY name"
)
_STREAM_SUMMARY = (
    "SELECT s.last_offset, s.max_age_us, s.max_events, "
    "(SELECT COUNT(*) FROM __alkstore_events WHERE stream = ?), "
    'o."offset", o.created_at '
    "FROM (SELECT 1) AS one "
    "LEFT JOIN __alkstore_streams AS s ON s.name = ? "
    'LEFT JOIN (SELECT "offset", created_at FROM __alkstore_events WHERE stream = ? '
    'ORDER BY "offset" LIMIT 1) AS o ON 1'
)
_STREAM_CONSUMERS = (
    'SELECT consumer, "offset", keep FROM __alkstore_offsets WHERE stream = ? ORDER BY consumer'
)
# A stream's retention lives in its counter row, created at offset 0 (no
# event yet) if need be; publishing later continues from it.
_SET_STREAM_RETENTION = (
    "INSERT INTO __alkstore_streams (name, last_offset, max_age_us, max_events) "
    "VALUES (?, 0, ?, ?) ON CONFLICT (name) DO UPDATE SET "
    "max_age_us = excluded.max_age_us, max_events = excluded.max_events"
)
_PROTECT_CONSUMER = (
    'INSERT INTO __alkstore_offsets (stream, consumer, "offset", keep) VALUES (?, ?, 0, 1) '
    "ON CONFLICT (stream, consumer) DO UPDATE SET keep = 1"
)
_UNPROTECT_CONSUMER = (
    "UPDATE __alkstore_offsets SET keep = 0 WHERE stream = ? AND consumer = ? AND keep"
)
_RETAINED_STREAMS = (
    "SELECT name, last_offset, max_age_us, max_events FROM __alkstore_streams "
    "WHERE (max_age_us IS NOT NULL OR max_events IS NOT NULL) AND name > ? "
    "ORDER BY name LIMIT ?"
)
# Walks the primary key from the stream's oldest event: it passes only the
# events old enough to go.
_FIRST_YOUNG_EVENT = (
    'SELECT "offset" FROM __alkstore_events '
    f'WHERE stream = ? AND {within_age("?")} ORDER BY "offset" LIMIT 1'
)
# Never past a protected consumer: its saved offset is read in the delete
# itself, so a protect() that committed before it is always obeyed.
_PRUNE_EVENTS = (
    'DELETE FROM __alkstore_events WHERE stream = ? AND "offset" IN '
    '(SELECT "offset" FROM __alkstore_events WHERE stream = ? AND "offset" <= ? AND '
    '"offset" <= COALESCE(' + protected_floor("__alkstore_offsets", "?") + ', "offset") '
    'ORDER BY "offset" LIMIT ?)'
)

# -- schedules ---------------------------------------------------------------
# Same expression: keep the pending fire time (re-registration at every
# process start must not skip or repeat a fire). The paused flag is left as
# it is: re-registering never resumes a schedule.
_UPSERT_SCHEDULE = (
    "INSERT INTO __alkstore_schedules (name, queue, expression, payload, options, "
    "next_fire_at, created_at, tz, catch_up, catch_up_max, catch_up_grace_us) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, "
    "payload = excluded.payload, options = excluded.options, "
    f"next_fire_at = {keep_fire_time()}, expression = excluded.expression, "
    "tz = excluded.tz, catch_up = excluded.catch_up, "
    "catch_up_max = excluded.catch_up_max, catch_up_grace_us = excluded.catch_up_grace_us"
)
_DELETE_SCHEDULE = "DELETE FROM __alkstore_schedules WHERE name = ?"
_DUE_SCHEDULES = (
    f"SELECT {column_list(DUE_SCHEDULE_COLUMNS)} "
    f"FROM __alkstore_schedules WHERE {schedule_due('?')} ORDER BY next_fire_at LIMIT ?"
)
# Compare-and-set on the fire time read by due_schedules: of the tickers
# that read the same fire time, exactly one moves it (and enqueues its job),
# and records the last fire time it enqueued (if any) as the schedule's last.
_ADVANCE_SCHEDULE = (
    "UPDATE __alkstore_schedules SET next_fire_at = ?, "
    "last_fire_at = COALESCE(?, last_fire_at) "
    f"WHERE name = ? AND {fire_time_unchanged('?')}"
)
# A paused schedule's fire time, passed or not, is nobody's to sleep until.
_NEXT_SCHEDULE_TIME = (
    f"SELECT MIN(next_fire_at) FROM __alkstore_schedules WHERE {SCHEDULE_RUNNING}"
)
_LIST_SCHEDULES = f"SELECT {_SCHEDULE_COLS} FROM __alkstore_schedules ORDER BY name"
_SCHEDULE_STATE = (
    "SELECT expression, tz, next_fire_at, paused FROM __alkstore_schedules WHERE name = ?"
)
_PAUSE_SCHEDULE = "UPDATE __alkstore_schedules SET paused = 1 WHERE name = ?"
# Compare-and-set on the fire time the resume read: a resume never moves a
# fire time it did not see.
_RESUME_SCHEDULE = (
    "UPDATE __alkstore_schedules SET next_fire_at = ?, paused = 0 "
    f"WHERE name = ? AND {fire_time_unchanged('?')}"
)

# -- locks -------------------------------------------------------------------
# The single writer keeps an acquisition from reading the token floor while a
# prune raises it: nothing to take first.
_LOCK_GUARD: tuple[Statement, ...] = ()
# One statement: take a free or lapsed lock (new token), refresh one we hold
# (same token), or change nothing and return no row. A name with no row
# (never taken, or pruned) starts above the token floor.
_ACQUIRE_LOCK = (
    "INSERT INTO __alkstore_locks (name, owner, token, expires_at) "
    f"VALUES (?, ?, {new_lock_token('__alkstore_meta')}, ?) "
    "ON CONFLICT (name) DO UPDATE SET "
    f"token = {fencing_token('excluded.owner', '?')}, "
    "owner = excluded.owner, expires_at = excluded.expires_at "
    f"WHERE {lock_free('?')} OR owner = excluded.owner "
    "RETURNING token"
)
_RENEW_LOCK = (
    f"UPDATE __alkstore_locks SET expires_at = ? WHERE name = ? AND {lock_held('?', '?', '?')}"
)
# The row stays (owner cleared, the release time in expires_at) so the next
# token continues the sequence; housekeeping prunes it a grace period later.
_RELEASE_LOCK = (
    "UPDATE __alkstore_locks SET owner = NULL, expires_at = ? "
    f"WHERE name = ? AND {lock_held('?', '?', '?')}"
)
# Held: anything but free, by the rule acquisitions go by.
_LIST_LOCKS = (
    f"SELECT name, owner, token, expires_at, NOT {lock_free('?')} "
    "FROM __alkstore_locks ORDER BY name"
)
_STALE_LOCK = (
    "SELECT name FROM __alkstore_locks INDEXED BY __alkstore_locks_expiry "
    f"WHERE {lock_free_since('?')} LIMIT 1"
)
# The caller raises the token floor to the highest token returned, in the
# same transaction.
_PRUNE_LOCKS = (
    "DELETE FROM __alkstore_locks WHERE name IN (SELECT name FROM __alkstore_locks "
    f"INDEXED BY __alkstore_locks_expiry WHERE {lock_free_since('?')} "
    "ORDER BY expires_at, name LIMIT ?) RETURNING token"
)
_TOKEN_FLOOR = "SELECT value FROM __alkstore_meta WHERE key = ?"
_SET_TOKEN_FLOOR = (
    "INSERT INTO __alkstore_meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


class SqliteDialect:
    """Statement builders for SQLite. Pure: every method only builds a
    ``Statement``."""

    name = "sqlite"
    # Wakes carry no payload and SQLite has no NOTIFY: no limit to check.
    notify_payload_limit: int | None = None

    # -- wakes ---------------------------------------------------------------
    def notify(self, channel: str, origin: str, now_us: int) -> Statement:
        return Statement(_NOTIFY, (channel, origin, now_us), wakes=(channel,))

    def notifications_since(self, after_id: int, limit: int) -> Statement:
        return Statement(_NOTIFICATIONS_SINCE, (after_id, limit), Fetch.ALL)

    def last_notification_id(self) -> Statement:
        return Statement(_LAST_NOTIFICATION_ID, fetch=Fetch.ONE)

    def prune_notifications(self, before_us: int, limit: int) -> Statement:
        return Statement(_PRUNE_NOTIFICATIONS, (before_us, limit), Fetch.ROWCOUNT)

    # -- queues --------------------------------------------------------------
    def enqueue(self, job: NewJob, now_us: int) -> Statement:
        params = (
            job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
            now_us, job.expires_at_us, job.run_at_us,
        )  # fmt: skip
        if job.headers is None:
            return Statement(_ENQUEUE, params, Fetch.ONE)
        return Statement(_ENQUEUE_HEADERS, (*params, job.headers), Fetch.ONE)

    def enqueue_many(self, jobs: Sequence[NewJob], now_us: int) -> Statement:
        params: list[object] = []
        if any(job.headers is not None for job in jobs):
            insert, row = _ENQUEUE_MANY_HEADERS, _ENQUEUE_MANY_HEADERS_ROW
            for job in jobs:
                params += (
                    job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
                    now_us, job.expires_at_us, job.run_at_us, job.headers,
                )  # fmt: skip
        else:
            insert, row = _ENQUEUE_MANY, _ENQUEUE_MANY_ROW
            for job in jobs:
                params += (
                    job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
                    now_us, job.expires_at_us, job.run_at_us,
                )  # fmt: skip
        rows = ", ".join([row] * len(jobs))
        return Statement(f"{insert} {rows} RETURNING id", tuple(params), Fetch.ALL)

    def enqueue_unique(self, job: NewJob, key: str, now_us: int) -> Statement:
        params = (
            job.queue, job.payload_json, job.priority, job.max_attempts, job.run_at_us,
            now_us, job.expires_at_us, job.run_at_us, job.headers, key, key,
        )  # fmt: skip
        return Statement(_ENQUEUE_UNIQUE, params, Fetch.ONE)

    def unique_holder(self, queue: str, key: str) -> Statement:
        return Statement(_UNIQUE_HOLDER, (queue, key), Fetch.ONE)

    def take_unique_key(self, queue: str, key: str, job_id: int) -> Statement:
        return Statement(_TAKE_UNIQUE_KEY, (job_id, queue, key, queue), Fetch.ROWCOUNT)

    def unique_acked(self, queue: str, key: str, since_us: int) -> Statement:
        return Statement(_UNIQUE_ACKED, (queue, key, since_us), Fetch.ONE)

    def set_unique_processing(self, queue: str, blocks: bool) -> Statement:
        return Statement(_SET_UNIQUE_PROCESSING, (queue, int(blocks)))

    def claim_prelude(self) -> tuple[Statement, ...]:
        return _CLAIM_PRELUDE

    def claim(
        self, queue: str, worker: str, n: int, now_us: int, until_us: int, generation: int
    ) -> Statement:
        params = (worker, until_us, queue, queue, generation, now_us, now_us, n, queue)
        return Statement(_CLAIM, params, Fetch.ALL)

    def claim_limit(self, queue: str) -> Statement:
        return Statement(_CLAIM_LIMIT, (queue,), Fetch.ONE)

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
        params: list[object] = [worker, until_us, queue, now_us, now_us, queue, generation]
        if concurrency is not None:
            params += (queue, now_us, concurrency)
        if key_rate is not None:
            params += (queue, key_rate[1], key_rate[0])
        params.append(queue)
        sql = _CLAIM_LIMITED[concurrency is not None, key_rate is not None]
        return Statement(sql, tuple(params), Fetch.ALL)

    def claim_generation(self) -> Statement:
        return Statement(_CLAIM_GENERATION, (), Fetch.ONE)

    def set_concurrency_keys(self, pairs: Sequence[tuple[int, str]]) -> Statement:
        return Statement(_SET_CONCURRENCY_KEYS, (orjson.dumps(list(pairs)).decode(),))

    def set_limits(
        self,
        queue: str,
        concurrency: int | None,
        rate: tuple[int, int] | None,
        key_rate: tuple[int, int] | None,
    ) -> Statement:
        return Statement(_SET_LIMITS, (queue, concurrency, *(rate or (None, None)),
                                       *(key_rate or (None, None))))  # fmt: skip

    def queue_limits(self, queue: str) -> Statement:
        return Statement(_QUEUE_LIMITS, (queue,), Fetch.ONE)

    def claims_in_window(self, queue: str, since_us: int) -> Statement:
        return Statement(_CLAIMS_IN_WINDOW, (queue, since_us), Fetch.ONE)

    def window_opens(self, queue: str, since_us: int, skip: int) -> Statement:
        return Statement(_WINDOW_OPENS, (queue, since_us, skip), Fetch.ONE)

    def first_key_claim(self, queue: str, since_us: int) -> Statement:
        return Statement(_FIRST_KEY_CLAIM, (queue, since_us), Fetch.ONE)

    def log_queue_claim(self, queue: str, at_us: int) -> Statement:
        return Statement(_LOG_QUEUE_CLAIM, (queue, at_us))

    def log_key_claim(self, job_id: int, at_us: int) -> Statement:
        return Statement(_LOG_KEY_CLAIM, (at_us, job_id))

    def prune_claim_log(self, queue: str, before_us: int) -> Statement:
        return Statement(_PRUNE_CLAIM_LOG, (queue, before_us))

    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return Statement(_ACK, (job_id, worker, claim, now_us), Fetch.ROWCOUNT)

    def ack_history(
        self, job_id: int, worker: str, claim: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        owner = (job_id, worker, claim, now_us)
        return (
            Statement(_ACK_HISTORY, (now_us, prune_at_us, *owner), Fetch.ROWCOUNT),
            Statement(_ACK, owner),
        )

    def ack_batch(self, queue: str, job_ids: Sequence[int], worker: str, now_us: int) -> Statement:
        ids = orjson.dumps(list(job_ids)).decode()
        return Statement(_ACK_BATCH, (ids, queue, worker, now_us), Fetch.ROWCOUNT)

    def ack_batch_history(
        self, queue: str, job_ids: Sequence[int], worker: str, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        params = (orjson.dumps(list(job_ids)).decode(), queue, worker, now_us)
        return (
            Statement(_ACK_BATCH_HISTORY, (now_us, prune_at_us, *params), Fetch.ROWCOUNT),
            Statement(_ACK_BATCH, params),
        )

    def ack_claims(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int
    ) -> Statement:
        pairs = orjson.dumps(list(claims)).decode()
        return Statement(_ACK_CLAIMS, (pairs, worker, now_us), Fetch.ALL)

    def ack_claims_history(
        self, worker: str, claims: Sequence[tuple[int, int]], now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        params = (orjson.dumps(list(claims)).decode(), worker, now_us)
        return (
            Statement(_ACK_CLAIMS_HISTORY, (now_us, prune_at_us, *params), Fetch.ALL),
            Statement(_ACK_CLAIMS_DELETE, params),
        )

    def owned(self, job_id: int, worker: str, claim: int, now_us: int) -> Statement:
        return Statement(_OWNED, (job_id, worker, claim, now_us), Fetch.ONE)

    def next_due(self, queue: str) -> Statement:
        return Statement(_NEXT_DUE, (queue,), Fetch.ONE)

    def release_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, refund: int
    ) -> Statement:
        return Statement(
            _RELEASE_CLAIM,
            (now_us, now_us, refund, job_id, worker, claim, now_us),
            Fetch.ROWCOUNT,
        )

    def reschedule(self, job_id: int, run_at_us: int, error: str | None) -> Statement:
        return Statement(_RESCHEDULE, (run_at_us, run_at_us, error, job_id))

    def extend_claim(
        self, job_id: int, worker: str, claim: int, now_us: int, until_us: int
    ) -> Statement:
        return Statement(_EXTEND_CLAIM, (until_us, job_id, worker, claim, now_us), Fetch.ROWCOUNT)

    def bury(
        self, job_id: int, reason: str, error: str | None, now_us: int
    ) -> tuple[Statement, ...]:
        return (
            Statement(_BURY_COPY, (error, reason, now_us, now_us, job_id), Fetch.ROWCOUNT),
            Statement(_BURY_DELETE, (job_id,), Fetch.ROWCOUNT),
        )

    def cancel_target(self, queue: str, job_id: int) -> Statement:
        return Statement(_CANCEL_TARGET, (job_id, queue), Fetch.ONE)

    def cancel(self, queue: str, job_id: int) -> Statement:
        return Statement(_CANCEL, (job_id, queue), Fetch.ROWCOUNT)

    def cancel_history(
        self, queue: str, job_id: int, now_us: int, prune_at_us: int
    ) -> tuple[Statement, ...]:
        return (
            Statement(_CANCEL_HISTORY, (now_us, prune_at_us, job_id, queue), Fetch.ROWCOUNT),
            Statement(_CANCEL, (job_id, queue)),
        )

    def get_job(self, queue: str | None, job_id: int) -> Statement:
        if queue is None:
            return Statement(_GET_JOB_ANY, (job_id,), Fetch.ONE)
        return Statement(_GET_JOB, (job_id, queue), Fetch.ONE)

    def get_dead(self, queue: str | None, job_id: int) -> Statement:
        if queue is None:
            return Statement(_GET_DEAD_ANY, (job_id,), Fetch.ONE)
        return Statement(_GET_DEAD, (job_id, queue), Fetch.ONE)

    def get_history(self, queue: str | None, job_id: int) -> Statement:
        if queue is None:
            return Statement(_GET_HISTORY_ANY, (job_id,), Fetch.ONE)
        return Statement(_GET_HISTORY, (job_id, queue), Fetch.ONE)

    def cancelled_among(self, queue: str, job_ids: Sequence[int]) -> Statement:
        ids = orjson.dumps(list(job_ids)).decode()
        return Statement(_CANCELLED_AMONG, (ids, queue, queue, queue), Fetch.ALL)

    def sweep_candidates(self, queue: str | None, now_us: int, limit: int) -> Statement:
        if queue is None:
            return Statement(_SWEEP_ALL, (now_us, now_us, now_us, limit), Fetch.ALL)
        return Statement(
            _SWEEP_QUEUE, (now_us, now_us, queue, now_us, queue, limit), Fetch.ALL
        )

    def queue_counts(self, queue: str, now_us: int) -> Statement:
        return Statement(_QUEUE_COUNTS, (now_us, now_us, now_us, queue), Fetch.ONE)

    def oldest_ready(self, queue: str, now_us: int) -> Statement:
        return Statement(_OLDEST_READY, (queue, now_us, now_us), Fetch.ONE)

    def set_paused(self, queue: str, paused: bool) -> Statement:
        return Statement(_SET_PAUSED, (queue, int(paused)))

    def queue_paused(self, queue: str) -> Statement:
        return Statement(_QUEUE_PAUSED, (queue,), Fetch.ONE)

    def set_retention(self, queue: str, history_us: int | None, dead_us: int | None) -> Statement:
        return Statement(_SET_RETENTION, (queue, history_us, dead_us))

    def queue_retention(self, queue: str) -> Statement:
        return Statement(_QUEUE_RETENTION, (queue,), Fetch.ONE)

    def dead_count(self, queue: str) -> Statement:
        return Statement(_DEAD_COUNT, (queue,), Fetch.ONE)

    def dead_letters(self, queue: str, limit: int) -> Statement:
        return Statement(_DEAD_LETTERS, (queue, limit), Fetch.ALL)

    def requeue_dead(self, queue: str, job_id: int, now_us: int) -> tuple[Statement, ...]:
        return (
            Statement(_REQUEUE_COPY, (now_us, now_us, job_id, queue), Fetch.ROWCOUNT),
            Statement(_REQUEUE_DELETE, (job_id, queue), Fetch.ROWCOUNT),
        )

    def purge_dead(self, queue: str, before_us: int | None) -> Statement:
        if before_us is None:
            return Statement(_PURGE_ALL, (queue,), Fetch.ROWCOUNT)
        return Statement(_PURGE_BEFORE, (queue, before_us), Fetch.ROWCOUNT)

    def purge_dead_ids(self, queue: str, job_ids: Sequence[int]) -> Statement:
        ids = orjson.dumps(list(job_ids)).decode()
        return Statement(_PURGE_IDS, (queue, ids), Fetch.ROWCOUNT)

    def queue_names(self) -> Statement:
        return Statement(_QUEUE_NAMES, fetch=Fetch.ALL)

    def queue_summary(self, queue: str, now_us: int) -> Statement:
        params = (queue, queue, now_us, now_us, now_us, now_us, now_us, queue, queue)
        return Statement(_QUEUE_SUMMARY, params, Fetch.ONE)

    def job_page(
        self, queue: str, which: str, after: int, limit: int, now_us: int
    ) -> Statement:
        nows = (now_us,) * _JOB_PAGE_NOWS[which]
        return Statement(_JOB_PAGES[which], (queue, after, *nows, limit), Fetch.ALL)

    def dead_page(self, queue: str, after: int, limit: int) -> Statement:
        return Statement(_DEAD_PAGE, (queue, after, limit), Fetch.ALL)

    def history_page(self, queue: str, outcome: str, after: int, limit: int) -> Statement:
        return Statement(_HISTORY_PAGE, (queue, outcome, after, limit), Fetch.ALL)

    def finished_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        params = (since_us, bucket_us, queue, since_us, until_us)
        return Statement(_FINISHED_PER_BUCKET, params, Fetch.ALL)

    def dead_per_bucket(
        self, queue: str, since_us: int, until_us: int, bucket_us: int
    ) -> Statement:
        params = (since_us, bucket_us, queue, since_us, until_us)
        return Statement(_DEAD_PER_BUCKET, params, Fetch.ALL)

    def prune_history(self, now_us: int, limit: int) -> Statement:
        return Statement(_PRUNE_HISTORY, (now_us, limit), Fetch.ROWCOUNT)

    def prune_dead(self, now_us: int, limit: int) -> Statement:
        return Statement(_PRUNE_DEAD, (now_us, limit), Fetch.ROWCOUNT)

    # -- streams -------------------------------------------------------------
    def next_offset(self, stream: str) -> Statement:
        return Statement(_NEXT_OFFSET, (stream,), Fetch.ONE)

    def head_offset(self, stream: str) -> Statement:
        return Statement(_HEAD_OFFSET, (stream,), Fetch.ONE)

    def insert_event(
        self, stream: str, offset: int, key: str | None, payload_json: str, now_us: int
    ) -> Statement:
        return Statement(_INSERT_EVENT, (stream, offset, key, payload_json, now_us))

    def read_since(self, stream: str, offset: int, limit: int) -> Statement:
        return Statement(_READ_SINCE, (stream, offset, limit), Fetch.ALL)

    def events_before(self, stream: str, offset: int, limit: int) -> Statement:
        return Statement(_EVENTS_BEFORE, (stream, offset, limit), Fetch.ALL)

    def save_offset(self, stream: str, consumer: str, offset: int) -> Statement:
        return Statement(_SAVE_OFFSET, (stream, consumer, offset))

    def get_offset(self, stream: str, consumer: str) -> Statement:
        return Statement(_GET_OFFSET, (stream, consumer), Fetch.ONE)

    def trim(self, stream: str, offset: int) -> Statement:
        return Statement(_TRIM, (stream, offset), Fetch.ROWCOUNT)

    def stream_names(self) -> Statement:
        return Statement(_STREAM_NAMES, fetch=Fetch.ALL)

    def stream_summary(self, stream: str) -> Statement:
        return Statement(_STREAM_SUMMARY, (stream, stream, stream), Fetch.ONE)

    def stream_consumers(self, stream: str) -> Statement:
        return Statement(_STREAM_CONSUMERS, (stream,), Fetch.ALL)

    def set_stream_retention(
        self, stream: str, max_age_us: int | None, max_events: int | None
    ) -> Statement:
        return Statement(_SET_STREAM_RETENTION, (stream, max_age_us, max_events))

    def protect_consumer(self, stream: str, consumer: str) -> Statement:
        return Statement(_PROTECT_CONSUMER, (stream, consumer))

    def unprotect_consumer(self, stream: str, consumer: str) -> Statement:
        return Statement(_UNPROTECT_CONSUMER, (stream, consumer), Fetch.ROWCOUNT)

    def retained_streams(self, after: str, limit: int) -> Statement:
        return Statement(_RETAINED_STREAMS, (after, limit), Fetch.ALL)

    def first_young_event(self, stream: str, cutoff_us: int) -> Statement:
        return Statement(_FIRST_YOUNG_EVENT, (stream, cutoff_us), Fetch.ONE)

    def prune_events(self, stream: str, upto: int, limit: int) -> Statement:
        return Statement(_PRUNE_EVENTS, (stream, stream, upto, stream, limit), Fetch.ROWCOUNT)

    # -- schedules -----------------------------------------------------------
    def upsert_schedule(self, schedule: NewSchedule) -> Statement:
        return Statement(_UPSERT_SCHEDULE, tuple(schedule))

    def delete_schedule(self, name: str) -> Statement:
        return Statement(_DELETE_SCHEDULE, (name,), Fetch.ROWCOUNT)

    def due_schedules(self, now_us: int, limit: int) -> Statement:
        return Statement(_DUE_SCHEDULES, (now_us, limit), Fetch.ALL)

    def advance_schedule(
        self, name: str, fire_at_us: int, next_fire_us: int, last_fire_us: int | None
    ) -> Statement:
        params = (next_fire_us, last_fire_us, name, fire_at_us)
        return Statement(_ADVANCE_SCHEDULE, params, Fetch.ROWCOUNT)

    def next_schedule_time(self) -> Statement:
        return Statement(_NEXT_SCHEDULE_TIME, fetch=Fetch.ONE)

    def list_schedules(self) -> Statement:
        return Statement(_LIST_SCHEDULES, fetch=Fetch.ALL)

    def schedule_state(self, name: str) -> Statement:
        return Statement(_SCHEDULE_STATE, (name,), Fetch.ONE)

    def pause_schedule(self, name: str) -> Statement:
        return Statement(_PAUSE_SCHEDULE, (name,), Fetch.ROWCOUNT)

    def resume_schedule(self, name: str, fire_at_us: int, next_fire_us: int) -> Statement:
        return Statement(_RESUME_SCHEDULE, (next_fire_us, name, fire_at_us), Fetch.ROWCOUNT)

    # -- locks ---------------------------------------------------------------
    def lock_guard(self, exclusive: bool) -> tuple[Statement, ...]:
        return _LOCK_GUARD

    def acquire_lock(self, name: str, owner: str, now_us: int, until_us: int) -> Statement:
        return Statement(_ACQUIRE_LOCK, (name, owner, until_us, now_us, now_us), Fetch.ONE)

    def renew_lock(
        self, name: str, owner: str, token: int, now_us: int, until_us: int
    ) -> Statement:
        return Statement(_RENEW_LOCK, (until_us, name, owner, token, now_us), Fetch.ROWCOUNT)

    def release_lock(self, name: str, owner: str, token: int, now_us: int) -> Statement:
        return Statement(_RELEASE_LOCK, (now_us, name, owner, token, now_us), Fetch.ROWCOUNT)

    def list_locks(self, now_us: int) -> Statement:
        return Statement(_LIST_LOCKS, (now_us,), Fetch.ALL)

    def stale_lock(self, cutoff_us: int) -> Statement:
        return Statement(_STALE_LOCK, (cutoff_us,), Fetch.ONE)

    def prune_locks(self, cutoff_us: int, limit: int) -> Statement:
        return Statement(_PRUNE_LOCKS, (cutoff_us, limit), Fetch.ALL)

    def token_floor(self) -> Statement:
        return Statement(_TOKEN_FLOOR, (TOKEN_FLOOR_KEY,), Fetch.ONE)

    def set_token_floor(self, token: int) -> Statement:
        return Statement(_SET_TOKEN_FLOOR, (TOKEN_FLOOR_KEY, str(token)))
