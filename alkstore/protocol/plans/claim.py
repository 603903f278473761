"""Claiming and settling jobs: claim, ack, retry, fail, heartbeat, sweep.

Ownership is the pair (worker, claim number) while the claim has not lapsed. Every
settling plan checks it in the same transaction as the change, so a worker
whose claim expired (or whose job was reclaimed, acked or cancelled) changes
nothing and gets ``False``.

A finish that settles other jobs (their release or cancel) wakes their
queues; ``origin`` is the finishing store's (``StoreCore.origin``), so its
own watcher skips the echo of a wake it delivered at commit ("" for none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..dialect import STATE_PENDING, Dialect
from ..plan import Plan, Row, Statement, fetch_all, fetch_count, fetch_one, fetch_row, last, reads
from ..rows import _bool, _int, _opt_int, _shape, job_record, queue_limits
from ..values import generation
from ..values.attempts import capped_error, capped_trace
from ..values.backoff import Backoff
from ..values.names import done_channel
from ..values.outcomes import Outcome
from ..values.timeconv import MAX_INSTANT_US, held_until_us, until_us
from ..values.types import DeadReason, JobRecord, QueueLimits
from . import dependencies
from .queues import check_limit, kept_until, moved, moved_rows, retention


def claim(
    d: Dialect, queue: str, worker: str, n: int, now_us: int, visibility_us: int
) -> Plan[list[JobRecord]]:
    """Take up to ``n`` due jobs: priority desc, then run_at, then id."""
    jobs, _, _ = yield from claim_jobs(d, queue, worker, n, now_us, visibility_us, hint=False)
    return jobs


def claim_jobs(
    d: Dialect,
    queue: str,
    worker: str,
    n: int,
    now_us: int,
    visibility_us: int,
    *,
    hint: bool = True,
) -> Plan[tuple[list[JobRecord], int | None, bool]]:
    """``claim``; when a rate limit kept the claim short, the instant it
    next admits a claim (None: no rate held it back), so a worker sleeps
    until then rather than waiting for a wake that no enqueue will send
    (``hint=False`` skips reading that instant: a caller that would drop
    it); and whether the queue turned out limited (the plain claim found it
    closed and its limits row was there: a paused queue's is not)."""
    until = held_until_us(now_us, visibility_us)
    n = check_limit(n, "n")
    known = generation.CLAIM_GENERATION
    for statement in d.claim_prelude():
        yield statement
    rows = yield from fetch_all(d.claim(queue, worker, n, now_us, until, known))
    opens: int | None = None
    limited = False
    if not rows:
        # Nothing: an empty (or paused) queue, or a limited one, which the
        # plain claim leaves alone. Only then are the queue's limits read,
        # so a queue without limits pays nothing for them while it has work.
        row = yield from fetch_one(d.claim_limit(queue))
        if row is not None:
            limited = True
            limits = queue_limits(row)
            rows, in_window = yield from _claim_limited(
                d, queue, worker, n, now_us, until, limits, known
            )
            if hint and len(rows) < n:
                opens = yield from _rate_opens(d, queue, now_us, limits, in_window)
    if not rows:
        # Still nothing: maybe because a newer release's rules closed every
        # claim (the statements above take nothing then). Say so, rather
        # than let a worker idle on work it may no longer do.
        generation.check(generation.stored((yield from fetch_one(d.claim_generation()))))
    jobs = [job_record(r) for r in rows]
    # RETURNING does not promise an order; restore the claim order.
    jobs.sort(key=claim_order)
    return jobs, opens, limited


def claim_order(job: JobRecord) -> tuple[int, int, int]:
    return -job.priority, job.run_at_us, job.id


def _claim_limited(
    d: Dialect,
    queue: str,
    worker: str,
    n: int,
    now_us: int,
    until_us: int,
    limits: QueueLimits,
    known: int,
) -> Plan[tuple[list[Row], int | None]]:
    """Up to ``n`` jobs of a limited queue, one statement each, in claim
    order among the jobs whose key has room (concurrency) and whose key is
    under its rate: each statement sees the claims of the ones before it,
    so one claim never takes more of a key than its room. The queue's own
    rate is counted once and caps ``n``. Every claim is logged for the
    rates it counts against. The fairness rule: a job whose key is full (or
    over its rate) is passed over, not moved, so it is the first of its key
    taken once the key has room. Returns the rows, and the claims the
    queue's window holds when its rate is what stopped the claim."""
    rate, key_rate = limits.rate, limits.rate_per_key
    if rate is not None or key_rate is not None:
        longest = max(r.period_us for r in (rate, key_rate) if r is not None)
        yield d.prune_claim_log(queue, now_us - longest)
    room = used = n
    if rate is not None:
        used = yield from _count(d.claims_in_window(queue, now_us - rate.period_us))
        room = min(n, rate.limit - used)
    key_window = None
    if key_rate is not None:
        key_window = (key_rate.limit, now_us - key_rate.period_us)
    rows: list[Row] = []
    for _ in range(room):
        got = yield from fetch_all(
            d.claim_limited(
                queue, worker, now_us, until_us, limits.concurrency_per_key, key_window, known
            )
        )
        if not got:
            break
        rows.extend(got)
        if rate is not None:
            yield d.log_queue_claim(queue, now_us)
        if key_rate is not None:
            yield d.log_key_claim(int(got[0][0]), now_us)
    # When the queue's rate is what stopped the claim: the claims its window
    # now holds (None: the rate did not stop it).
    full = rate is not None and len(rows) >= room
    return rows, used + len(rows) if full else None


def _count(statement: Statement) -> Plan[int]:
    (count,) = yield from fetch_row(statement)
    return int(count)


def _rate_opens(
    d: Dialect, queue: str, now_us: int, limits: QueueLimits, in_window: int | None
) -> Plan[int | None]:
    """When a claim held short by a rate may take more: the queue's rate,
    when it is what stopped the claim (``in_window``: the claims its window
    holds), opens when enough of them age out; a key's rate when its oldest
    logged claim does (the earliest any key may have room: a worker woken
    then may find its jobs' keys still full and sleeps again, never spins).
    None: no rate held it."""
    rate, key_rate = limits.rate, limits.rate_per_key
    if rate is not None and in_window is not None:
        skip = max(0, in_window - rate.limit)
        row = yield from fetch_one(d.window_opens(queue, now_us - rate.period_us, skip))
        return None if row is None else int(row[0]) + rate.period_us
    if key_rate is not None:
        row = yield from fetch_one(d.first_key_claim(queue, now_us - key_rate.period_us))
        if row is not None and row[0] is not None:
            return int(row[0]) + key_rate.period_us
    return None


@reads
def next_due(d: Dialect, queue: str, *, final: bool = False) -> Plan[int | None]:
    """When the next live job of ``queue`` becomes claimable (None: no job).
    ``final``: the read ends its plan (so its COMMIT may ride with it)."""
    statement = d.next_due(queue)
    row = yield from fetch_one(last(statement) if final else statement)
    return None if row is None or row[0] is None else int(row[0])


def release(d: Dialect, job: JobRecord, now_us: int, *, refund: bool) -> Plan[bool]:
    """Hand a claimed job back, due at once; ``refund`` returns the attempt.

    A worker shutting down releases what it has not finished, so nothing waits
    out a visibility timeout because its worker was stopped on purpose.
    """
    count = yield from fetch_count(
        d.release_claim(job.id, job.claimed_by, job.claims, now_us, int(refund))
    )
    return bool(count)


def ack(
    d: Dialect, job: JobRecord, now_us: int, *, origin: str = "", result: str | None = None
) -> Plan[bool]:
    """Done: delete the job, or move it into history when its queue kept
    history at its claim (``JobRecord.history_us``), in one transaction. A
    kept job (one with dependencies or dependents, or awaited), or one with
    a ``result`` (JSON), moves into history with its result instead, and its
    dependents are settled (``dependencies.settle_dependents``)."""
    if result is None and not job.kept:
        if job.history_us is None:
            count = yield from fetch_count(d.ack(job.id, job.claimed_by, job.claims, now_us))
            if count and job.claims > 1:
                yield d.forget_attempts([job.id])
        else:
            moves = d.ack_history(job.id, job.claimed_by, job.claims, now_us,
                                  kept_until(now_us, job.history_us))  # fmt: skip
            count = yield from moved(moves)
        if count:
            return True
    items = [(job.id, job.claims, result, None)]
    acked = yield from ack_kept(d, job.claimed_by, items, origin, now_us)
    return bool(acked)


def ack_batch(
    d: Dialect, queue: str, job_ids: Sequence[int], worker: str, now_us: int, *, origin: str = ""
) -> Plan[int]:
    """Ack the listed jobs ``worker`` still owns; they move into history when
    the queue keeps it now (the batch form carries no claims: the setting is
    read in the same transaction). Kept jobs move with their records and
    settle their dependents."""
    if not job_ids:
        return 0
    history_us, _, _ = yield from retention(d, queue)
    if history_us is None:
        count = yield from fetch_count(d.ack_batch(queue, job_ids, worker, now_us))
        if count:
            # Without claim numbers, any of them may have had attempts.
            yield d.forget_attempts(job_ids)
    else:
        moves = d.ack_batch_history(queue, job_ids, worker, now_us, kept_until(now_us, history_us))
        count = yield from moved(moves)
    if count < len(job_ids):
        # Some were kept (or not this worker's): the kept ones move now.
        count += len((yield from ack_kept(
            d, worker, [(job_id, None, None, None) for job_id in job_ids], origin, now_us,
            queue=queue,
        )))  # fmt: skip
    return int(count)


def ack_many(
    d: Dialect,
    worker: str,
    jobs: Sequence[JobRecord],
    now_us: int,
    *,
    origin: str = "",
    results: Mapping[int, str] | None = None,
    headers: Mapping[int, str] | None = None,
) -> Plan[set[int]]:
    """Ack every job ``worker`` still owns by its claim (number); returns the
    ids acked (the others had lost their claims and are left alone). Jobs
    whose queue kept history at their claim move into history: one statement
    (or move) per retention among them, one statement in all when none does.
    A job with a result (``results``: id to JSON) or kept (dependencies,
    dependents, awaited) moves into history with its result (and the
    ``headers`` its finish records, by id: its run's trace context) and
    settles its dependents: only those take the statements beyond the first."""
    if not jobs:
        return set()
    results = results or {}
    # A job known kept at its claim goes straight to the kept path.
    plain = [j for j in jobs if j.id not in results and not j.kept]
    acked: set[int] = set()
    if plain and all(j.history_us is None for j in plain):  # the common case, the hot path
        rows = yield from fetch_all(
            d.ack_claims(worker, [(j.id, j.claims) for j in plain], now_us)
        )
        acked = {int(r[0]) for r in rows}
        yield from _forget_attempts(d, plain, acked)
    elif plain:
        groups: dict[int | None, list[tuple[int, int]]] = {}
        for j in plain:
            groups.setdefault(j.history_us, []).append((j.id, j.claims))
        for history_us, pairs in groups.items():
            if history_us is None:
                rows = yield from fetch_all(d.ack_claims(worker, pairs, now_us))
                yield from _forget_attempts(d, plain, {int(r[0]) for r in rows})
            else:
                rows = yield from moved_rows(
                    d.ack_claims_history(worker, pairs, now_us, kept_until(now_us, history_us))
                )
            acked.update(int(r[0]) for r in rows)
    headers = headers or {}
    rest = [(j.id, j.claims, results.get(j.id), headers.get(j.id)) for j in jobs
            if j.id not in acked]  # fmt: skip
    if rest:
        acked.update((yield from ack_kept(d, worker, rest, origin, now_us)))
    return acked


def _forget_attempts(d: Dialect, jobs: Sequence[JobRecord], acked: set[int]) -> Plan[None]:
    """Forget the attempt rows of the ``acked`` among ``jobs`` that may have
    some (a first claim has none, so the hot path adds no statement): their
    records are gone."""
    again = [j.id for j in jobs if j.claims > 1 and j.id in acked]
    if again:
        yield d.forget_attempts(again)


def ack_kept(
    d: Dialect,
    worker: str,
    items: Sequence[tuple[int, int | None, str | None, str | None]],
    origin: str,
    now_us: int,
    *,
    queue: str | None = None,
) -> Plan[list[int]]:
    """Move the owned jobs of ``items`` (id, claim number or None, result
    JSON, headers JSON to record or None) into history as acked, with their
    results; settle their dependents and wake whoever awaits them. The ids
    moved (of ``queue`` only, when given)."""
    first, *rest = d.ack_kept(worker, items, now_us, queue)
    rows = yield from fetch_all(first)
    if rows:
        for statement in rest:
            yield statement
    moved_ = [(int(r[0]), str(r[1])) for r in rows]
    if moved_:
        yield from dependencies.settle_dependents(
            d, [job_id for job_id, _ in moved_], [], origin, now_us
        )
        for q in dict.fromkeys(q for _, q in moved_):
            yield d.notify(done_channel(q), origin, now_us)
    return [job_id for job_id, _ in moved_]


def failed_kept(
    d: Dialect, job_id: int, queue: str, reason: str, origin: str, now_us: int
) -> Plan[None]:
    """A kept job died (``reason``): cancel (or count as finished, by their
    policy) what waits for it, and wake whoever awaits it."""
    yield from dependencies.settle_dependents(
        d, [], [(job_id, f"dependency job {job_id} died ({reason})")], origin, now_us
    )
    yield d.notify(done_channel(queue), origin, now_us)


def heartbeat_many(
    d: Dialect, jobs: Sequence[JobRecord], now_us: int, extend_us: int
) -> Plan[list[bool]]:
    """Extend each job's claim to ``now + extend`` while owned; whether it was."""
    owned: list[bool] = []
    for job in jobs:
        count = yield from fetch_count(
            d.extend_claim(job.id, job.claimed_by, job.claims, now_us, now_us + extend_us)
        )
        owned.append(bool(count))
    return owned


def heartbeat(d: Dialect, job: JobRecord, now_us: int, extend_us: int) -> Plan[bool]:
    until = until_us(now_us, extend_us, "extend")
    count = yield from fetch_count(
        d.extend_claim(job.id, job.claimed_by, job.claims, now_us, until)
    )
    return bool(count)


def storable_error(error: str | None) -> str | None:
    """An error message as every engine stores it, the same on each.

    Postgres ``text`` cannot hold NUL and both engines need valid UTF-8 (a
    lone surrogate made SQLite's driver raise ``UnicodeEncodeError`` from a
    ``retry`` or ``fail``). A message is diagnostic, so those characters are
    replaced (NUL by U+FFFD, an unencodable character by ``?``) rather than
    failing the call that records it, identically on every engine.
    """
    if error is None:
        return None
    if "\x00" in error:
        error = error.replace("\x00", "\ufffd")
    try:
        error.encode("utf-8")
    except UnicodeEncodeError:
        error = error.encode("utf-8", "replace").decode("utf-8")
    return error


def retry_decision(attempts: int, max_attempts: int) -> DeadReason | None:
    """A failed attempt either goes back to pending or, when spent, to dead."""
    return "max_attempts" if attempts >= max_attempts else None


def retry(
    d: Dialect,
    job: JobRecord,
    now_us: int,
    *,
    delay_us: int | None,
    backoff: Backoff,
    draw: float,
    error: str | None,
    origin: str = "",
    trace: str | None = None,
    started_us: int | None = None,
) -> Plan[Outcome | None]:
    """A failed attempt of an owned job: back to pending after ``delay_us``
    (None: the backoff's), or to the dead letters when its attempts are
    spent. Returns which (``Outcome.RETRIED`` or ``Outcome.DEAD``: the
    verdict, taken here once, from the row read while owned), or None when
    the claim no longer owns the job. The attempt is recorded either way
    (``error``, its stack ``trace``, when it ``started``)."""
    error = storable_error(error)
    if delay_us is not None:
        until_us(now_us, delay_us, "delay")  # as for enqueue's delay: refused past 9999
    row = yield from fetch_one(d.owned(job.id, job.claimed_by, job.claims, now_us))
    if row is None:
        return None
    attempts, max_attempts, kept = _owned(row)
    reason = retry_decision(attempts, max_attempts)
    yield from _record(d, job.id, reason or "retried", started_us, error, trace, now_us)
    if reason is not None:
        yield from _bury(d, job.id, reason, error, now_us)
        if kept:
            yield from failed_kept(d, job.id, job.queue, reason, origin, now_us)
        return Outcome.DEAD
    if delay_us is None:
        # The backoff's own delay (capped by its cap) is capped like a claim.
        run_at = min(now_us + backoff.delay_us(attempts, draw), MAX_INSTANT_US)
    else:
        run_at = now_us + delay_us
    yield d.reschedule(job.id, run_at, error)
    return Outcome.RETRIED


def _record(
    d: Dialect,
    job_id: int,
    outcome: str,
    started_us: int | None,
    error: str | None,
    trace: str | None,
    now_us: int,
) -> Plan[None]:
    """Record how the live job's attempt ended (before its row changes)."""
    trace = capped_trace(storable_error(trace))
    for statement in d.record_attempt(
        job_id, outcome, started_us, capped_error(error), trace, now_us
    ):
        yield statement


def _owned(row: Row) -> tuple[int, int, bool]:
    """An ``owned`` row: attempts, max_attempts, whether the job is kept
    (dependents or awaiters); a malformed one raises ``CodecError``."""
    _shape(row, 3, "owned job")
    return _int(row[0], "attempts"), _int(row[1], "max_attempts"), bool(row[2])


def fail(
    d: Dialect,
    job: JobRecord,
    now_us: int,
    error: str | None,
    *,
    origin: str = "",
    trace: str | None = None,
    started_us: int | None = None,
) -> Plan[bool]:
    """Straight to the dead letters (reason ``failed``), the attempt recorded;
    False when the claim no longer owns the job."""
    error = storable_error(error)
    row = yield from fetch_one(d.owned(job.id, job.claimed_by, job.claims, now_us))
    if row is None:
        return False
    kept = _owned(row)[2]
    yield from _record(d, job.id, "failed", started_us, error, trace, now_us)
    yield from _bury(d, job.id, "failed", error, now_us)
    if kept:
        yield from failed_kept(d, job.id, job.queue, "failed", origin, now_us)
    return True


@dataclass(frozen=True, slots=True)
class SweepCandidate:
    id: int
    state: int
    visible_at_us: int
    expires_at_us: int | None
    attempts: int
    max_attempts: int
    # Its death settles what depends on it (and wakes whoever awaits it).
    kept: bool = False


def sweep_candidate(row: Row) -> SweepCandidate:
    """A ``sweep_candidates`` row; a malformed one raises ``CodecError``."""
    _shape(row, 7, "sweep candidate")
    return SweepCandidate(
        id=_int(row[0], "id"),
        state=_int(row[1], "state"),
        visible_at_us=_int(row[2], "visible_at"),
        expires_at_us=_opt_int(row[3], "expires_at"),
        attempts=_int(row[4], "attempts"),
        max_attempts=_int(row[5], "max_attempts"),
        kept=_bool(row[6], "keep"),
    )


def sweep_decision(c: SweepCandidate, now_us: int) -> DeadReason | None:
    """Which live jobs the sweep moves to dead, and why.

    - a deadline that passed before anyone claimed the job, or while its claim
      has lapsed, is ``expired`` (a running claim keeps its chance to ack);
    - a lapsed claim with no attempts left is ``claim_expired``: nobody may
      claim it again, so leaving it would strand it;
    - a pending job with no attempts left (released without a refund on its
      last attempt) is ``max_attempts``, for the same reason.
    """
    claim_live = c.state != STATE_PENDING and c.visible_at_us > now_us
    if c.expires_at_us is not None and c.expires_at_us <= now_us and not claim_live:
        return "expired"
    if not claim_live and c.attempts >= c.max_attempts:
        return "claim_expired" if c.state != STATE_PENDING else "max_attempts"
    return None


# Candidates a sweep looks at per transaction; a full page means sweep again.
SWEEP_PAGE = 1000


def sweep(
    d: Dialect, queue: str | None, now_us: int, limit: int = SWEEP_PAGE, *, origin: str = ""
) -> Plan[list[tuple[int, DeadReason]]]:
    """Bury what the sweep rules say, each death recorded as an attempt;
    returns the buried jobs and why. A kept job's burial settles what
    depends on it."""
    rows = yield from fetch_all(d.sweep_candidates(queue, now_us, limit))
    buried: list[tuple[int, DeadReason]] = []
    for row in rows:
        candidate = sweep_candidate(row)
        reason = sweep_decision(candidate, now_us)
        if reason is None:
            continue
        yield from _record(d, candidate.id, reason, None, None, None, now_us)
        yield from _bury(d, candidate.id, reason, None, now_us)
        if candidate.kept:
            job_queue = yield from _queue_of_dead(d, candidate.id)
            yield from failed_kept(d, candidate.id, job_queue, reason, origin, now_us)
        buried.append((candidate.id, reason))
    return sorted(buried)


def _bury(d: Dialect, job_id: int, reason: str, error: str | None, now_us: int) -> Plan[None]:
    """Move the job to the dead letters, its attempts (its death recorded
    already) to theirs."""
    for statement in d.bury(job_id, reason, error, now_us):
        yield statement
    yield d.place_attempts(job_id, buried=True)


def _queue_of_dead(d: Dialect, job_id: int) -> Plan[str]:
    row = yield from fetch_row(d.get_dead(None, job_id))
    return str(row[1])
