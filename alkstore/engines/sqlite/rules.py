"""The semantic rules of the SQLite engine, each written once.

Ownership, claimability, deadlines, lock acquisition and expiry, offset
monotonicity and the scheduler's compare-and-set are decided in SQL, inside
the statement that acts on them (so they hold atomically). Each rule is one
fragment here; every statement of :mod:`.dialect` and every partial index of
:mod:`.schema` that needs a rule uses the fragment, never a copy of its text
(``tests/engines/test_rules.py`` checks that no comparison a rule makes is
written anywhere else). ``docs/internals.md`` maps each rule to the tests
that prove it.

A fragment is an SQL boolean expression (or, where it says so, an assignment
or a ``CASE``) over the columns of one row. Its arguments are what the rule
compares with: a placeholder or an SQL expression such as
``excluded.owner``. On SQLite every input is a ``?``, and each ``?`` in the
result is one bind, in the order of the text; each function says which
binds it adds. ``row`` names the table alias the columns belong to (empty:
unqualified).

The same rules, under the same names and in the same order, are in
:mod:`alkstore.engines.postgres.rules`; the two are kept side by side, not
generated one from the other. Migrations that use a fragment are pinned
(``tests/engines/test_migrations.py``): a released migration's text never
changes, so editing a fragment that one uses means freezing that
migration's old text first.
"""

from __future__ import annotations

from ...protocol.dialect import STATE_PENDING, STATE_PROCESSING
from ...protocol.values.generation import META_KEY as _GENERATION_KEY


def _of(row: str) -> str:
    return f"{row}." if row else ""


# -- attempts ----------------------------------------------------------------
# A job with attempts left may still be claimed: the predicate of the claim
# and due indexes (jobs_claim, jobs_due), and of every statement that must
# use them. Model: LiveJob.claimable, QueueModel.next_due.
ATTEMPTS_LEFT = "attempts < max_attempts"
# The complement: no claim may take the job again; once no claim of it is
# running, the sweep buries it. The predicate of jobs_exhausted. Model:
# QueueModel.sweep_reason; core: claim.retry_decision, claim.sweep_decision.
EXHAUSTED = "attempts >= max_attempts"


# -- visibility --------------------------------------------------------------
def visible(now: str, *, row: str = "") -> str:
    """``visible_at`` has come: a pending job is due, a processing job's
    claim has lapsed (``now == visible_at`` is lapsed: the half-open rule of
    the model). Binds: now."""
    return f"{_of(row)}visible_at <= {now}"


def hidden(now: str, *, row: str = "") -> str:
    """The complement of :func:`visible`: a pending job is not due yet, a
    processing job's claim is live. Binds: now."""
    return f"{_of(row)}visible_at > {now}"


# -- deadlines ---------------------------------------------------------------
# The job has a deadline: the predicate of jobs_expiry.
HAS_DEADLINE = "expires_at IS NOT NULL"


def before_deadline(now: str) -> str:
    """No deadline, or one still ahead. Binds: now. Model:
    ``not LiveJob.deadline_passed``."""
    return f"(expires_at IS NULL OR expires_at > {now})"


def deadline_passed(now: str) -> str:
    """A deadline at or before ``now`` (uses jobs_expiry). Binds: now.
    Model: LiveJob.deadline_passed."""
    return f"{HAS_DEADLINE} AND expires_at <= {now}"


# -- claiming ----------------------------------------------------------------
# Claim order: priority first, then when the job became due, then id. The
# claim index's columns after ``queue``, so the claim walks it in order.
CLAIM_ORDER = "priority DESC, visible_at, id"


def claimable(now: str) -> str:
    """A claim at ``now`` may take the job: attempts left, visible (due, or
    its claim lapsed: reclaim is the same rule) and not past its deadline.
    Binds: now, now. Model: LiveJob.claimable."""
    return f"{ATTEMPTS_LEFT} AND {visible(now)} AND {before_deadline(now)}"



# -- pausing -------------------------------------------------------------------
def queue_running(queues: str, queue: str) -> str:
    """The queue is not paused: no row of the ``queues`` table says so. A
    claim takes nothing from a paused queue; everything else goes on.
    Binds: queue. Model: none (pausing is a contract extension the contract
    tests check on every backend)."""
    return f"NOT EXISTS (SELECT 1 FROM {queues} WHERE name = {queue} AND paused)"


# -- claim generations --------------------------------------------------------
def claim_rules_known(meta: str, generation: str) -> str:
    """The claiming code knows the store's claim rules: the store records no
    claim generation newer than ``generation`` (``protocol.generation``).
    Uncorrelated, so it is evaluated once per statement, before any row;
    a claim by code a newer release left behind takes nothing. Binds: generation.
    Model: none (checked by tests/upgrade with two generations on one store)."""
    return (
        f"NOT EXISTS (SELECT 1 FROM {meta} WHERE key = '{_GENERATION_KEY}' "
        f"AND CAST(value AS INTEGER) > {generation})"
    )


# -- unique jobs --------------------------------------------------------------
# A live job holds its unique key: the predicate of the unique index
# (jobs_unique) and the conflict target of the unique enqueue. Model: none
# (unique jobs are a contract extension, checked by the contract tests and
# the simulation's unique-key invariant).
UNIQUE_HELD = "unique_slot IS NOT NULL"


def unique_yields_when_processing(queues: str, queue: str) -> str:
    """A processing job of ``queue`` gives its key up to a new enqueue: the
    queue's ``unique_processing`` says so (set to false); by default a
    processing job keeps it. Binds: queue."""
    return (
        f"EXISTS (SELECT 1 FROM {queues} WHERE name = {queue} "
        f"AND unique_processing = 0)"
    )


def unique_recently_acked(queue: str, key: str, since: str) -> str:
    """A job of ``queue`` with unique key ``key`` was acked at or after
    ``since`` (and is kept in history): it still holds the key for its
    ``unique_for``. Binds: queue, key, since."""
    return (
        f"queue = {queue} AND unique_key = {key} AND outcome = 'acked' "
        f"AND finished_at >= {since}"
    )


# -- limits ---------------------------------------------------------------------
# The queue has a limit: a per-key concurrency limit
# (``queues.concurrency_limit``), a rate (``rate_limit`` claims per
# ``rate_period_us``) or a per-key rate (``key_rate_limit`` per
# ``key_rate_period_us``). Model: none (limits are a contract extension,
# checked by the contract tests and the simulation's limit invariants).
QUEUE_LIMITED = (
    "(concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL)"
)
# What a limited claim reads, in this order (protocol/rows.queue_limits).
LIMIT_COLUMNS = (
    "concurrency_limit, rate_limit, rate_period_us, key_rate_limit, key_rate_period_us"
)
# A job counts against its key's limit: processing with a concurrency key
# (the predicate of jobs_keyed, the index the limited claim counts with).
KEYED_PROCESSING = f"state = {STATE_PROCESSING} AND concurrency_key IS NOT NULL"
# The claim log's key for a claim counted by the queue's own rate (a
# concurrency key is an identifier, never empty).
QUEUE_WIDE = "''"


def queue_claims_unlimited(queues: str, queue: str) -> str:
    """The queue the plain claim walks (a scalar subquery): ``queue`` when
    it is neither paused nor limited (no row of the ``queues`` table says
    either), NULL otherwise, which matches no job, so the walk of the claim
    index is empty rather than a scan of the backlog against a false guard.
    A limited queue's jobs are taken by the limited claim only; the plain
    claim, one statement as before, costs a queue without limits nothing
    more. Binds: queue (twice)."""
    return (
        f"(SELECT {queue} WHERE NOT EXISTS (SELECT 1 FROM {queues} WHERE name = {queue} "
        f"AND (paused OR {QUEUE_LIMITED})))"
    )


def queue_limit(queues: str, queue: str) -> str:
    """The queue's limits, for a claim that found the plain path closed:
    its row, running (not paused) and limited, or none. Binds: queue."""
    return (
        f"SELECT {LIMIT_COLUMNS} FROM {queues} WHERE name = {queue} "
        f"AND NOT paused AND {QUEUE_LIMITED}"
    )


def key_has_room(jobs: str, queue: str, now: str, limit: str, row: str) -> str:
    """The job ``row`` may be claimed under its queue's limit: it has no
    concurrency key, or fewer than ``limit`` jobs of its key hold a live
    claim (a lapsed claim no longer counts: its worker lost the job).
    Binds: queue, now, limit."""
    return (
        f"({row}.concurrency_key IS NULL OR (SELECT count(*) FROM {jobs} AS k "
        f"WHERE k.queue = {queue} AND k.concurrency_key = {row}.concurrency_key "
        f"AND k.state = {STATE_PROCESSING} AND {hidden(now, row='k')}) < {limit})"
    )


def in_window(since: str, *, row: str = "") -> str:
    """A claim log entry made after ``since`` (now less the rate's period):
    it counts against the rate. An entry from a clock ahead of ours counts
    too (there is no upper bound), so skewed claimers err on the side of
    fewer claims. Binds: since."""
    return f"{_of(row)}at > {since}"


def key_under_rate(log: str, queue: str, since: str, limit: str, row: str) -> str:
    """The job ``row`` may be claimed under its queue's per-key rate: it has
    no concurrency key, or its key's claims logged in the window number
    fewer than ``limit``. Binds: queue, since, limit."""
    return (
        f"({row}.concurrency_key IS NULL OR (SELECT count(*) FROM {log} AS r "
        f"WHERE r.queue = {queue} AND r.key = {row}.concurrency_key "
        f"AND {in_window(since, row='r')}) < {limit})"
    )


# -- retention ---------------------------------------------------------------
def history_retention(queues: str, queue: str) -> str:
    """How long ``queue`` keeps its finished jobs, in microseconds (NULL:
    none are kept, the default). The claim returns it with each job, so the
    ack moves the job to history or deletes it with no extra round trip: a
    change applies to jobs claimed after it. Binds: queue. Model:
    QueueModel.claim."""
    return f"(SELECT history_us FROM {queues} WHERE name = {queue})"


def dead_prune_at(died_at: str, queues: str, queue: str) -> str:
    """When a dead letter buried at ``died_at`` is pruned: its queue's dead
    retention later (NULL: it stays until purged, the default). Binds:
    died_at, queue. Model: QueueModel._bury."""
    return f"{died_at} + (SELECT dead_us FROM {queues} WHERE name = {queue})"


def prune_due(now: str) -> str:
    """A history row or dead letter whose prune time has come (a dead letter
    without one never is). Binds: now. Model: QueueModel.prune."""
    return f"prune_at <= {now}"


# -- ownership ---------------------------------------------------------------
def owned(worker: str, claim: str | None, now: str, *, row: str = "") -> str:
    """The job is held by ``worker`` under claim number ``claim``, and the
    claim is live: what every settling statement (ack, retry, fail,
    heartbeat, release) checks in the statement that changes the row.

    ``claim`` None leaves the claim number to the statement: ``ack_claims``
    matches (id, claim number) pairs itself, and ``ack_batch`` has no claim
    numbers (the batch form checks the worker and the live claim). Binds:
    worker, claim (unless None), now. Model: LiveJob.owned_by.
    """
    p = _of(row)
    number = "" if claim is None else f" AND {p}claims = {claim}"
    return (
        f"{p}state = {STATE_PROCESSING} AND {p}claimed_by = {worker}{number} "
        f"AND {hidden(now, row=row)}"
    )


def no_live_claim(now: str) -> str:
    """Pending, or processing under a claim that has lapsed. Binds: now.
    Model: ``not LiveJob.claim_live``."""
    return f"(state = {STATE_PENDING} OR {visible(now)})"


# -- the sweep ---------------------------------------------------------------
def sweep_expired(now: str) -> str:
    """The sweep's first probe (jobs_expiry): a deadline that passed, with
    no live claim to protect it (a running claim keeps its chance to ack).
    Binds: now, now. Core: claim.sweep_decision ("expired")."""
    return f"{deadline_passed(now)} AND {no_live_claim(now)}"


def sweep_exhausted(now: str) -> str:
    """The sweep's second probe (jobs_exhausted): no attempts left and
    visible, so no claim of it is running (a pending job with no attempts
    left is always visible: only a release makes one, due at once).
    Binds: now. Core: claim.sweep_decision ("claim_expired", "max_attempts")."""
    return f"{EXHAUSTED} AND {visible(now)}"


# -- locks -------------------------------------------------------------------
def lock_held(owner: str, token: str | None, now: str, *, row: str = "") -> str:
    """The lock is held by ``owner`` (under fencing token ``token``, unless
    None) and its TTL has not lapsed. Binds: owner (if a ``?``), token
    (unless None), now. Model: LockState.held, LockModel._holds."""
    p = _of(row)
    fence = "" if token is None else f" AND {p}token = {token}"
    return f"{p}owner = {owner}{fence} AND {p}expires_at > {now}"


def lock_free(now: str, *, row: str = "") -> str:
    """Nobody holds the lock: released (owner cleared) or its TTL lapsed
    (``now == expires_at`` is lapsed). The complement of :func:`lock_held`
    for any owner. Binds: now. Model: ``not LockState.held``."""
    p = _of(row)
    return f"({p}owner IS NULL OR {p}expires_at <= {now})"


def fencing_token(owner: str, now: str, *, row: str = "") -> str:
    """The token an acquisition by ``owner`` leaves (a ``CASE``): the same
    one when ``owner`` already holds the lock (a refresh), the next one
    otherwise, so tokens strictly increase across holders. Binds: owner (if
    a ``?``), now. Model: LockModel.try_lock."""
    p = _of(row)
    return f"CASE WHEN {lock_held(owner, None, now, row=row)} THEN {p}token ELSE {p}token + 1 END"


def lock_free_since(cutoff: str) -> str:
    """Nobody has held the lock since ``cutoff``: released at or before it
    (a release sets ``expires_at`` to its own time) or lapsed at or before
    it. What housekeeping prunes, with ``cutoff`` a grace period ago; a held
    lock never qualifies. Binds: cutoff. Model: LockState.free_since."""
    return f"expires_at <= {cutoff}"


# The meta row holding the highest fencing token housekeeping has pruned.
TOKEN_FLOOR_KEY = "lock_token_floor"


def new_lock_token(meta: str) -> str:
    """The fencing token of a name's first row (a scalar subquery): one above
    the floor, the highest token housekeeping ever pruned, so a name pruned
    and taken again never repeats or lowers its token. No binds.
    Model: LockModel.try_lock."""
    return (
        f"(SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) + 1 FROM {meta} "
        f"WHERE key = '{TOKEN_FLOOR_KEY}')"
    )


# -- streams -----------------------------------------------------------------
def keep_higher_offset(*, row: str = "") -> str:
    """A consumer's saved offset never moves back: what follows ``ON
    CONFLICT (stream, consumer) DO UPDATE SET``. No binds. Model:
    StreamModel.save_offset."""
    p = _of(row)
    return f'"offset" = MAX({p}"offset", excluded."offset")'


def protected_floor(offsets: str, stream: str) -> str:
    """The lowest saved offset among ``stream``'s protected consumers (a
    scalar subquery; NULL: none): retention never drops an event above it,
    and a protected consumer that never saved holds everything (offset 0).
    Binds: stream. Model: StreamModel.prune."""
    return f'(SELECT MIN("offset") FROM {offsets} WHERE stream = {stream} AND keep)'


def within_age(cutoff: str) -> str:
    """An event created at or after ``cutoff`` (now less the stream's max
    age): young enough to keep. Binds: cutoff. Model: StreamModel.prune."""
    return f"created_at >= {cutoff}"


# -- schedules ---------------------------------------------------------------
# The schedule is not paused: it fires, and the scheduler sleeps until its
# next fire time. A paused one fires nothing until resumed. Model:
# ScheduleState.running.
SCHEDULE_RUNNING = "NOT paused"


def schedule_due(now: str) -> str:
    """The schedule fires: it is running and its next fire time has come.
    Binds: now. Model: ScheduleState.due."""
    return f"{SCHEDULE_RUNNING} AND next_fire_at <= {now}"


def fire_time_unchanged(fire_at: str) -> str:
    """The scheduler's compare-and-set: the row still holds the fire time
    this ticker read, so of the tickers that read it exactly one moves it on
    and enqueues its job. Binds: fire_at. Core: schedule.tick."""
    return f"next_fire_at = {fire_at}"


def keep_fire_time(*, row: str = "") -> str:
    """The fire time a re-registration leaves (a ``CASE``, for ``ON CONFLICT
    (name) DO UPDATE``): the pending one when the expression is the same
    in the same time zone (every process registers at start-up; none may
    skip or repeat a fire), the new one otherwise. No binds."""
    p = _of(row)
    return (
        f"CASE WHEN {p}expression = excluded.expression AND {p}tz = excluded.tz "
        f"THEN {p}next_fire_at "
        "ELSE excluded.next_fire_at END"
    )
