"""Job dependencies: enqueueing a job that waits for others, and what a
finish does to the jobs waiting for it (docs/workflows.md).

The rules, each decided here or in the statement that acts on it:

- A job with dependencies waits (the waiting table) until every one of them
  finished; it is never in the jobs table before, so no claim can take it.
- A dependency's finish is counted once per edge, in the transaction that
  finishes it. An ack is counted by reading the uncounted edges
  (``uncounted_dependents``): a job is acked once, and an acked job never
  comes back. A death or cancel marks the edges counted as it counts them
  (``count_finished``): a dead job may be requeued and finish again, and
  that finish must not count twice.
- A waiting job whose count of unfinished dependencies reaches 0 moves into
  jobs in that same transaction (``release_waiting`` moves only a job whose
  count is at most the finishes being counted, so it moves once).
- A dependency that dies or is cancelled cancels each job waiting for it
  (``on_failure`` cancel, the default), level by level until nothing more
  waits on what was cancelled; a job whose policy is ``run`` counts the
  failed dependency as finished instead.
- Every dependency id must name a job that exists when the dependent is
  enqueued (live, waiting, or finished and recorded), so no cycle can be
  built: a job can only wait for jobs older than itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..dialect import Dialect
from ..plan import Plan, Row, fetch_all, fetch_one, fetch_row, reads
from ..rows import _int, _opt_str, _str
from ..values.errors import InvalidArgument
from ..values.names import done_channel, queue_channel
from ..values.results import ON_FAILURE_CANCEL, ON_FAILURE_RUN
from ..values.types import NewJob
from .chunks import ENQUEUE_CHUNK


@dataclass(frozen=True, slots=True)
class Dependency:
    """Where a dependency of a job being enqueued stands: ``open`` (live or
    waiting), ``done`` (acked), or ``failed`` (dead or cancelled, with why)."""

    id: int
    status: str
    why: str | None = None


def dependency_standing(d: Dialect, dep_ids: Sequence[int]) -> Plan[list[Dependency]]:
    """Mark the live ones kept (their finish must settle the new job), hold
    the waiting ones, and find the others: every id must be somewhere, or
    ``InvalidArgument``.

    Each open one is held until commit against what would miss the new
    edge: a live one by its mark (an ack, a death, waits for it), a waiting
    one by ``hold_waiting`` (its release, its cancel). Live first, then
    waiting, then live again: a waiting job released in between is live by
    the second look (never unknown), and no lock on a waiting row is held
    while waiting for a live one's."""
    standing: dict[int, Dependency] = {}
    rest = list(dep_ids)
    for look in (d.keep_jobs, d.hold_waiting, d.keep_jobs):
        if not rest:
            break
        for row in (yield from fetch_all(look(rest))):
            standing[_int(row[0], "id")] = Dependency(_int(row[0], "id"), "open")
        rest = [job_id for job_id in rest if job_id not in standing]
    if rest:
        for row in (yield from fetch_all(d.dependency_states(rest))):
            job_id, kind = _int(row[0], "id"), _str(row[1], "kind")
            detail = _opt_str(row[2], "detail")
            if kind == "waiting":
                standing[job_id] = Dependency(job_id, "open")
            elif kind == "acked":
                standing[job_id] = Dependency(job_id, "done")
            elif kind == "dead":
                standing[job_id] = Dependency(job_id, "failed", f"job {job_id} died ({detail})")
            else:
                standing[job_id] = Dependency(job_id, "failed", f"job {job_id} was cancelled")
    unknown = [job_id for job_id in dep_ids if job_id not in standing]
    if unknown:
        raise InvalidArgument(
            f"depends_on names job {unknown[0]}, which does not exist: a dependency must be "
            "live, waiting, or finished and still recorded (a job that finished is recorded "
            "when something depended on it, awaited it or returned a result, or when its "
            "queue keeps history)"
        )
    return [standing[job_id] for job_id in dep_ids]


def enqueue_dependent(
    d: Dialect,
    jobs: list[NewJob],
    dep_ids: Sequence[int],
    on_failure: int,
    origin: str,
    now_us: int,
) -> Plan[list[int]]:
    """Enqueue ``jobs``, each waiting for every job of ``dep_ids``; the ids
    given out, in the jobs' order. A job whose dependencies all finished
    already goes straight into jobs (kept); with a dependency dead or
    cancelled and the cancel policy, it is born cancelled (recorded in
    history with why); otherwise it waits for the unfinished ones."""
    standing = yield from dependency_standing(d, dep_ids)
    open_ = sum(1 for s in standing if s.status == "open")
    failed = [s for s in standing if s.status == "failed"]
    born_cancelled = bool(failed) and on_failure == ON_FAILURE_CANCEL
    ids: list[int] = []
    if open_ == 0 and not born_cancelled:
        for start in range(0, len(jobs), ENQUEUE_CHUNK):
            rows = yield from fetch_all(d.enqueue_many(jobs[start : start + ENQUEUE_CHUNK], now_us))
            ids.extend(sorted(_int(r[0], "id") for r in rows))
        yield from fetch_all(d.keep_jobs(ids))
        for queue in dict.fromkeys(job.queue for job in jobs):
            yield d.notify(queue_channel(queue), origin, now_us)
    else:
        for start in range(0, len(jobs), ENQUEUE_CHUNK):
            chunk = jobs[start : start + ENQUEUE_CHUNK]
            chunk_ids = yield from allocate_ids(d, len(chunk))
            yield d.enqueue_waiting(chunk, chunk_ids, open_, on_failure, now_us)
            ids.extend(chunk_ids)
    # An edge whose dependency finished already is counted at once.
    edges = [(s.id, job_id, s.status != "open") for job_id in ids for s in standing]
    for start in range(0, len(edges), ENQUEUE_CHUNK):
        yield d.add_dependencies(edges[start : start + ENQUEUE_CHUNK])
    if born_cancelled:
        # Through the waiting table, in this transaction (nobody saw them
        # there): recorded like any job a failed dependency cancels.
        why = f"dependency {failed[0].why}"
        for start in range(0, len(ids), ENQUEUE_CHUNK):
            yield from cancel_waiting_jobs(d, ids[start : start + ENQUEUE_CHUNK], why, now_us)
    return ids


def allocate_ids(d: Dialect, n: int) -> Plan[list[int]]:
    statements = d.allocate_job_ids(n)
    for statement in statements[:-1]:
        yield statement
    rows = yield from fetch_all(statements[-1])
    return sorted(_int(r[0], "id") for r in rows)


def cancel_waiting_jobs(
    d: Dialect, job_ids: Sequence[int], why: str | None, now_us: int
) -> Plan[list[Row]]:
    """Record the waiting jobs of ``job_ids`` as cancelled (``why`` their
    last error); the rows (id, queue) of those that were waiting."""
    first, *rest = d.cancel_waiting(job_ids, why, now_us)
    rows = yield from fetch_all(first)
    if rows:
        for statement in rest:
            yield statement
    return rows


@dataclass(frozen=True, slots=True)
class Settled:
    """What a finish did to the jobs waiting for it: those released into
    jobs and those cancelled (each (id, queue))."""

    released: list[tuple[int, str]]
    cancelled: list[tuple[int, str]]


def settle_dependents(
    d: Dialect,
    succeeded: Sequence[int],
    failed: Sequence[tuple[int, str]],
    origin: str,
    now_us: int,
) -> Plan[Settled]:
    """Count the finish of ``succeeded`` jobs and of ``failed`` ones ((id,
    why): dead or cancelled) for the jobs waiting on them: release those
    whose last dependency this was, cancel (or, by their policy, count as
    finished) those a failure reaches, level by level. Wakes the queues of
    the released jobs, here and in other processes."""
    released: list[tuple[int, str]] = []
    cancelled: list[tuple[int, str]] = []
    done = list(succeeded)
    failures = list(failed)
    while done or failures:
        finished_now: Counter[int] = Counter()
        if done:
            for row in (yield from fetch_all(d.uncounted_dependents(done))):
                finished_now[_int(row[0], "job_id")] += 1
        next_failures: list[tuple[int, str]] = []
        if failures:
            why_by_dep = dict(failures)
            why_of: dict[int, str] = {}
            hit: Counter[int] = Counter()
            for row in (yield from fetch_all(d.count_finished(list(why_by_dep)))):
                job_id, dep_id = _int(row[0], "job_id"), _int(row[1], "dep_id")
                hit[job_id] += 1
                why_of.setdefault(job_id, why_by_dep[dep_id])
            if hit:
                policies = yield from fetch_all(d.waiting_policies(list(hit)))
                to_cancel: dict[str, list[int]] = {}
                for row in policies:
                    job_id, policy = _int(row[0], "id"), _int(row[1], "on_failure")
                    if policy == ON_FAILURE_RUN:
                        finished_now[job_id] += hit[job_id]
                    else:
                        to_cancel.setdefault(why_of[job_id], []).append(job_id)
                for why, job_ids in to_cancel.items():
                    rows = yield from cancel_waiting_jobs(d, sorted(job_ids), why, now_us)
                    for row in rows:
                        job_id, queue = _int(row[0], "id"), _str(row[1], "queue")
                        cancelled.append((job_id, queue))
                        next_failures.append((job_id, f"dependency job {job_id} was cancelled"))
        moved = yield from _count_off(d, finished_now, now_us)
        released.extend(moved)
        for queue in dict.fromkeys(queue for _, queue in moved):
            yield d.notify(queue_channel(queue), origin, now_us)
        done = []
        failures = next_failures
    for queue in dict.fromkeys(queue for _, queue in cancelled):
        yield d.notify(done_channel(queue), origin, now_us)
    return Settled(released, cancelled)


def _count_off(d: Dialect, finished: Counter[int], now_us: int) -> Plan[list[tuple[int, str]]]:
    """Take each waiting job's newly finished dependencies off its count, one
    round per distinct number of them; the jobs released ((id, queue)).

    Each round first moves the jobs these finishes complete (their count is
    at most the number finishing) straight into jobs, then takes the number
    off the others' counts: a fan-out's dependents are released without a
    count written first. A count another transaction lowered meanwhile
    (Postgres: the decrement waits for its row, then reads the count that
    committed) may reach 0 in the decrement: those move in a last release."""
    by_count: dict[int, list[int]] = {}
    for job_id, n in finished.items():
        by_count.setdefault(n, []).append(job_id)
    moved: list[tuple[int, str]] = []
    ready: list[int] = []
    for n, job_ids in sorted(by_count.items()):
        for start in range(0, len(job_ids), ENQUEUE_CHUNK):
            chunk = job_ids[start : start + ENQUEUE_CHUNK]
            now_moved = yield from _release(d, chunk, now_us, n)
            moved.extend(now_moved)
            released = {job_id for job_id, _ in now_moved}
            rest = [job_id for job_id in chunk if job_id not in released]
            if rest:
                rows = yield from fetch_all(d.decrement_waiting(rest, n))
                ready.extend(_int(r[0], "id") for r in rows if _int(r[1], "remaining") <= 0)
    if ready:
        moved.extend((yield from _release(d, sorted(ready), now_us, 0)))
    return moved


def _release(
    d: Dialect, job_ids: Sequence[int], now_us: int, counting: int
) -> Plan[list[tuple[int, str]]]:
    first, *rest = d.release_waiting(sorted(job_ids), now_us, counting)
    rows = yield from fetch_all(first)
    if rows:
        for statement in rest:
            yield statement
    return [(_int(r[0], "id"), _str(r[1], "queue")) for r in rows]


@dataclass(frozen=True, slots=True)
class JobEnd:
    """Where a job stands, as a caller awaiting it sees it: ``where`` is
    ``live``, ``waiting``, ``acked`` (``result``: its JSON), ``cancelled``,
    ``dead`` (``reason``), ``gone`` (it finished and kept no record: its
    handler returned nothing) or ``unknown`` (no job ever had the id)."""

    where: str
    queue: str | None = None
    result: str | None = None
    reason: str | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.where not in ("live", "waiting")


@reads
def job_end(d: Dialect, job_id: int) -> Plan[JobEnd]:
    """Where job ``job_id`` stands (one snapshot)."""
    row = yield from fetch_one(d.job_outcome(job_id))
    if row is None:
        (high,) = yield from fetch_row(d.job_id_high())
        return JobEnd("gone" if job_id <= _int(high, "high") else "unknown")
    where, detail, queue = _str(row[0], "where"), row[1], _str(row[4], "queue")
    if where == "history":
        outcome = _str(detail, "outcome")
        return JobEnd(outcome, queue, _opt_str(row[2], "result"), _opt_str(row[3], "error"),
                      _opt_str(row[3], "error"))  # fmt: skip
    if where == "dead":
        return JobEnd("dead", queue, None, _str(detail, "reason"), _opt_str(row[3], "error"))
    return JobEnd(where, queue)


def await_job(d: Dialect, job_id: int) -> Plan[bool]:
    """Mark the live job kept, so that its finish is recorded (and wakes
    whoever awaits it); whether it was live."""
    rows = yield from fetch_all(d.keep_jobs([job_id]))
    return bool(rows)


@dataclass(frozen=True, slots=True)
class Finished:
    """A dependency as its dependent reads it: its outcome (None: not
    finished, or not recorded), its result and the headers its finish
    recorded (JSON text each, or None)."""

    id: int
    outcome: str | None
    result: str | None
    headers: str | None


@reads
def dependency_results(d: Dialect, job_id: int) -> Plan[list[Finished]]:
    """Each of the job's dependencies, as it finished."""
    rows = yield from fetch_all(d.dependency_results(job_id))
    return [
        Finished(_int(r[0], "dep_id"), _opt_str(r[1], "outcome"), _opt_str(r[2], "result"),
                 _opt_str(r[3], "headers"))
        for r in rows
    ]  # fmt: skip


__all__ = [
    "Dependency",
    "Finished",
    "JobEnd",
    "Settled",
    "await_job",
    "dependency_results",
    "dependency_standing",
    "enqueue_dependent",
    "job_end",
    "settle_dependents",
]
