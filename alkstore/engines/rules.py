"""The semantic rules, each written once for every engine.

Ownership, claimability, deadlines, lock acquisition and expiry, offset
monotonicity and the scheduler's compare-and-set are decided in SQL, inside
the statement that acts on them (so they hold atomically). Each rule is one
fragment here; every statement and every partial index of an engine that
needs a rule uses the fragment, never a copy of its text
(``tests/engines/test_rules.py`` checks that no comparison a rule makes is
written anywhere else). ``docs/internals.md`` maps each rule to the tests
that prove it.

A fragment is an SQL boolean expression (or, where it says so, an assignment
or a ``CASE``) over the columns of one row. Its arguments are what the rule
compares with: a parameter (``:now``) or an SQL expression such as
``excluded.owner``; its inputs are listed in its docstring. ``row`` names
the table alias the columns belong to (empty: unqualified); statements that
join or upsert qualify them.

An engine uses the rules through ``Rules(its spelling)`` (``RULES`` of
``engines/<engine>/spelling.py``): where the engines' SQL differs inside a
rule (a boolean literal, a cast, ``MAX`` against ``GREATEST``, an upsert's
``excluded`` row), the fragment asks the :class:`~.spelling.Spelling` and
writes neither engine's word. The constants need none and are the same on
every engine. Migrations that use a fragment are pinned
(``tests/engines/test_migrations.py``): a released migration's text never
changes, so editing a fragment that one uses means freezing that
migration's old text first.
"""

from __future__ import annotations

from typing import Final

from ..protocol.dialect import STATE_PENDING, STATE_PROCESSING
from ..protocol.values.generation import META_KEY as _GENERATION_KEY
from ..protocol.values.results import RESULTS_RETENTION_US
from .spelling import Spelling


def _of(row: str) -> str:
    return f"{row}." if row else ""


class Rules:
    """Every rule's fragment, in one engine's spelling."""

    def __init__(self, spelling: Spelling) -> None:
        self.spelling = spelling

    # -- attempts ------------------------------------------------------------
    # A job with attempts left may still be claimed: the predicate of the claim
    # and due indexes (jobs_claim, jobs_due), and of every statement that must
    # use them. Model: LiveJob.claimable, QueueModel.next_due.
    ATTEMPTS_LEFT: Final = "attempts < max_attempts"
    # The complement: no claim may take the job again; once no claim of it is
    # running, the sweep buries it. The predicate of jobs_exhausted. Model:
    # QueueModel.sweep_reason; core: claim.retry_decision, claim.sweep_decision.
    EXHAUSTED: Final = "attempts >= max_attempts"

    # -- visibility ----------------------------------------------------------
    def visible(self, now: str, *, row: str = "") -> str:
        """``visible_at`` has come: a pending job is due, a processing job's
        claim has lapsed (``now == visible_at`` is lapsed: the half-open rule of
        the model). Inputs: now."""
        return f"{_of(row)}visible_at <= {now}"

    def hidden(self, now: str, *, row: str = "") -> str:
        """The complement of :meth:`visible`: a pending job is not due yet, a
        processing job's claim is live. Inputs: now."""
        return f"{_of(row)}visible_at > {now}"

    # -- deadlines -----------------------------------------------------------
    # The job has a deadline: the predicate of jobs_expiry.
    HAS_DEADLINE: Final = "expires_at IS NOT NULL"

    def before_deadline(self, now: str) -> str:
        """No deadline, or one still ahead. Inputs: now. Model:
        ``not LiveJob.deadline_passed``."""
        return f"(expires_at IS NULL OR expires_at > {now})"

    def deadline_passed(self, now: str) -> str:
        """A deadline at or before ``now`` (uses jobs_expiry). Inputs: now.
        Model: LiveJob.deadline_passed."""
        return f"{self.HAS_DEADLINE} AND expires_at <= {now}"

    # -- claiming ------------------------------------------------------------
    # Claim order: priority first, then when the job became due, then id. The
    # claim index's columns after ``queue``, so the claim walks it in order;
    # its first key alone is what a skip-scan of that index steps through
    # (the next due time, the oldest ready job: shapes.per_priority_min).
    PRIORITY_FIRST: Final = "priority DESC"
    CLAIM_ORDER: Final = f"{PRIORITY_FIRST}, visible_at, id"

    def claimable(self, now: str) -> str:
        """A claim at ``now`` may take the job: attempts left, visible (due, or
        its claim lapsed: reclaim is the same rule) and not past its deadline.
        Inputs: now. Model: LiveJob.claimable."""
        return f"{self.ATTEMPTS_LEFT} AND {self.visible(now)} AND {self.before_deadline(now)}"

    # -- pausing -------------------------------------------------------------
    def queue_running(self, queues: str, queue: str) -> str:
        """The queue is not paused: no row of the ``queues`` table says so. A
        claim takes nothing from a paused queue; everything else goes on.
        Inputs: queue. Model: none (pausing is a contract extension the
        contract tests check on every backend)."""
        return f"NOT EXISTS (SELECT 1 FROM {queues} WHERE name = {queue} AND paused)"

    # -- claim generations ---------------------------------------------------
    def claim_rules_known(self, meta: str, generation: str) -> str:
        """The claiming code knows the store's claim rules: the store records no
        claim generation newer than ``generation`` (``protocol.generation``).
        Uncorrelated, so it is evaluated once per statement, before any row;
        a claim by code a newer release left behind takes nothing. Inputs:
        generation. Model: none (checked by tests/upgrade with two generations
        on one store)."""
        return (
            f"NOT EXISTS (SELECT 1 FROM {meta} WHERE key = '{_GENERATION_KEY}' "
            f"AND {self.spelling.integer('value')} > {generation})"
        )

    # -- dependencies and kept jobs (workflows) ------------------------------
    @property
    def NOT_KEPT(self) -> str:
        """A live job whose finish needs no record: no dependents, no
        dependencies, nobody awaiting it. The plain (fast) ack and cancel
        take only such a job; a kept one goes through the statements that
        move it into history and settle what depends on it. Model: none
        (the dependency rules are checked by the simulation's ledger,
        ``Ledger.dependencies_hold``, and tests/contract/test_dependencies.py)."""
        return f"keep = {self.spelling.false}"

    @property
    def KEEP(self) -> str:
        """The assignment that marks a live job kept."""
        return f"keep = {self.spelling.true}"

    @property
    def EDGE_OPEN(self) -> str:
        """A dependency whose finish has not been counted yet: a finish
        counts each edge once (an ack reads these edges; a death or cancel
        marks them ``EDGE_COUNTED`` as it counts them)."""
        return f"done = {self.spelling.false}"

    @property
    def EDGE_COUNTED(self) -> str:
        """The assignment that counts an edge's finish."""
        return f"done = {self.spelling.true}"

    def dependencies_done(self, counting: str) -> str:
        """A waiting job whose every dependency has finished once the
        ``counting`` finishes being counted now are (0: those already
        counted): it moves into jobs. Input: how many finishes of its
        dependencies the statement counts."""
        return f"remaining <= {counting}"

    def kept_prune_at(self, now: str, queues: str, queue: str) -> str:
        """When a kept job finished at ``now`` leaves history: its queue's
        results retention (NULL: ``RESULTS_RETENTION_US``, a day) or its
        history retention, whichever is longer. Inputs: now, queue. Model:
        none (tests/contract/test_results.py)."""
        history = f"COALESCE((SELECT history_us FROM {queues} WHERE name = {queue}), 0)"
        results = (
            f"COALESCE((SELECT results_us FROM {queues} WHERE name = {queue}), "
            f"{RESULTS_RETENTION_US})"
        )
        return f"{now} + {self.spelling.larger(history, results)}"

    # -- unique jobs ---------------------------------------------------------
    # A live job holds its unique key: the predicate of the unique index
    # (jobs_unique) and the conflict target of the unique enqueue. Model: none
    # (unique jobs are a contract extension, checked by the contract tests and
    # the simulation's unique-key invariant).
    UNIQUE_HELD: Final = "unique_slot IS NOT NULL"

    def unique_yields_when_processing(self, queues: str, queue: str) -> str:
        """A processing job of ``queue`` gives its key up to a new enqueue: the
        queue's ``unique_processing`` says so (set to false); by default a
        processing job keeps it. Inputs: queue."""
        return (
            f"EXISTS (SELECT 1 FROM {queues} WHERE name = {queue} "
            f"AND unique_processing = {self.spelling.false})"
        )

    def unique_recently_acked(self, queue: str, key: str, since: str) -> str:
        """A job of ``queue`` with unique key ``key`` was acked at or after
        ``since`` (and is kept in history): it still holds the key for its
        ``unique_for``. Inputs: queue, key, since."""
        return (
            f"queue = {queue} AND unique_key = {key} AND outcome = 'acked' "
            f"AND finished_at >= {since}"
        )

    # -- limits --------------------------------------------------------------
    # The queue has a limit: a per-key concurrency limit
    # (``queues.concurrency_limit``), a rate (``rate_limit`` claims per
    # ``rate_period_us``) or a per-key rate (``key_rate_limit`` per
    # ``key_rate_period_us``). Model: none (limits are a contract extension,
    # checked by the contract tests and the simulation's limit invariants).
    QUEUE_LIMITED: Final = (
        "(concurrency_limit IS NOT NULL OR rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL)"
    )
    # What a limited claim reads, in this order (protocol/rows.queue_limits).
    LIMIT_COLUMNS: Final = (
        "concurrency_limit, rate_limit, rate_period_us, key_rate_limit, key_rate_period_us"
    )
    # A job counts against its key's limit: processing with a concurrency key
    # (the predicate of jobs_keyed, the index the limited claim counts with).
    KEYED_PROCESSING: Final = f"state = {STATE_PROCESSING} AND concurrency_key IS NOT NULL"
    # The claim log's key for a claim counted by the queue's own rate (a
    # concurrency key is an identifier, never empty).
    QUEUE_WIDE: Final = "''"

    def queue_claims_unlimited(self, queues: str, queue: str) -> str:
        """The queue the plain claim walks (a scalar subquery): ``queue`` when
        it is neither paused nor limited (no row of the ``queues`` table says
        either), NULL otherwise, which matches no job, so the walk of the claim
        index is empty rather than a scan of the backlog against a false guard.
        A limited queue's jobs are taken by the limited claim only; the plain
        claim, one statement as before, costs a queue without limits nothing
        more. Inputs: queue."""
        return (
            f"(SELECT {queue} WHERE NOT EXISTS (SELECT 1 FROM {queues} WHERE name = {queue} "
            f"AND (paused OR {self.QUEUE_LIMITED})))"
        )

    def queue_limit(self, queues: str, queue: str) -> str:
        """The queue's limits, for a claim that found the plain path closed:
        its row, running (not paused) and limited, or none. Inputs: queue."""
        return (
            f"SELECT {self.LIMIT_COLUMNS} FROM {queues} WHERE name = {queue} "
            f"AND NOT paused AND {self.QUEUE_LIMITED}"
        )

    def key_has_room(self, jobs: str, queue: str, now: str, limit: str, row: str) -> str:
        """The job ``row`` may be claimed under its queue's limit: it has no
        concurrency key, or fewer than ``limit`` jobs of its key hold a live
        claim (a lapsed claim no longer counts: its worker lost the job).
        Inputs: queue, now, limit."""
        return (
            f"({row}.concurrency_key IS NULL OR (SELECT count(*) FROM {jobs} AS k "
            f"WHERE k.queue = {queue} AND k.concurrency_key = {row}.concurrency_key "
            f"AND k.state = {STATE_PROCESSING} AND {self.hidden(now, row='k')}) < {limit})"
        )

    def in_window(self, since: str, *, row: str = "") -> str:
        """A claim log entry made after ``since`` (now less the rate's period):
        it counts against the rate. An entry from a clock ahead of ours counts
        too (there is no upper bound), so skewed claimers err on the side of
        fewer claims. Inputs: since."""
        return f"{_of(row)}at > {since}"

    def key_under_rate(self, log: str, queue: str, since: str, limit: str, row: str) -> str:
        """The job ``row`` may be claimed under its queue's per-key rate: it has
        no concurrency key, or its key's claims logged in the window number
        fewer than ``limit``. Inputs: queue, since, limit."""
        return (
            f"({row}.concurrency_key IS NULL OR (SELECT count(*) FROM {log} AS r "
            f"WHERE r.queue = {queue} AND r.key = {row}.concurrency_key "
            f"AND {self.in_window(since, row='r')}) < {limit})"
        )

    # -- retention -----------------------------------------------------------
    def history_retention(self, queues: str, queue: str) -> str:
        """How long ``queue`` keeps its finished jobs, in microseconds (NULL:
        none are kept, the default). The claim returns it with each job, so the
        ack moves the job to history or deletes it with no extra round trip: a
        change applies to jobs claimed after it. Inputs: queue. Model:
        QueueModel.claim."""
        return f"(SELECT history_us FROM {queues} WHERE name = {queue})"

    def dead_prune_at(self, died_at: str, queues: str, queue: str) -> str:
        """When a dead letter buried at ``died_at`` is pruned: its queue's dead
        retention later (NULL: it stays until purged, the default). Inputs:
        died_at, queue. Model: QueueModel._bury."""
        return f"{died_at} + (SELECT dead_us FROM {queues} WHERE name = {queue})"

    def prune_due(self, now: str) -> str:
        """A history row or dead letter whose prune time has come (a dead letter
        without one never is). Inputs: now. Model: QueueModel.prune."""
        return f"prune_at <= {now}"

    # -- ownership -----------------------------------------------------------
    def owned(self, worker: str, claim: str | None, now: str, *, row: str = "") -> str:
        """The job is held by ``worker`` under claim number ``claim``, and the
        claim is live: what every settling statement (ack, retry, fail,
        heartbeat, release) checks in the statement that changes the row.

        ``claim`` None leaves the claim number to the statement: ``ack_claims``
        matches (id, claim number) pairs itself, and ``ack_batch`` has no claim
        numbers (the batch form checks the worker and the live claim). Inputs:
        worker, claim (unless None), now. Model: LiveJob.owned_by.
        """
        p = _of(row)
        number = "" if claim is None else f" AND {p}claims = {claim}"
        return (
            f"{p}state = {STATE_PROCESSING} AND {p}claimed_by = {worker}{number} "
            f"AND {self.hidden(now, row=row)}"
        )

    def no_live_claim(self, now: str) -> str:
        """Pending, or processing under a claim that has lapsed. Inputs: now.
        Model: ``not LiveJob.claim_live``."""
        return f"(state = {STATE_PENDING} OR {self.visible(now)})"

    # -- the sweep -----------------------------------------------------------
    def sweep_expired(self, now: str) -> str:
        """The sweep's first probe (jobs_expiry): a deadline that passed, with
        no live claim to protect it (a running claim keeps its chance to ack).
        Inputs: now. Core: claim.sweep_decision ("expired")."""
        return f"{self.deadline_passed(now)} AND {self.no_live_claim(now)}"

    def sweep_exhausted(self, now: str) -> str:
        """The sweep's second probe (jobs_exhausted): no attempts left and
        visible, so no claim of it is running (a pending job with no attempts
        left is always visible: only a release makes one, due at once).
        Inputs: now. Core: claim.sweep_decision ("claim_expired", "max_attempts")."""
        return f"{self.EXHAUSTED} AND {self.visible(now)}"

    # -- locks ---------------------------------------------------------------
    def lock_held(self, owner: str, token: str | None, now: str, *, row: str = "") -> str:
        """The lock is held by ``owner`` (under fencing token ``token``, unless
        None) and its TTL has not lapsed. Inputs: owner, token (unless None),
        now. Model: LockState.held, LockModel._holds."""
        p = _of(row)
        fence = "" if token is None else f" AND {p}token = {token}"
        return f"{p}owner = {owner}{fence} AND {p}expires_at > {now}"

    def lock_free(self, now: str, *, row: str = "") -> str:
        """Nobody holds the lock: released (owner cleared) or its TTL lapsed
        (``now == expires_at`` is lapsed). The complement of :meth:`lock_held`
        for any owner. Inputs: now. Model: ``not LockState.held``."""
        p = _of(row)
        return f"({p}owner IS NULL OR {p}expires_at <= {now})"

    def fencing_token(self, owner: str, now: str, *, row: str = "") -> str:
        """The token an acquisition by ``owner`` leaves (a ``CASE``): the same
        one when ``owner`` already holds the lock (a refresh), the next one
        otherwise, so tokens strictly increase across holders. Inputs: owner,
        now. Model: LockModel.try_lock."""
        p = _of(row)
        held = self.lock_held(owner, None, now, row=row)
        return f"CASE WHEN {held} THEN {p}token ELSE {p}token + 1 END"

    def lock_free_since(self, cutoff: str) -> str:
        """Nobody has held the lock since ``cutoff``: released at or before it
        (a release sets ``expires_at`` to its own time) or lapsed at or before
        it. What housekeeping prunes, with ``cutoff`` a grace period ago; a held
        lock never qualifies. Inputs: cutoff. Model: LockState.free_since."""
        return f"expires_at <= {cutoff}"

    # The meta row holding the highest fencing token housekeeping has pruned.
    TOKEN_FLOOR_KEY: Final = "lock_token_floor"

    def new_lock_token(self, meta: str) -> str:
        """The fencing token of a name's first row (a scalar subquery): one above
        the floor, the highest token housekeeping ever pruned, so a name pruned
        and taken again never repeats or lowers its token. No inputs.
        Model: LockModel.try_lock."""
        return (
            f"(SELECT COALESCE(MAX({self.spelling.integer('value')}), 0) + 1 FROM {meta} "
            f"WHERE key = '{self.TOKEN_FLOOR_KEY}')"
        )

    # -- streams -------------------------------------------------------------
    def keep_higher_offset(self, *, row: str = "") -> str:
        """A consumer's saved offset never moves back: what follows ``ON
        CONFLICT (stream, consumer) DO UPDATE SET`` (on an engine whose every
        update writes a row version, with a ``WHERE`` that skips the write
        when the stored offset is already at or past the new one). No
        inputs. Model: StreamModel.save_offset."""
        s = self.spelling
        old, new = f'{_of(row)}"offset"', f'{s.excluded}."offset"'
        return f'"offset" = {s.larger(old, new)}{s.update_only_if(f"{new} > {old}")}'

    def protected_floor(self, offsets: str, stream: str) -> str:
        """The lowest saved offset among ``stream``'s protected consumers (a
        scalar subquery; NULL: none): retention never drops an event above it,
        and a protected consumer that never saved holds everything (offset 0).
        Inputs: stream. Model: StreamModel.prune."""
        return f'(SELECT MIN("offset") FROM {offsets} WHERE stream = {stream} AND keep)'

    def within_age(self, cutoff: str) -> str:
        """An event created at or after ``cutoff`` (now less the stream's max
        age): young enough to keep. Inputs: cutoff. Model: StreamModel.prune."""
        return f"created_at >= {cutoff}"

    # -- schedules -----------------------------------------------------------
    # The schedule is not paused: it fires, and the scheduler sleeps until its
    # next fire time. A paused one fires nothing until resumed. Model:
    # ScheduleState.running.
    SCHEDULE_RUNNING: Final = "NOT paused"

    def schedule_due(self, now: str) -> str:
        """The schedule fires: it is running and its next fire time has come.
        Inputs: now. Model: ScheduleState.due."""
        return f"{self.SCHEDULE_RUNNING} AND next_fire_at <= {now}"

    def fire_time_unchanged(self, fire_at: str) -> str:
        """The scheduler's compare-and-set: the row still holds the fire time
        this ticker read, so of the tickers that read it exactly one moves it on
        and enqueues its job. Inputs: fire_at. Core: schedule.tick."""
        return f"next_fire_at = {fire_at}"

    def keep_fire_time(self, *, row: str = "") -> str:
        """The fire time a re-registration leaves (a ``CASE``, for ``ON CONFLICT
        (name) DO UPDATE``): the pending one when the expression is the same
        in the same time zone (every process registers at start-up; none may
        skip or repeat a fire), the new one otherwise. No inputs."""
        p, new = _of(row), self.spelling.excluded
        return (
            f"CASE WHEN {p}expression = {new}.expression AND {p}tz = {new}.tz "
            f"THEN {p}next_fire_at "
            f"ELSE {new}.next_fire_at END"
        )
