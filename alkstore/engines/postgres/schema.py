"""PostgreSQL schema and versioned migrations.

Everything lives in one Postgres schema of its own (``alkstore`` unless the
engine options say otherwise), so the tables sit beside the application's
without a name prefix and a second store can share the database under
another schema. Times are ``bigint`` microseconds since the epoch supplied by
the core (``now`` is an input; the server clock is never read). Names are
``text COLLATE "C"``: compared byte for byte whatever the database's default
collation, which is both the fastest comparison and the one that can never
make two distinct names equal.

The plan from :func:`migrate` must run inside one transaction at the default
``READ COMMITTED`` isolation (every statement then sees what a migration that
held the lock before it committed).
"""

from __future__ import annotations

import hashlib

from ...protocol import rows
from ...protocol.plan import Fetch, Plan, Statement, fetch_one, reads
from ...protocol.values import generation
from ..rules import Rules
from .names import check_schema, quote_ident

DEFAULT_SCHEMA = "alkstore"


def qualified(schema: str, table: str) -> str:
    """``"schema"."table"``, both quoted."""
    return f"{quote_ident(check_schema(schema))}.{quote_ident(table)}"


def migration_lock_key(schema: str) -> int:
    """The advisory-lock key that serialises migrations of ``schema``.

    A signed 64-bit value derived from the schema name, so stores in other
    schemas of the same database migrate independently, and stable across
    processes and versions (it must never change once released).
    """
    digest = hashlib.sha256(f"alkstore.migrate:{check_schema(schema)}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def lock_guard_key(schema: str) -> int:
    """The advisory-lock key that keeps lock acquisitions (shared) and prunes
    of lock rows (exclusive) of ``schema`` apart, so no acquisition reads the
    token floor while a prune that raises it is uncommitted. Derived like
    :func:`migration_lock_key`, from another text."""
    digest = hashlib.sha256(f"alkstore.locks:{check_schema(schema)}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _v1(schema: str) -> tuple[str, ...]:
    s = quote_ident(schema)
    return (
        # The hot table: every job is inserted, updated by each claim,
        # heartbeat, retry or release, and deleted on ack. Those updates all
        # change ``visible_at``, which is indexed, so they can never be HOT
        # updates; the free space left by fillfactor 70 still lets the new row
        # version land on the same heap page (no relation extension, no free
        # space map search, the job's versions stay together), and page
        # pruning reclaims the dead versions in place. Queue tables are the
        # textbook case of bloat under churn, so autovacuum is told to visit
        # after 2% of the table changed instead of the default 20%: dead index
        # entries are what a claim walks over before finding live work.
        f"""CREATE TABLE IF NOT EXISTS {s}.jobs (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue         text COLLATE "C" NOT NULL,
            payload       text     NOT NULL,
            priority      integer  NOT NULL,
            attempts      bigint   NOT NULL DEFAULT 0,
            max_attempts  bigint   NOT NULL,
            run_at        bigint   NOT NULL,
            created_at    bigint   NOT NULL,
            expires_at    bigint,
            claimed_by    text COLLATE "C",
            visible_at    bigint   NOT NULL,
            state         smallint NOT NULL DEFAULT 0,
            last_error    text,
            claims        bigint   NOT NULL DEFAULT 0
        ) WITH (
            fillfactor = 70,
            autovacuum_vacuum_scale_factor = 0.02,
            autovacuum_analyze_scale_factor = 0.05
        )""",
        # The claim path. Partial: a job whose claim lapsed with no attempts
        # left can never be claimed again, so it drops out of the index and
        # claims never walk over it while it waits for the sweep.
        f"""CREATE INDEX IF NOT EXISTS jobs_claim
            ON {s}.jobs (queue, {Rules.CLAIM_ORDER})
            WHERE {Rules.ATTEMPTS_LEFT}""",
        # When the next job of a queue becomes due, so an idle worker sleeps
        # exactly until then instead of polling.
        f"""CREATE INDEX IF NOT EXISTS jobs_due
            ON {s}.jobs (queue, visible_at) WHERE {Rules.ATTEMPTS_LEFT}""",
        # The sweep's two probes: deadlines, and lapsed claims with nothing left.
        f"""CREATE INDEX IF NOT EXISTS jobs_expiry
            ON {s}.jobs (expires_at) WHERE {Rules.HAS_DEADLINE}""",
        f"""CREATE INDEX IF NOT EXISTS jobs_exhausted
            ON {s}.jobs (visible_at) WHERE {Rules.EXHAUSTED}""",
        # Dead letters keep the id they had while alive (a requeue puts the
        # row back under the same id), so no identity here.
        f"""CREATE TABLE IF NOT EXISTS {s}.dead (
            id            bigint   PRIMARY KEY,
            queue         text COLLATE "C" NOT NULL,
            payload       text     NOT NULL,
            priority      integer  NOT NULL,
            attempts      bigint   NOT NULL,
            max_attempts  bigint   NOT NULL,
            run_at        bigint   NOT NULL,
            created_at    bigint   NOT NULL,
            expires_at    bigint,
            claimed_by    text COLLATE "C",
            last_error    text,
            claims        bigint   NOT NULL DEFAULT 0,
            reason        text     NOT NULL,
            died_at       bigint   NOT NULL
        )""",
        f"""CREATE INDEX IF NOT EXISTS dead_queue ON {s}.dead (queue, died_at, id)""",
        # One counter row per stream: its row lock serialises the publishers
        # of that stream until they commit (see the dialect's next_offset).
        f"""CREATE TABLE IF NOT EXISTS {s}.streams (
            name        text COLLATE "C" PRIMARY KEY,
            last_offset bigint NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS {s}.events (
            stream     text COLLATE "C" NOT NULL,
            "offset"   bigint NOT NULL,
            key        text,
            payload    text   NOT NULL,
            created_at bigint NOT NULL,
            PRIMARY KEY (stream, "offset")
        )""",
        f"""CREATE TABLE IF NOT EXISTS {s}.offsets (
            stream   text COLLATE "C" NOT NULL,
            consumer text COLLATE "C" NOT NULL,
            "offset" bigint NOT NULL,
            PRIMARY KEY (stream, consumer)
        )""",
        f"""CREATE TABLE IF NOT EXISTS {s}.locks (
            name       text COLLATE "C" PRIMARY KEY,
            owner      text COLLATE "C",
            token      bigint NOT NULL,
            expires_at bigint NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS {s}.schedules (
            name         text COLLATE "C" PRIMARY KEY,
            queue        text COLLATE "C" NOT NULL,
            expression   text   NOT NULL,
            payload      text   NOT NULL,
            options      text   NOT NULL,
            next_fire_at bigint NOT NULL,
            created_at   bigint NOT NULL
        )""",
        f"""CREATE INDEX IF NOT EXISTS schedules_due ON {s}.schedules (next_fire_at)""",
    )


def _v2(schema: str) -> tuple[str, ...]:
    """A row per queue that has been paused (or resumed); claims skip the
    queues whose row says paused (rules.queue_running)."""
    s = quote_ident(schema)
    return (
        f"""CREATE TABLE IF NOT EXISTS {s}.queues (
            name   text COLLATE "C" PRIMARY KEY,
            paused boolean NOT NULL DEFAULT false
        )""",
    )


def _v3(schema: str) -> tuple[str, ...]:
    """Operations: job metadata (``headers``, JSON the library keeps beside
    the user's payload, such as the enqueuing code's trace context); finished
    jobs kept for a retention window (``history``); dead letters with a prune
    time; per-stream retention settings and consumers that hold events back
    from retention (``keep``); per-queue retention of history and dead
    letters (``history_us``, ``dead_us``: NULL keeps none / keeps them until
    purged); schedules' last fire time and pause flag; the indexes the
    inspection reads walk."""
    s = quote_ident(schema)
    return (
        f"ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS headers text",
        f"ALTER TABLE {s}.dead ADD COLUMN IF NOT EXISTS headers text",
        f"ALTER TABLE {s}.dead ADD COLUMN IF NOT EXISTS prune_at bigint",
        f"""CREATE INDEX IF NOT EXISTS dead_prune
            ON {s}.dead (prune_at) WHERE prune_at IS NOT NULL""",
        f"""CREATE TABLE IF NOT EXISTS {s}.history (
            id            bigint   PRIMARY KEY,
            queue         text COLLATE "C" NOT NULL,
            outcome       text     NOT NULL,
            payload       text     NOT NULL,
            priority      integer  NOT NULL,
            attempts      bigint   NOT NULL,
            max_attempts  bigint   NOT NULL,
            run_at        bigint   NOT NULL,
            created_at    bigint   NOT NULL,
            finished_at   bigint   NOT NULL,
            worker        text COLLATE "C",
            last_error    text,
            headers       text,
            prune_at      bigint   NOT NULL
        )""",
        f"""CREATE INDEX IF NOT EXISTS history_queue ON {s}.history (queue, finished_at, id)""",
        f"""CREATE INDEX IF NOT EXISTS history_prune ON {s}.history (prune_at)""",
        f"ALTER TABLE {s}.streams ADD COLUMN IF NOT EXISTS max_age_us bigint",
        f"ALTER TABLE {s}.streams ADD COLUMN IF NOT EXISTS max_events bigint",
        f"ALTER TABLE {s}.offsets ADD COLUMN IF NOT EXISTS keep boolean NOT NULL DEFAULT false",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS history_us bigint",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS dead_us bigint",
        f"ALTER TABLE {s}.schedules ADD COLUMN IF NOT EXISTS last_fire_at bigint",
        f"ALTER TABLE {s}.schedules ADD COLUMN IF NOT EXISTS paused boolean NOT NULL DEFAULT false",
        # Inspection: a queue's jobs page by id within one state (and a list
        # of every state merges one page of each), and the queue names are
        # found by stepping from one name to the next in these indexes, never
        # by reading the tables whole.
        f"""CREATE INDEX IF NOT EXISTS jobs_list ON {s}.jobs (queue, state, id)""",
        f"""CREATE INDEX IF NOT EXISTS dead_list ON {s}.dead (queue, id)""",
        f"""CREATE INDEX IF NOT EXISTS history_list ON {s}.history (queue, outcome, id)""",
        # Housekeeping finds lock rows nobody has held for a while (released
        # or lapsed long ago) without scanning the table
        # (rules.lock_free_since).
        f"""CREATE INDEX IF NOT EXISTS locks_expiry ON {s}.locks (expires_at)""",
    )


def _v4(schema: str) -> tuple[str, ...]:
    """Version 4: flow control (issue #12); each feature keeps its
    statements in one block of its own."""
    s = quote_ident(schema)
    return (
        # v4, unique jobs: a job's unique key (``unique_key``, kept for
        # history and inspection) and the slot it holds (``unique_slot``:
        # the key while the job holds it, NULL once it gave it up). The
        # unique partial index on the slot is what makes two live jobs of a
        # queue never hold one key, whichever processes enqueue (a second
        # INSERT waits on the first's index entry, then skips it); acked
        # jobs kept in history keep their key for ``unique_for``; a queue's
        # ``unique_processing`` (NULL or true: a processing job keeps its
        # key; false: a new enqueue takes the key from a processing job).
        f"ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS unique_key text",
        f"ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS unique_slot text",
        f"""CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique
            ON {s}.jobs (queue, unique_slot) WHERE {Rules.UNIQUE_HELD}""",
        f"ALTER TABLE {s}.history ADD COLUMN IF NOT EXISTS unique_key text",
        f"""CREATE INDEX IF NOT EXISTS history_unique
            ON {s}.history (queue, unique_key, finished_at) WHERE unique_key IS NOT NULL""",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS unique_processing boolean",
        # v4, time-zoned schedules and catch-up policies: the IANA zone a
        # cron expression is read in, and which missed fire times get a job
        # ("latest", "all" with at most catch_up_max per tick, "skip" with a
        # grace in microseconds). Existing schedules keep what they did:
        # UTC, one job for a missed window.
        f"ALTER TABLE {s}.schedules ADD COLUMN IF NOT EXISTS tz text NOT NULL DEFAULT 'UTC'",
        f"ALTER TABLE {s}.schedules ADD COLUMN IF NOT EXISTS catch_up text NOT NULL "
        "DEFAULT 'latest'",
        f"ALTER TABLE {s}.schedules ADD COLUMN IF NOT EXISTS catch_up_max bigint",
        f"ALTER TABLE {s}.schedules ADD COLUMN IF NOT EXISTS catch_up_grace_us bigint",
        # v4, per-key concurrency limits: a job's concurrency key (NULL: not
        # limited), a queue's limit (NULL: none, the plain claim), and the
        # index the limited claim counts a key's live claims with
        # (processing keyed jobs only, so it stays as small as what runs).
        # Dead letters and history keep the key too: inspection shows it,
        # and a requeued dead letter comes back with it, still limited
        # (without it, requeue_dead would hand back a job that runs
        # unlimited).
        f"ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS concurrency_key text COLLATE \"C\"",
        f"ALTER TABLE {s}.dead ADD COLUMN IF NOT EXISTS concurrency_key text COLLATE \"C\"",
        f"ALTER TABLE {s}.history ADD COLUMN IF NOT EXISTS concurrency_key text COLLATE \"C\"",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS concurrency_limit bigint",
        f"""CREATE INDEX IF NOT EXISTS jobs_keyed
            ON {s}.jobs (queue, concurrency_key, visible_at) WHERE {Rules.KEYED_PROCESSING}""",
        # v4, rate limits: a queue's rate (``rate_limit`` claims per
        # ``rate_period_us``) and per-key rate, and the claim log they are
        # counted in: one row per claim of a rate-limited queue (``key`` is
        # the job's concurrency key, or '' for the queue's own rate), kept
        # for one period. The first index counts a key's window; the second
        # lets a claim prune what fell out of the window without walking
        # the live part. (The id is there for logical replication, which
        # refuses deletes from a published table without a key.)
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS rate_limit bigint",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS rate_period_us bigint",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS key_rate_limit bigint",
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS key_rate_period_us bigint",
        f"""CREATE TABLE IF NOT EXISTS {s}.claim_log (
            id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            queue text COLLATE "C" NOT NULL,
            key   text COLLATE "C" NOT NULL,
            at    bigint NOT NULL
        )""",
        f"""CREATE INDEX IF NOT EXISTS claim_log_window
            ON {s}.claim_log (queue, key, at)""",
        f"""CREATE INDEX IF NOT EXISTS claim_log_age
            ON {s}.claim_log (queue, at)""",
    )


# Autovacuum for the tables whose rows churn (.vacuum.CHURN_TABLES: a
# queue's rows are inserted, updated by each claim and deleted by the ack):
# vacuum once 1% of the rows are dead, not Postgres's default 20% (a table
# of 10,000 live jobs then carries at most about 1,100 dead ones, not 2,050,
# and an index scan from its head steps over that many fewer dead entries),
# and without the cost-based pauses (vacuum of a small hot table is cheap;
# pausing lets the dead rows pile up behind it). The threshold and scale are
# .vacuum's VACUUM_THRESHOLD and VACUUM_SCALE, which housekeeping's own
# vacuum uses too (tests/engines/test_vacuum.py holds them equal); frozen
# here as text, since a released migration never changes. See
# docs/engines.md, "Table health".
CHURN_STORAGE = (
    "autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, "
    "autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05, "
    "autovacuum_vacuum_cost_delay = 0"
)


def _v5(schema: str) -> tuple[str, ...]:
    """Version 5, table health under churn (the soak benchmark,
    bench/soak.py): storage settings only, no rewrite (the lock a vacuum
    takes, SHARE UPDATE EXCLUSIVE)."""
    s = quote_ident(schema)
    return tuple(f"ALTER TABLE {s}.{table} SET ({CHURN_STORAGE})" for table in _V5_CHURN_TABLES)


# The churning tables of version 5, frozen (CHURN_TABLES grew since).
_V5_CHURN_TABLES = ("jobs", "claim_log", "locks", "history", "dead")


def _v6(schema: str) -> tuple[str, ...]:
    """Version 6, workflows (issue #26): job dependencies, results and
    workflows (docs/workflows.md). Tables and columns added, none rewritten
    (a column with a constant default is added without touching a row)."""
    s = quote_ident(schema)
    return (
        # A job whose dependencies have not all finished waits here, not in
        # jobs, so claims, their indexes and the sweep never see it; it
        # moves into jobs, under the id it was given at enqueue (taken from
        # jobs' identity), when its last dependency finishes (``remaining``
        # counts those not finished). ``on_failure``: 0, a dependency that
        # dies or is cancelled cancels it; 1, it runs anyway.
        f"""CREATE TABLE IF NOT EXISTS {s}.waiting (
            id              bigint   PRIMARY KEY,
            queue           text COLLATE "C" NOT NULL,
            payload         text     NOT NULL,
            priority        integer  NOT NULL,
            max_attempts    bigint   NOT NULL,
            run_at          bigint   NOT NULL,
            created_at      bigint   NOT NULL,
            expires_at      bigint,
            headers         text,
            concurrency_key text COLLATE "C",
            remaining       bigint   NOT NULL,
            on_failure      smallint NOT NULL DEFAULT 0
        )""",
        f"""CREATE INDEX IF NOT EXISTS waiting_list ON {s}.waiting (queue, id)""",
        # One row per dependency: job ``job_id`` waits for job ``dep_id``,
        # ``done`` once the dependency's finish was counted (so a finish is
        # counted once, whatever happens to the job after: a dead letter
        # requeued and acked later counts no more). The key finds a job's
        # dependents (what its finish releases or cancels); the index, its
        # dependencies.
        f"""CREATE TABLE IF NOT EXISTS {s}.deps (
            dep_id bigint  NOT NULL,
            job_id bigint  NOT NULL,
            done   boolean NOT NULL DEFAULT false,
            PRIMARY KEY (dep_id, job_id)
        )""",
        f"""CREATE INDEX IF NOT EXISTS deps_job ON {s}.deps (job_id, dep_id)""",
        # A live job whose finish must be recorded in history (for the
        # results retention at least) and may release or cancel others: one
        # with dependents or dependencies, or one a caller awaits.
        f"ALTER TABLE {s}.jobs ADD COLUMN IF NOT EXISTS keep boolean NOT NULL DEFAULT false",
        # The handler's return value (JSON), kept with the finished job.
        f"ALTER TABLE {s}.history ADD COLUMN IF NOT EXISTS result text",
        # How long a queue keeps results and the finished jobs of a
        # dependency graph (NULL: a day).
        f"ALTER TABLE {s}.queues ADD COLUMN IF NOT EXISTS results_us bigint",
        f"""CREATE TABLE IF NOT EXISTS {s}.workflows (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name       text COLLATE "C" NOT NULL,
            created_at bigint NOT NULL
        )""",
        f"""CREATE INDEX IF NOT EXISTS workflows_age ON {s}.workflows (created_at)""",
        f"""CREATE TABLE IF NOT EXISTS {s}.workflow_steps (
            workflow_id bigint NOT NULL,
            step        text COLLATE "C" NOT NULL,
            job_id      bigint NOT NULL,
            position    integer NOT NULL,
            PRIMARY KEY (workflow_id, step)
        )""",
        f"""CREATE INDEX IF NOT EXISTS workflow_steps_job ON {s}.workflow_steps (job_id)""",
        # The waiting jobs and the edges churn as jobs do (inserted, counted,
        # deleted): the same autovacuum settings (CHURN_STORAGE).
        f"ALTER TABLE {s}.waiting SET ({CHURN_STORAGE})",
        f"ALTER TABLE {s}.deps SET ({CHURN_STORAGE})",
    )


def _v7(schema: str) -> tuple[str, ...]:
    """Version 7, attempt history (issue #28; docs/queues.md "Attempts").
    One row per attempt that ended without an ack (a retry, a fail, a lapsed
    claim) and per death (a burial by the sweep too), written in the
    transaction that settles it: its worker, when it started and ended, the
    error and its stack trace, each capped (protocol/values/attempts.py). A
    job keeps its last ATTEMPTS_KEPT rows; they go when its record does.
    The death index counts deaths per time bucket (the dashboard's chart),
    requeued letters included. The dead letters already there get their
    death, with the last error."""
    s = quote_ident(schema)
    return (
        f"""CREATE TABLE IF NOT EXISTS {s}.attempts (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            job_id      bigint NOT NULL,
            queue       text COLLATE "C" NOT NULL,
            attempt     bigint NOT NULL,
            worker      text,
            started_at  bigint,
            finished_at bigint NOT NULL,
            outcome     text COLLATE "C" NOT NULL,
            error       text,
            trace       text
        )""",
        f"""CREATE INDEX IF NOT EXISTS attempts_job ON {s}.attempts (job_id, id)""",
        f"""CREATE INDEX IF NOT EXISTS attempts_deaths ON {s}.attempts (queue, finished_at, outcome)
            WHERE outcome <> 'retried'""",
        f"""INSERT INTO {s}.attempts (job_id, queue, attempt, worker, finished_at, outcome, error)
            SELECT id, queue, attempts, claimed_by, died_at, reason, last_error
            FROM {s}.dead ORDER BY id""",
        # A retried job's rows are inserted, then deleted with its ack: they
        # churn as the jobs do (CHURN_STORAGE; housekeeping vacuums it too).
        f"ALTER TABLE {s}.attempts SET ({CHURN_STORAGE})",
    )


def _v8(schema: str) -> tuple[str, ...]:
    """Version 8, attempts placed by their job's fate (engines/attempt_log.py).
    A dead letter's rows stay until it is purged; among the rows that come
    and go with retried jobs, one of them in each index page kept that page
    from emptying, and a B-tree frees only empty pages: the job index and
    the id key grew with every retry (a soak of 2,000,000 jobs, one death in
    20,000: 0.25 -> 1.1 MB and still growing, the table flat). So the job
    index leads with ``buried`` (TRUE while the job is a dead letter), and
    the id key goes: no statement looks a row up by its id alone, and the
    job index orders a job's rows by it. Schema-7 code reads and writes on
    (its rows land among the live ones, where every read and delete also
    looks), its reads by job id without the index."""
    s = quote_ident(schema)
    return (
        f"ALTER TABLE {s}.attempts ADD COLUMN IF NOT EXISTS buried boolean NOT NULL DEFAULT false",
        f"UPDATE {s}.attempts SET buried = true WHERE job_id IN (SELECT id FROM {s}.dead)",
        f"""CREATE INDEX IF NOT EXISTS attempts_by_job ON {s}.attempts (buried, job_id, id)""",
        f"DROP INDEX IF EXISTS {s}.attempts_job",
        f"ALTER TABLE {s}.attempts DROP CONSTRAINT IF EXISTS attempts_pkey",
    )


def migrations(schema: str = DEFAULT_SCHEMA) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """(version, statements) for ``schema``. Append only: a released
    migration never changes. Its partial-index predicates come from
    :mod:`..rules`, where the statements that must use those indexes take them
    too; tests/engines/test_migrations.py pins the text, so a rule edit
    cannot change a released migration unnoticed."""
    schema = check_schema(schema)
    return (
        (1, _v1(schema)), (2, _v2(schema)), (3, _v3(schema)), (4, _v4(schema)),
        (5, _v5(schema)), (6, _v6(schema)), (7, _v7(schema)), (8, _v8(schema)),
    )  # fmt: skip


SCHEMA_VERSION = migrations()[-1][0]


def migrate(schema: str = DEFAULT_SCHEMA) -> Plan[int]:
    """Bring ``schema`` to ``SCHEMA_VERSION``; returns the version.

    Run inside one transaction (``BEGIN`` ... ``COMMIT``, READ COMMITTED).
    The first statement takes a transaction-scoped advisory lock derived from
    the schema name, so processes opening the same database at once migrate
    one after the other (concurrent ``CREATE ... IF NOT EXISTS`` can
    otherwise fail on the catalog's unique indexes) and the later ones find
    the work done. An up-to-date schema costs three reads (the version and
    the claim generation, raised to this code's when it is older) and no
    DDL, so a role without CREATE rights can open a store that an
    administrator migrated.
    A schema newer than this code is refused with ``SchemaMismatch``.
    """
    schema = check_schema(schema)
    s = quote_ident(schema)
    meta = f"{s}.meta"
    yield Statement(f"SELECT pg_advisory_xact_lock({migration_lock_key(schema)})")
    current = yield from _read_version(schema)
    if current == SCHEMA_VERSION:
        yield from _raise_generation(meta)
        return SCHEMA_VERSION
    yield Statement(f"CREATE SCHEMA IF NOT EXISTS {s}")
    yield Statement(
        f'CREATE TABLE IF NOT EXISTS {meta} (key text COLLATE "C" PRIMARY KEY, value text NOT NULL)'
    )
    for version, statements in migrations(schema):
        if version <= current:
            continue
        for sql in statements:
            yield Statement(sql)
        yield Statement(
            f"INSERT INTO {meta} (key, value) VALUES ('schema_version', $1::text) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(version),),
        )
    yield from _raise_generation(meta)
    return SCHEMA_VERSION


def _raise_generation(meta: str) -> Plan[None]:
    """Raise the store's claim generation to this code's when it is older
    (never lower it: code of an older release opening the store later must
    not reopen claims to itself); a read alone when it is current."""
    row = yield from fetch_one(Statement(
        f"SELECT value FROM {meta} WHERE key = '{generation.META_KEY}'", fetch=Fetch.ONE
    ))  # fmt: skip
    if generation.stored(row) >= generation.CLAIM_GENERATION:
        return
    yield Statement(
        f"INSERT INTO {meta} (key, value) VALUES ('{generation.META_KEY}', $1::text) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (str(generation.CLAIM_GENERATION),),
    )


def _read_version(schema: str) -> Plan[int]:
    meta = f"{quote_ident(schema)}.meta"
    row = yield from fetch_one(
        Statement("SELECT to_regclass($1::text) IS NOT NULL", (meta,), Fetch.ONE)
    )
    if row is None or not row[0]:
        return 0
    row = yield from fetch_one(
        Statement(f"SELECT value FROM {meta} WHERE key = 'schema_version'", fetch=Fetch.ONE)
    )
    return rows.schema_version(row, SCHEMA_VERSION, f"Postgres schema {schema!r}")


@reads
def schema_version(schema: str = DEFAULT_SCHEMA) -> Plan[int]:
    """The version of the alkstore schema in ``schema`` (0: none there),
    read without a lock or a write: what a read-only store checks instead of
    migrating. A version newer than this code is refused (``SchemaMismatch``)."""
    return (yield from _read_version(check_schema(schema)))
