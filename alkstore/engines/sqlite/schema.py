"""SQLite schema and versioned migrations.

Every table carries the ``__alkstore_`` prefix so it can share a file with the
application's own tables. Live jobs and dead letters live in separate tables:
the claim index only ever covers work that can still run.
"""

from __future__ import annotations

from ...protocol import rows
from ...protocol.plan import Fetch, Plan, Statement, fetch_one, fetch_row, reads
from ...protocol.values import generation
from ..rules import Rules

# Applied on every connection, before anything else. WAL lets readers run
# beside the single writer; NORMAL sync in WAL mode is durable across process
# crashes (an OS crash can lose the last transactions, see docs/engines.md).
PRAGMAS = {
    "journal_mode": "WAL",
    "synchronous": "NORMAL",
    "foreign_keys": "OFF",
    "temp_store": "MEMORY",
}

_V1 = (
    """CREATE TABLE IF NOT EXISTS __alkstore_jobs (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        queue         TEXT    NOT NULL,
        payload       TEXT    NOT NULL,
        priority      INTEGER NOT NULL,
        attempts      INTEGER NOT NULL DEFAULT 0,
        max_attempts  INTEGER NOT NULL,
        run_at        INTEGER NOT NULL,
        created_at    INTEGER NOT NULL,
        expires_at    INTEGER,
        claimed_by    TEXT,
        visible_at    INTEGER NOT NULL,
        state         INTEGER NOT NULL DEFAULT 0,
        last_error    TEXT,
        claims        INTEGER NOT NULL DEFAULT 0
    )""",
    # The claim path. Partial: a job whose claim lapsed with no attempts left
    # can never be claimed again, so it drops out of the index and claims
    # never walk over it while it waits for the sweep.
    f"""CREATE INDEX IF NOT EXISTS __alkstore_jobs_claim
        ON __alkstore_jobs (queue, {Rules.CLAIM_ORDER})
        WHERE {Rules.ATTEMPTS_LEFT}""",
    # When the next job of a queue becomes due, so an idle worker sleeps
    # exactly until then instead of polling.
    f"""CREATE INDEX IF NOT EXISTS __alkstore_jobs_due
        ON __alkstore_jobs (queue, visible_at) WHERE {Rules.ATTEMPTS_LEFT}""",
    # The sweep's two probes: deadlines, and lapsed claims with nothing left.
    f"""CREATE INDEX IF NOT EXISTS __alkstore_jobs_expiry
        ON __alkstore_jobs (expires_at) WHERE {Rules.HAS_DEADLINE}""",
    f"""CREATE INDEX IF NOT EXISTS __alkstore_jobs_exhausted
        ON __alkstore_jobs (visible_at) WHERE {Rules.EXHAUSTED}""",
    """CREATE TABLE IF NOT EXISTS __alkstore_dead (
        id            INTEGER PRIMARY KEY,
        queue         TEXT    NOT NULL,
        payload       TEXT    NOT NULL,
        priority      INTEGER NOT NULL,
        attempts      INTEGER NOT NULL,
        max_attempts  INTEGER NOT NULL,
        run_at        INTEGER NOT NULL,
        created_at    INTEGER NOT NULL,
        expires_at    INTEGER,
        claimed_by    TEXT,
        last_error    TEXT,
        reason        TEXT    NOT NULL,
        died_at       INTEGER NOT NULL,
        claims        INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_dead_queue
        ON __alkstore_dead (queue, died_at)""",
    """CREATE TABLE IF NOT EXISTS __alkstore_streams (
        name        TEXT PRIMARY KEY,
        last_offset INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS __alkstore_events (
        stream     TEXT    NOT NULL,
        "offset"   INTEGER NOT NULL,
        key        TEXT,
        payload    TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (stream, "offset")
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS __alkstore_offsets (
        stream   TEXT    NOT NULL,
        consumer TEXT    NOT NULL,
        "offset" INTEGER NOT NULL,
        PRIMARY KEY (stream, consumer)
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS __alkstore_locks (
        name       TEXT PRIMARY KEY,
        owner      TEXT,
        token      INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS __alkstore_notifications (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        channel    TEXT    NOT NULL,
        origin     TEXT    NOT NULL,
        created_at INTEGER NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_notifications_age
        ON __alkstore_notifications (created_at)""",
    """CREATE TABLE IF NOT EXISTS __alkstore_schedules (
        name         TEXT PRIMARY KEY,
        queue        TEXT    NOT NULL,
        expression   TEXT    NOT NULL,
        payload      TEXT    NOT NULL,
        options      TEXT    NOT NULL,
        next_fire_at INTEGER NOT NULL,
        created_at   INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS __alkstore_schedules_due
        ON __alkstore_schedules (next_fire_at)""",
)

# Version 2: a row per queue that has been paused (or resumed); claims skip
# the queues whose row says paused (rules.queue_running).
_V2: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS __alkstore_queues (
        name   TEXT PRIMARY KEY,
        paused INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
)

# Version 3: operations. Job metadata (``headers``: JSON the library keeps
# beside the user's payload, such as the enqueuing code's trace context);
# finished jobs kept for a retention window (``history``, one row per acked
# or cancelled job of a queue that keeps history); dead letters with a prune
# time; per-stream retention settings and consumers that hold events back
# from retention (``keep``); per-queue retention of history and dead letters;
# schedules' last fire time and pause flag; the indexes the inspection reads
# walk.
_V3: tuple[str, ...] = (
    "ALTER TABLE __alkstore_jobs ADD COLUMN headers TEXT",
    "ALTER TABLE __alkstore_dead ADD COLUMN headers TEXT",
    "ALTER TABLE __alkstore_dead ADD COLUMN prune_at INTEGER",
    """CREATE INDEX IF NOT EXISTS __alkstore_dead_prune
        ON __alkstore_dead (prune_at) WHERE prune_at IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS __alkstore_history (
        id            INTEGER PRIMARY KEY,
        queue         TEXT    NOT NULL,
        outcome       TEXT    NOT NULL,
        payload       TEXT    NOT NULL,
        priority      INTEGER NOT NULL,
        attempts      INTEGER NOT NULL,
        max_attempts  INTEGER NOT NULL,
        run_at        INTEGER NOT NULL,
        created_at    INTEGER NOT NULL,
        finished_at   INTEGER NOT NULL,
        worker        TEXT,
        last_error    TEXT,
        headers       TEXT,
        prune_at      INTEGER NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_history_queue
        ON __alkstore_history (queue, finished_at)""",
    """CREATE INDEX IF NOT EXISTS __alkstore_history_prune
        ON __alkstore_history (prune_at)""",
    "ALTER TABLE __alkstore_streams ADD COLUMN max_age_us INTEGER",
    "ALTER TABLE __alkstore_streams ADD COLUMN max_events INTEGER",
    "ALTER TABLE __alkstore_offsets ADD COLUMN keep INTEGER NOT NULL DEFAULT 0",
    # Per-queue retention: how long finished jobs stay in history (NULL:
    # not kept) and dead letters in the dead table (NULL: until purged).
    "ALTER TABLE __alkstore_queues ADD COLUMN history_us INTEGER",
    "ALTER TABLE __alkstore_queues ADD COLUMN dead_us INTEGER",
    # Schedules: when one last fired, and whether it is paused.
    "ALTER TABLE __alkstore_schedules ADD COLUMN last_fire_at INTEGER",
    "ALTER TABLE __alkstore_schedules ADD COLUMN paused INTEGER NOT NULL DEFAULT 0",
    # Inspection: a queue's jobs page by id within one state (and a list of
    # every state merges one page of each), and the queue names are found by
    # stepping from one name to the next in these indexes, never by reading
    # the tables whole. A claim changes a job's state, so it moves the job's
    # entry here; ids and queue names never change.
    """CREATE INDEX IF NOT EXISTS __alkstore_jobs_list
        ON __alkstore_jobs (queue, state, id)""",
    """CREATE INDEX IF NOT EXISTS __alkstore_dead_list
        ON __alkstore_dead (queue, id)""",
    """CREATE INDEX IF NOT EXISTS __alkstore_history_list
        ON __alkstore_history (queue, outcome, id)""",
    # Housekeeping finds lock rows nobody has held for a while (released or
    # lapsed long ago) without scanning the table (rules.lock_free_since).
    """CREATE INDEX IF NOT EXISTS __alkstore_locks_expiry
        ON __alkstore_locks (expires_at)""",
)

# Version 4: flow control (issue #12). Each feature keeps its statements
# in one block of its own.
_V4: tuple[str, ...] = (
    # v4, unique jobs: a job's unique key (``unique_key``, kept for history
    # and inspection) and the slot it holds (``unique_slot``: the key while
    # the job holds it, NULL once it gave it up). The unique partial index
    # on the slot is what makes two live jobs of a queue never hold one key,
    # whichever processes enqueue; acked jobs kept in history keep their key
    # for ``unique_for`` (the history index finds the newest); a queue's
    # ``unique_processing`` (NULL or 1: a processing job keeps its key; 0: a
    # new enqueue takes the key from a processing job).
    "ALTER TABLE __alkstore_jobs ADD COLUMN unique_key TEXT",
    "ALTER TABLE __alkstore_jobs ADD COLUMN unique_slot TEXT",
    f"""CREATE UNIQUE INDEX IF NOT EXISTS __alkstore_jobs_unique
        ON __alkstore_jobs (queue, unique_slot) WHERE {Rules.UNIQUE_HELD}""",
    "ALTER TABLE __alkstore_history ADD COLUMN unique_key TEXT",
    """CREATE INDEX IF NOT EXISTS __alkstore_history_unique
        ON __alkstore_history (queue, unique_key, finished_at) WHERE unique_key IS NOT NULL""",
    "ALTER TABLE __alkstore_queues ADD COLUMN unique_processing INTEGER",
    # v4, time-zoned schedules and catch-up policies: the IANA zone a cron
    # expression is read in, and which missed fire times get a job
    # ("latest", "all" with at most catch_up_max per tick, "skip" with a
    # grace in microseconds). Existing schedules keep what they did: UTC,
    # one job for a missed window.
    "ALTER TABLE __alkstore_schedules ADD COLUMN tz TEXT NOT NULL DEFAULT 'UTC'",
    "ALTER TABLE __alkstore_schedules ADD COLUMN catch_up TEXT NOT NULL DEFAULT 'latest'",
    "ALTER TABLE __alkstore_schedules ADD COLUMN catch_up_max INTEGER",
    "ALTER TABLE __alkstore_schedules ADD COLUMN catch_up_grace_us INTEGER",
    # v4, per-key concurrency limits: a job's concurrency key (NULL: not
    # limited), a queue's limit (NULL: none, the plain claim), and the index
    # the limited claim counts a key's live claims with (processing keyed
    # jobs only, so it stays as small as what runs). Dead letters and
    # history keep the key too: inspection shows it, and a requeued dead
    # letter comes back with it, still limited (without it, requeue_dead
    # would hand back a job that runs unlimited).
    "ALTER TABLE __alkstore_jobs ADD COLUMN concurrency_key TEXT",
    "ALTER TABLE __alkstore_dead ADD COLUMN concurrency_key TEXT",
    "ALTER TABLE __alkstore_history ADD COLUMN concurrency_key TEXT",
    "ALTER TABLE __alkstore_queues ADD COLUMN concurrency_limit INTEGER",
    f"""CREATE INDEX IF NOT EXISTS __alkstore_jobs_keyed
        ON __alkstore_jobs (queue, concurrency_key, visible_at) WHERE {Rules.KEYED_PROCESSING}""",
    # v4, rate limits: a queue's rate (``rate_limit`` claims per
    # ``rate_period_us``) and per-key rate, and the claim log they are
    # counted in: one row per claim of a rate-limited queue (``key`` is the
    # job's concurrency key, or '' for the queue's own rate), kept for one
    # period. The first index counts a key's window; the second lets a
    # claim prune what fell out of the window without walking the live part.
    "ALTER TABLE __alkstore_queues ADD COLUMN rate_limit INTEGER",
    "ALTER TABLE __alkstore_queues ADD COLUMN rate_period_us INTEGER",
    "ALTER TABLE __alkstore_queues ADD COLUMN key_rate_limit INTEGER",
    "ALTER TABLE __alkstore_queues ADD COLUMN key_rate_period_us INTEGER",
    """CREATE TABLE IF NOT EXISTS __alkstore_claim_log (
        queue TEXT    NOT NULL,
        key   TEXT    NOT NULL,
        at    INTEGER NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_claim_log_window
        ON __alkstore_claim_log (queue, key, at)""",
    """CREATE INDEX IF NOT EXISTS __alkstore_claim_log_age
        ON __alkstore_claim_log (queue, at)""",
)

_V5 = (
    # v5: notification rows are pruned in id order (ids follow commit order
    # and so, within a clock's skew, age), so the age index goes: it was one
    # page more for every notify to write, a sixth of a single enqueue's
    # commit.
    "DROP INDEX IF EXISTS __alkstore_notifications_age",
)

_V6 = (
    # v6, workflows (issue #26; docs/workflows.md). A job whose dependencies
    # have not all finished waits here, not in jobs, so claims, their
    # indexes and the sweep never see it; it moves into jobs, under the id
    # it was given at enqueue (taken from jobs' AUTOINCREMENT sequence),
    # when its last dependency finishes (``remaining`` counts those not
    # finished). ``on_failure``: 0, a dependency that dies or is cancelled
    # cancels it; 1, it runs anyway.
    """CREATE TABLE IF NOT EXISTS __alkstore_waiting (
        id              INTEGER PRIMARY KEY,
        queue           TEXT    NOT NULL,
        payload         TEXT    NOT NULL,
        priority        INTEGER NOT NULL,
        max_attempts    INTEGER NOT NULL,
        run_at          INTEGER NOT NULL,
        created_at      INTEGER NOT NULL,
        expires_at      INTEGER,
        headers         TEXT,
        concurrency_key TEXT,
        remaining       INTEGER NOT NULL,
        on_failure      INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_waiting_list ON __alkstore_waiting (queue, id)""",
    # One row per dependency: job ``job_id`` waits for job ``dep_id``,
    # ``done`` once the dependency's finish was counted (once, whatever
    # happens to the job after). The key finds a job's dependents; the
    # index, its dependencies.
    """CREATE TABLE IF NOT EXISTS __alkstore_deps (
        dep_id INTEGER NOT NULL,
        job_id INTEGER NOT NULL,
        done   INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (dep_id, job_id)
    ) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS __alkstore_deps_job ON __alkstore_deps (job_id, dep_id)""",
    # A live job whose finish must be recorded in history (for the results
    # retention at least) and may release or cancel others: one with
    # dependents or dependencies, or one a caller awaits.
    "ALTER TABLE __alkstore_jobs ADD COLUMN keep INTEGER NOT NULL DEFAULT 0",
    # The handler's return value (JSON), kept with the finished job.
    "ALTER TABLE __alkstore_history ADD COLUMN result TEXT",
    # How long a queue keeps results and the finished jobs of a dependency
    # graph (NULL: a day).
    "ALTER TABLE __alkstore_queues ADD COLUMN results_us INTEGER",
    """CREATE TABLE IF NOT EXISTS __alkstore_workflows (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        name       TEXT    NOT NULL,
        created_at INTEGER NOT NULL
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_workflows_age ON __alkstore_workflows (created_at)""",
    """CREATE TABLE IF NOT EXISTS __alkstore_workflow_steps (
        workflow_id INTEGER NOT NULL,
        step        TEXT    NOT NULL,
        job_id      INTEGER NOT NULL,
        position    INTEGER NOT NULL,
        PRIMARY KEY (workflow_id, step)
    ) WITHOUT ROWID""",
    """CREATE INDEX IF NOT EXISTS __alkstore_workflow_steps_job
        ON __alkstore_workflow_steps (job_id)""",
)

_V7 = (
    # v7, attempt history (issue #28; docs/queues.md "Attempts"). One row per
    # attempt that ended without an ack (a retry, a fail, a lapsed claim)
    # and per death (a burial by the sweep too), written in the transaction
    # that settles it: its worker, when it started and ended, the error and
    # its stack trace, each capped (protocol/values/attempts.py). A job
    # keeps its last ATTEMPTS_KEPT rows; they go when its record does (an
    # ack or cancel that keeps none, a history or dead letter pruned or
    # purged). The death index counts deaths per time bucket (the
    # dashboard's chart), requeued letters included.
    """CREATE TABLE IF NOT EXISTS __alkstore_attempts (
        id          INTEGER PRIMARY KEY,
        job_id      INTEGER NOT NULL,
        queue       TEXT    NOT NULL,
        attempt     INTEGER NOT NULL,
        worker      TEXT,
        started_at  INTEGER,
        finished_at INTEGER NOT NULL,
        outcome     TEXT    NOT NULL,
        error       TEXT,
        trace       TEXT
    )""",
    """CREATE INDEX IF NOT EXISTS __alkstore_attempts_job ON __alkstore_attempts (job_id, id)""",
    """CREATE INDEX IF NOT EXISTS __alkstore_attempts_deaths
        ON __alkstore_attempts (queue, finished_at, outcome) WHERE outcome <> 'retried'""",
    # The due index goes: the next due time and the oldest ready job are read
    # from the claim index, one seek per priority (engines/shapes.py,
    # per_priority_min), and every job write touches one index fewer (an
    # enqueue 68 -> 59 us). Code of claim generation 2 names it (INDEXED
    # BY), so this schema comes with generation 3.
    "DROP INDEX IF EXISTS __alkstore_jobs_due",
    # The dead letters already there: their death, with the last error.
    """INSERT INTO __alkstore_attempts
        (job_id, queue, attempt, worker, finished_at, outcome, error)
        SELECT id, queue, attempts, claimed_by, died_at, reason, last_error
        FROM __alkstore_dead ORDER BY id""",
)

_V8 = (
    # v8, attempts placed by their job's fate (engines/attempt_log.py): a
    # dead letter's rows, which stay until it is purged, apart from those
    # that come and go with retried jobs. SQLite merges a B-tree's thin
    # pages itself; the column and the index are here so both engines run
    # the same statements. Schema-7 code reads and writes on (its rows land
    # among the live ones, where every read and delete also looks).
    "ALTER TABLE __alkstore_attempts ADD COLUMN buried INTEGER NOT NULL DEFAULT 0",
    """UPDATE __alkstore_attempts SET buried = 1
        WHERE job_id IN (SELECT id FROM __alkstore_dead)""",
    """CREATE INDEX IF NOT EXISTS __alkstore_attempts_by_job
        ON __alkstore_attempts (buried, job_id, id)""",
    "DROP INDEX IF EXISTS __alkstore_attempts_job",
)

# (version, statements). Append only: a released migration never changes.
# Its partial-index predicates come from engines/rules.py, where the
# statements that must use those indexes take them too;
# tests/engines/test_migrations.py pins the text, so a rule edit cannot
# change a released migration unnoticed.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, _V1), (2, _V2), (3, _V3), (4, _V4), (5, _V5), (6, _V6), (7, _V7), (8, _V8),
)  # fmt: skip
SCHEMA_VERSION = MIGRATIONS[-1][0]


_META_EXISTS = (
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '__alkstore_meta'"
)
_READ_VERSION = "SELECT value FROM __alkstore_meta WHERE key = 'schema_version'"


@reads
def schema_version(where: str = "the SQLite database") -> Plan[int]:
    """The schema's version (0: no alkstore schema yet); a read, so opening a
    current database takes no write lock. A version newer than this code is
    refused (``SchemaMismatch``); ``where`` names the database in errors."""
    (exists,) = yield from fetch_row(Statement(_META_EXISTS, fetch=Fetch.ONE))
    if not exists:
        return 0
    row = yield from fetch_one(Statement(_READ_VERSION, fetch=Fetch.ONE))
    return rows.schema_version(row, SCHEMA_VERSION, where)


_READ_GENERATION = f"SELECT value FROM __alkstore_meta WHERE key = '{generation.META_KEY}'"
# Raises the store's claim generation, never lowers it: code of an older
# release opening the store later must not reopen claims to itself.
_RAISE_GENERATION = (
    f"INSERT INTO __alkstore_meta (key, value) VALUES ('{generation.META_KEY}', ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value "
    "WHERE CAST(__alkstore_meta.value AS INTEGER) < CAST(excluded.value AS INTEGER)"
)


@reads
def needs_migration(where: str = "the SQLite database") -> Plan[bool]:
    """Whether opening for writing must migrate: the schema is behind this
    code's, or the store's claim generation is (``protocol.generation``).
    A read, so opening a current database takes no write lock."""
    version = yield from schema_version(where)
    if version != SCHEMA_VERSION:
        return True
    row = yield from fetch_one(Statement(_READ_GENERATION, fetch=Fetch.ONE))
    return generation.stored(row) < generation.CLAIM_GENERATION


def migrate() -> Plan[int]:
    """Bring the schema to ``SCHEMA_VERSION`` and the store's claim
    generation up to this code's; run inside a write transaction.

    Idempotent and safe when several processes open the file at once: the
    write transaction serialises them and the second finds the work done.
    Openers ask ``needs_migration()`` first and migrate only when it says so.
    """
    yield Statement(
        "CREATE TABLE IF NOT EXISTS __alkstore_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    )
    row = yield from fetch_one(Statement(_READ_VERSION, fetch=Fetch.ONE))
    current = rows.schema_version(row, SCHEMA_VERSION, "the SQLite database")
    for version, statements in MIGRATIONS:
        if version <= current:
            continue
        for sql in statements:
            yield Statement(sql)
        yield Statement(
            "INSERT INTO __alkstore_meta (key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(version),),
        )
    yield Statement(_RAISE_GENERATION, (str(generation.CLAIM_GENERATION),))
    return SCHEMA_VERSION
