"""The reference model: queue, lock, stream and schedule semantics as plain in-memory data.

Tests drive an engine and this model with the same operations and require
identical answers, so every rule here is written out directly over dicts
instead of being derived from the plans in ``protocol/claim.py`` / ``queues.py``: a
shared mistake would otherwise be invisible. The model is deterministic and
self-contained: no IO, no clock (every operation takes ``now_us``), no
randomness (a retry without an explicit delay takes the backoff draw as an
argument). Only tests use it (``tests/property``, ``tests/engines/test_rules.py``);
the deterministic simulation (``alkstore/testing``) checks its own invariants.

Time is integer microseconds since the epoch, as everywhere in the core.

Vocabulary used below (it mirrors the columns of a live job row):

- ``visible_at``: the instant from which a job may be claimed. For a pending
  job it is when the job becomes due; for a processing job it is when the
  claim lapses (and the job becomes claimable again, if attempts remain).
- A claim is *live* while ``now < visible_at``; at ``now == visible_at`` it
  has lapsed. The same half-open rule holds for lock TTLs.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from alkstore.protocol.values import codec
from alkstore.protocol.values.attempts import ATTEMPTS_KEPT, Attempt, capped_error
from alkstore.protocol.values.backoff import Backoff
from alkstore.protocol.values.timeconv import MAX_INSTANT_US, maybe_datetime, to_datetime
from alkstore.protocol.values.types import (
    DeadReason,
    JobInfo,
    JobRecord,
    NewJob,
    QueueStats,
    StreamEvent,
)

LiveState = Literal["pending", "processing"]
ModelState = Literal["pending", "processing", "dead"]


class ModelError(ValueError):
    """The caller broke one of the model's own preconditions (not a contract error)."""


@dataclass(slots=True)
class LiveJob:
    """A job in the live table: pending (waiting to be claimed) or processing."""

    id: int
    queue: str
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    run_at_us: int
    created_at_us: int
    expires_at_us: int | None
    claimed_by: str | None
    visible_at_us: int
    state: LiveState
    last_error: str | None
    # Every claim of the job so far; never goes back (a release refunds an
    # attempt, not a claim). With the worker, it is the ownership token.
    claims: int = 0
    # The queue's history retention as of the job's last claim: what its ack
    # obeys (a change applies to jobs claimed after it).
    history_us: int | None = None
    # When its last claim was made: a failed attempt's start.
    claimed_at_us: int | None = None

    def claim_live(self, now_us: int) -> bool:
        return self.state == "processing" and self.visible_at_us > now_us

    def deadline_passed(self, now_us: int) -> bool:
        return self.expires_at_us is not None and self.expires_at_us <= now_us

    def claimable(self, now_us: int) -> bool:
        """Whether a claim at ``now_us`` may take this job.

        A processing job whose claim lapsed is claimable again (reclaim); a
        job with no attempts left or past its deadline never is.
        """
        return (
            self.attempts < self.max_attempts
            and self.visible_at_us <= now_us
            and not self.deadline_passed(now_us)
        )

    def owned_by(self, worker: str, claim: int, now_us: int) -> bool:
        """Ownership is the pair (worker, claim number) while the claim is live.

        Matching the claim number, not just the worker, means a handle from
        an earlier claim of the same worker is stale once the job was
        reclaimed (or released and claimed again), even by that worker.
        """
        return self.claim_live(now_us) and self.claimed_by == worker and self.claims == claim


@dataclass(slots=True)
class DeadJob:
    """A dead letter: the live row as it was when it died, plus why and when."""

    id: int
    queue: str
    payload: Any
    priority: int
    attempts: int
    max_attempts: int
    run_at_us: int
    created_at_us: int
    expires_at_us: int | None
    claimed_by: str | None
    last_error: str | None
    reason: DeadReason
    died_at_us: int
    claims: int = 0
    # When housekeeping removes it: its queue's dead retention after it died
    # (None: kept until purged).
    prune_at_us: int | None = None


Outcome = Literal["acked", "cancelled"]


@dataclass(slots=True)
class FinishedJob:
    """A job kept in history after it was acked or cancelled, until pruned."""

    id: int
    queue: str
    outcome: Outcome
    payload: Any
    attempts: int
    max_attempts: int
    run_at_us: int
    created_at_us: int
    finished_at_us: int
    worker: str | None
    last_error: str | None
    prune_at_us: int
    priority: int = 0

    def info(self) -> JobInfo:
        """As ``get_job`` reports a finished job while its queue keeps it."""
        return JobInfo(
            id=self.id, queue=self.queue, state=self.outcome, payload=copy.deepcopy(self.payload),
            priority=self.priority, attempts=self.attempts, max_attempts=self.max_attempts,
            run_at=to_datetime(self.run_at_us), created_at=to_datetime(self.created_at_us),
            expires_at=None, claimed_by=self.worker, claim_expires_at=None,
            last_error=self.last_error, finished_at=to_datetime(self.finished_at_us),
        )  # fmt: skip

    def row(self) -> tuple[Any, ...]:
        """As ``history_rows`` reads it from an engine (see ``tests/history.py``)."""
        return (
            self.id, self.queue, self.outcome, self.payload, self.attempts, self.max_attempts,
            self.run_at_us, self.created_at_us, self.finished_at_us, self.worker,
            self.last_error, self.prune_at_us,
        )  # fmt: skip


class QueueModel:
    """Every queue's jobs: a dict of live jobs and a dict of dead letters by id.

    A job id lives in at most one of the two dicts. Ids are issued in
    increasing order and never reused, also after a job is acked, cancelled
    or purged; a requeued dead letter keeps its id.

    A queue may keep finished jobs (``set_retention``): an ack or a cancel
    then moves the job into ``history`` (its claim's setting for an ack with
    a handle, the queue's current one for ``ack_batch`` and ``cancel``),
    where it stays until ``prune`` passes its prune time. A dead letter of a
    queue with a dead retention gets a prune time when it dies.
    """

    def __init__(self) -> None:
        self.jobs: dict[int, LiveJob] = {}
        self.dead: dict[int, DeadJob] = {}
        self.history: dict[int, FinishedJob] = {}
        # A job's attempts that ended without an ack, and its deaths, while
        # it has a record (ids are never reused, so a gone job's are unread).
        self.attempts: dict[int, list[Attempt]] = {}
        # queue -> (history_us, dead_us); absent: (None, None).
        self.retention: dict[str, tuple[int | None, int | None]] = {}
        self.last_id = 0

    # -- retention -------------------------------------------------------------
    def set_retention(self, queue: str, history_us: int | None, dead_us: int | None) -> None:
        self.retention[queue] = (history_us, dead_us)

    def _finish(self, job: LiveJob, outcome: Outcome, history_us: int | None, now_us: int) -> None:
        """The live row goes away; into history when ``history_us`` is set."""
        del self.jobs[job.id]
        if history_us is None:
            return
        self.history[job.id] = FinishedJob(
            id=job.id, queue=job.queue, outcome=outcome, payload=job.payload,
            attempts=job.attempts, max_attempts=job.max_attempts, run_at_us=job.run_at_us,
            created_at_us=job.created_at_us, finished_at_us=now_us, worker=job.claimed_by,
            last_error=job.last_error, prune_at_us=min(now_us + history_us, MAX_INSTANT_US),
            priority=job.priority,
        )  # fmt: skip

    def prune(self, now_us: int) -> tuple[int, int]:
        """Housekeeping: history rows and dead letters whose prune time has
        come (at or before ``now_us``) go; returns (history, dead) removed."""
        gone = [i for i, h in self.history.items() if h.prune_at_us <= now_us]
        for job_id in gone:
            del self.history[job_id]
        dead = [
            i for i, d in self.dead.items() if d.prune_at_us is not None and d.prune_at_us <= now_us
        ]
        for job_id in dead:
            del self.dead[job_id]
        return len(gone), len(dead)

    def history_rows(self) -> list[tuple[Any, ...]]:
        """Every history row, in id order."""
        return [self.history[i].row() for i in sorted(self.history)]

    # -- enqueue -------------------------------------------------------------
    def enqueue(
        self,
        queue: str,
        payload: Any,
        *,
        now_us: int,
        priority: int = 0,
        run_at_us: int | None = None,
        max_attempts: int = 3,
        expires_at_us: int | None = None,
        job_id: int | None = None,
    ) -> int:
        """Add a pending job due at ``run_at_us`` (default: now); returns its id.

        ``job_id`` lets a test adopt the id an engine issued (engines promise
        increasing ids, not a particular sequence); it must exceed every id
        seen so far, which is exactly the "never reused" rule.
        """
        if max_attempts < 1:
            raise ModelError("max_attempts must be >= 1")
        if job_id is None:
            job_id = self.last_id + 1
        elif job_id <= self.last_id:
            raise ModelError(f"job id {job_id} does not exceed the last id {self.last_id}")
        self.last_id = job_id
        due = now_us if run_at_us is None else run_at_us
        self.jobs[job_id] = LiveJob(
            id=job_id,
            queue=queue,
            payload=copy.deepcopy(payload),
            priority=priority,
            attempts=0,
            max_attempts=max_attempts,
            run_at_us=due,
            created_at_us=now_us,
            expires_at_us=expires_at_us,
            claimed_by=None,
            visible_at_us=due,
            state="pending",
            last_error=None,
        )
        return job_id

    def enqueue_new(self, job: NewJob, now_us: int, *, job_id: int | None = None) -> int:
        """``enqueue`` from the resolved form the API builds (``resolve_enqueue``)."""
        return self.enqueue(
            job.queue,
            codec.decode(job.payload_json),
            now_us=now_us,
            priority=job.priority,
            run_at_us=job.run_at_us,
            max_attempts=job.max_attempts,
            expires_at_us=job.expires_at_us,
            job_id=job_id,
        )

    # -- claiming ------------------------------------------------------------
    def claim(
        self, queue: str, worker: str, n: int, now_us: int, visibility_us: int
    ) -> list[JobRecord]:
        """Take up to ``n`` claimable jobs of ``queue`` for ``worker``.

        Which jobs: priority descending, then ``visible_at`` (when each became
        claimable), then id. For a never-claimed job ``visible_at`` is its
        ``run_at``; for a reclaimed or released job it is when its claim
        lapsed or was handed back.

        The batch is handed over sorted by priority descending, then
        ``run_at``, then id (the order the contract names), which differs
        from the selection order only for reclaimed or released jobs.
        """
        if n < 1:
            raise ModelError("n must be >= 1")
        candidates = [j for j in self.jobs.values() if j.queue == queue and j.claimable(now_us)]
        candidates.sort(key=lambda j: (-j.priority, j.visible_at_us, j.id))
        taken = candidates[:n]
        for job in taken:
            job.state = "processing"
            job.attempts += 1
            job.claims += 1
            job.claimed_by = worker
            # run_at records when the job last became due (for a reclaimed
            # job, when its previous claim lapsed): claim order is then
            # exactly priority, run_at, id.
            job.run_at_us = job.visible_at_us
            job.visible_at_us = now_us + visibility_us
            job.history_us = self.retention.get(queue, (None, None))[0]
            job.claimed_at_us = now_us
        taken.sort(key=lambda j: (-j.priority, j.run_at_us, j.id))
        return [self._record(j) for j in taken]

    @staticmethod
    def _record(job: LiveJob) -> JobRecord:
        assert job.claimed_by is not None
        return JobRecord(
            id=job.id,
            queue=job.queue,
            payload=copy.deepcopy(job.payload),
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            run_at_us=job.run_at_us,
            created_at_us=job.created_at_us,
            expires_at_us=job.expires_at_us,
            claimed_by=job.claimed_by,
            claim_expires_at_us=job.visible_at_us,
            claims=job.claims,
            history_us=job.history_us,
        )

    def _owned(self, job_id: int, worker: str, claim: int, now_us: int) -> LiveJob | None:
        job = self.jobs.get(job_id)
        if job is None or not job.owned_by(worker, claim, now_us):
            return None
        return job

    # -- settling (each returns False and changes nothing unless owned) --------
    def ack(self, job_id: int, worker: str, claim: int, now_us: int) -> bool:
        """Done: the live row goes away (no dead letter), into history when
        its queue kept history at the claim."""
        job = self._owned(job_id, worker, claim, now_us)
        if job is None:
            return False
        self._finish(job, "acked", job.history_us, now_us)
        return True

    def ack_batch(self, queue: str, job_ids: Iterable[int], worker: str, now_us: int) -> int:
        """Ack every listed job of ``queue`` that ``worker`` holds a live claim on.

        The batch form has ids but no attempt counts, so it checks the worker
        and the claim, not the attempt. Duplicate ids count once. The queue's
        history retention as of now decides whether they are kept.
        """
        history_us = self.retention.get(queue, (None, None))[0]
        count = 0
        for job_id in dict.fromkeys(job_ids):
            job = self.jobs.get(job_id)
            if (
                job is not None
                and job.queue == queue
                and job.claim_live(now_us)
                and job.claimed_by == worker
            ):
                self._finish(job, "acked", history_us, now_us)
                count += 1
        return count

    def retry(
        self,
        job_id: int,
        worker: str,
        claim: int,
        now_us: int,
        delay_us: int | None = None,
        *,
        error: str | None = None,
        backoff: Backoff | None = None,
        draw: float = 0.0,
    ) -> bool:
        """Back to pending after a delay, or to dead when no attempts are left.

        Without ``delay_us`` the delay is ``backoff``'s for this attempt count
        and ``draw`` (the caller's random number, so the model stays
        deterministic).
        """
        job = self._owned(job_id, worker, claim, now_us)
        if job is None:
            return False
        if job.attempts >= job.max_attempts:
            self._bury(job, "max_attempts", error, now_us, job.claimed_at_us)
            return True
        self._attempted(job, "retried", job.claimed_at_us, error, now_us)
        if delay_us is None:
            delay_us = (backoff or Backoff()).delay_us(job.attempts, draw)
        job.state = "pending"
        job.claimed_by = None
        job.run_at_us = job.visible_at_us = now_us + delay_us
        if error is not None:
            job.last_error = error
        return True

    def fail(
        self, job_id: int, worker: str, claim: int, now_us: int, error: str | None = None
    ) -> bool:
        """Straight to dead (reason ``failed``), whatever attempts remain."""
        job = self._owned(job_id, worker, claim, now_us)
        if job is None:
            return False
        self._bury(job, "failed", error, now_us, job.claimed_at_us)
        return True

    def heartbeat(
        self, job_id: int, worker: str, claim: int, now_us: int, extend_us: int
    ) -> bool:
        """Move the claim's lapse to ``now + extend`` (which may shorten it)."""
        job = self._owned(job_id, worker, claim, now_us)
        if job is None:
            return False
        job.visible_at_us = now_us + extend_us
        return True

    def release(
        self, job_id: int, worker: str, claim: int, now_us: int, *, refund: bool = True
    ) -> bool:
        """Hand a claim back, due now; ``refund`` gives the attempt back.

        ``run_at`` and ``visible_at`` both move to now: it became due again.
        """
        job = self._owned(job_id, worker, claim, now_us)
        if job is None:
            return False
        job.state = "pending"
        job.claimed_by = None
        job.run_at_us = now_us
        job.visible_at_us = now_us
        if refund:
            job.attempts -= 1
        return True

    def _attempted(
        self, job: LiveJob, outcome: str, started_us: int | None, error: str | None, now_us: int
    ) -> None:
        """Record how the job's attempt ended (or its death); it keeps its newest 20."""
        kept = self.attempts.setdefault(job.id, [])
        kept.append(Attempt(
            attempt=job.attempts, outcome=outcome,  # type: ignore[arg-type]
            worker=job.claimed_by, started_at=maybe_datetime(started_us),
            finished_at=to_datetime(now_us), error=capped_error(error), trace=None,
        ))  # fmt: skip
        del kept[:-ATTEMPTS_KEPT]

    def _bury(
        self,
        job: LiveJob,
        reason: DeadReason,
        error: str | None,
        now_us: int,
        started_us: int | None = None,
    ) -> None:
        """Move a live job to the dead letters, the death recorded as its
        attempt; a new error replaces the last one. Its queue's dead
        retention as of now sets when it is pruned."""
        self._attempted(job, reason, started_us, error, now_us)
        dead_us = self.retention.get(job.queue, (None, None))[1]
        del self.jobs[job.id]
        self.dead[job.id] = DeadJob(
            id=job.id,
            queue=job.queue,
            payload=job.payload,
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            run_at_us=job.run_at_us,
            created_at_us=job.created_at_us,
            expires_at_us=job.expires_at_us,
            claimed_by=job.claimed_by,
            last_error=job.last_error if error is None else error,
            reason=reason,
            died_at_us=now_us,
            claims=job.claims,
            prune_at_us=None if dead_us is None else now_us + dead_us,
        )

    # -- administration ------------------------------------------------------
    def cancel(self, queue: str, job_id: int, now_us: int = 0) -> bool:
        """Remove a live job of ``queue`` in any live state (into history when
        the queue keeps it now); dead letters stay."""
        job = self.jobs.get(job_id)
        if job is None or job.queue != queue:
            return False
        self._finish(job, "cancelled", self.retention.get(queue, (None, None))[0], now_us)
        return True

    def sweep_reason(self, job: LiveJob, now_us: int) -> DeadReason | None:
        """Why the sweep would bury ``job`` at ``now_us`` (None: it stays).

        - ``expired``: its deadline passed and no live claim protects it (a
          running claim keeps its chance to ack).
        - ``claim_expired``: a claim lapsed with no attempts left; nobody can
          claim it again, so it would otherwise sit there forever.
        - ``max_attempts``: a pending job with no attempts left (a claim
          handed back without a refund on its last attempt); likewise.
        """
        if job.claim_live(now_us):
            return None
        if job.deadline_passed(now_us):
            return "expired"
        if job.attempts >= job.max_attempts:
            return "claim_expired" if job.state == "processing" else "max_attempts"
        return None

    def sweep(self, now_us: int, queue: str | None = None) -> int:
        """Bury every live job (of ``queue``, or of all queues) the sweep takes."""
        moved = 0
        for job in sorted(self.jobs.values(), key=lambda j: j.id):
            if queue is not None and job.queue != queue:
                continue
            reason = self.sweep_reason(job, now_us)
            if reason is not None:
                self._bury(job, reason, None, now_us)
                moved += 1
        return moved

    def requeue_dead(self, queue: str, job_id: int, now_us: int) -> bool:
        """A dead letter of ``queue`` back to pending: same id, payload,
        priority, max_attempts and last error; zero attempts, due now, and no
        deadline (the old one has usually passed, which is often why it died).
        Its claim number moves on one, as if the death were a claim: a job
        claimed more than once may have attempt rows its ack must forget.
        """
        dead = self.dead.get(job_id)
        if dead is None or dead.queue != queue:
            return False
        del self.dead[job_id]
        self.jobs[job_id] = LiveJob(
            id=dead.id,
            queue=dead.queue,
            payload=dead.payload,
            priority=dead.priority,
            attempts=0,
            max_attempts=dead.max_attempts,
            run_at_us=now_us,
            created_at_us=dead.created_at_us,
            expires_at_us=None,
            claimed_by=None,
            visible_at_us=now_us,
            state="pending",
            last_error=dead.last_error,
            claims=dead.claims + 1,
        )
        return True

    def purge_dead(self, queue: str, before_us: int | None = None) -> int:
        """Delete dead letters of ``queue`` (only those that died before ``before_us``)."""
        doomed = [
            d.id
            for d in self.dead.values()
            if d.queue == queue and (before_us is None or d.died_at_us < before_us)
        ]
        for job_id in doomed:
            del self.dead[job_id]
        return len(doomed)

    # -- inspection ----------------------------------------------------------
    def get_state(self, job_id: int) -> ModelState | None:
        """``pending``, ``processing``, ``dead``, or None once acked/cancelled/purged."""
        if job_id in self.jobs:
            return self.jobs[job_id].state
        if job_id in self.dead:
            return "dead"
        return None

    def get_job(self, queue: str, job_id: int) -> JobInfo | None:
        """The job as ``Queue.get_job`` reports it (None outside ``queue``),
        with its attempt history."""
        info = self._where(queue, job_id)
        if info is None:
            return None
        return replace(info, attempt_history=tuple(self.attempts.get(job_id, ())))

    def _where(self, queue: str, job_id: int) -> JobInfo | None:
        job = self.jobs.get(job_id)
        if job is not None:
            return self._live_info(job) if job.queue == queue else None
        dead = self.dead.get(job_id)
        if dead is not None and dead.queue == queue:
            return self._dead_info(dead)
        finished = self.history.get(job_id)
        if finished is not None and finished.queue == queue:
            return finished.info()
        return None

    @staticmethod
    def _live_info(job: LiveJob) -> JobInfo:
        # A pending job has no claim to report, even if the row still
        # remembers who held it last.
        processing = job.state == "processing"
        return JobInfo(
            id=job.id,
            queue=job.queue,
            state=job.state,
            payload=copy.deepcopy(job.payload),
            priority=job.priority,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            run_at=to_datetime(job.run_at_us),
            created_at=to_datetime(job.created_at_us),
            expires_at=maybe_datetime(job.expires_at_us),
            claimed_by=job.claimed_by if processing else None,
            claim_expires_at=to_datetime(job.visible_at_us) if processing else None,
            last_error=job.last_error,
        )

    @staticmethod
    def _dead_info(dead: DeadJob) -> JobInfo:
        return JobInfo(
            id=dead.id,
            queue=dead.queue,
            state="dead",
            payload=copy.deepcopy(dead.payload),
            priority=dead.priority,
            attempts=dead.attempts,
            max_attempts=dead.max_attempts,
            run_at=to_datetime(dead.run_at_us),
            created_at=to_datetime(dead.created_at_us),
            expires_at=maybe_datetime(dead.expires_at_us),
            claimed_by=dead.claimed_by,
            claim_expires_at=None,
            last_error=dead.last_error,
            dead_reason=dead.reason,
            died_at=to_datetime(dead.died_at_us),
        )

    def dead_letters(self, queue: str, limit: int = 100) -> list[JobInfo]:
        """Dead letters of ``queue``, oldest death first (ties by id)."""
        rows = sorted(
            (d for d in self.dead.values() if d.queue == queue),
            key=lambda d: (d.died_at_us, d.id),
        )
        return [self._dead_info(d) for d in rows[:limit]]

    def stats(self, queue: str, now_us: int) -> QueueStats:
        """Counts by state. ``processing`` includes lapsed claims not yet
        reclaimed; ``ready`` counts pending jobs claimable right now, so a job
        the next sweep will bury (deadline passed, or no attempts left) is
        counted nowhere until it is dead."""
        ready = scheduled = processing = 0
        for job in self.jobs.values():
            if job.queue != queue:
                continue
            if job.state == "processing":
                processing += 1
            elif job.visible_at_us > now_us:
                scheduled += 1
            elif job.claimable(now_us):
                ready += 1
        dead = sum(1 for d in self.dead.values() if d.queue == queue)
        return QueueStats(ready, scheduled, processing, dead)

    def next_due(self, queue: str) -> int | None:
        """Earliest ``visible_at`` among jobs of ``queue`` with attempts left.

        Live claims count (their lapse is when the job may come back), and so
        do passed deadlines: this is a wake-up hint, not a promise of work.
        """
        due = [
            j.visible_at_us
            for j in self.jobs.values()
            if j.queue == queue and j.attempts < j.max_attempts
        ]
        return min(due, default=None)

    def stranded(self, now_us: int) -> list[int]:
        """Live jobs that break "no row is ever stranded" (should be empty).

        Every live job must be claimable now, claimable later (attempts left
        and no passed deadline), owned by a live claim, or buried by the next
        sweep.
        """
        bad = []
        for job in self.jobs.values():
            if job.claim_live(now_us) or self.sweep_reason(job, now_us) is not None:
                continue
            if job.attempts < job.max_attempts and not job.deadline_passed(now_us):
                continue
            bad.append(job.id)
        return sorted(bad)


@dataclass(slots=True)
class LockState:
    """One lock name. The row outlives releases so its token keeps counting,
    until housekeeping prunes it (``LockModel.prune``)."""

    owner: str | None
    token: int
    # While held, when the TTL lapses; once released, when it was released.
    expires_at_us: int

    def held(self, now_us: int) -> bool:
        return self.owner is not None and self.expires_at_us > now_us

    def free_since(self, cutoff_us: int) -> bool:
        """Nobody has held it since ``cutoff_us`` (released or lapsed at or before it)."""
        return self.expires_at_us <= cutoff_us


class LockModel:
    """TTL locks with fencing tokens, one ``LockState`` per name locked and
    not pruned since, and the token floor: the highest token ever pruned,
    above which a name with no row starts."""

    def __init__(self) -> None:
        self.locks: dict[str, LockState] = {}
        self.floor = 0

    def try_lock(self, name: str, owner: str, now_us: int, ttl_us: int) -> int | None:
        """Acquire ``name`` for ``owner``; returns the fencing token or None.

        - never taken (or pruned): taken with the token above the floor;
        - free, released or lapsed: taken with the next token (also when the
          lapsed holder was this same owner: its old token must go stale);
        - held by ``owner``: the TTL is reset to ``now + ttl``, token kept;
        - held by another owner: None, nothing changes.
        """
        until = now_us + ttl_us
        lock = self.locks.get(name)
        if lock is None:
            self.locks[name] = LockState(owner, self.floor + 1, until)
            return self.floor + 1
        if lock.held(now_us):
            if lock.owner != owner:
                return None
            lock.expires_at_us = until
            return lock.token
        lock.owner = owner
        lock.token += 1
        lock.expires_at_us = until
        return lock.token

    def _holds(self, name: str, owner: str, token: int, now_us: int) -> LockState | None:
        lock = self.locks.get(name)
        if lock is None or not lock.held(now_us) or lock.owner != owner or lock.token != token:
            return None
        return lock

    def renew(self, name: str, owner: str, token: int, now_us: int, ttl_us: int) -> bool:
        """Extend to ``now + ttl`` while (owner, token) holds it; after the
        TTL lapsed this is False even if nobody took the lock meanwhile."""
        lock = self._holds(name, owner, token, now_us)
        if lock is None:
            return False
        lock.expires_at_us = now_us + ttl_us
        return True

    def release(self, name: str, owner: str, token: int, now_us: int) -> bool:
        """Free the lock while (owner, token) holds it; the token count stays,
        and the release time is kept (``free_since``)."""
        lock = self._holds(name, owner, token, now_us)
        if lock is None:
            return False
        lock.owner = None
        lock.expires_at_us = now_us
        return True

    def prune(self, cutoff_us: int, limit: int | None = None) -> int:
        """Housekeeping: drop the names nobody has held since ``cutoff_us``
        (at most ``limit``, those free longest first, then by name), raising
        the floor to the highest token dropped; how many went."""
        gone = sorted(
            (n for n, lock in self.locks.items() if lock.free_since(cutoff_us)),
            key=lambda n: (self.locks[n].expires_at_us, n),
        )[:limit]
        for name in gone:
            self.floor = max(self.floor, self.locks.pop(name).token)
        return len(gone)

    def holder(self, name: str, now_us: int) -> tuple[str, int] | None:
        """(owner, token) of the live holder of ``name``, if any."""
        lock = self.locks.get(name)
        if lock is None or not lock.held(now_us):
            return None
        assert lock.owner is not None
        return lock.owner, lock.token


@dataclass(slots=True)
class ScheduleState:
    """One schedule's row as the scheduler's rules read it."""

    next_fire_at_us: int
    paused: bool = False

    def running(self) -> bool:
        """Not paused: it fires, and the scheduler sleeps until its next fire time."""
        return not self.paused

    def due(self, now_us: int) -> bool:
        """A tick at ``now_us`` fires it (once, for its next fire time)."""
        return self.running() and self.next_fire_at_us <= now_us


@dataclass(slots=True)
class ModelEvent:
    """One published event of a stream, as it was written."""

    offset: int
    key: str | None
    payload: Any
    created_at_us: int


@dataclass(slots=True)
class StreamLog:
    """One stream: the offset counter and the events still kept, ascending.

    ``last_offset`` is the last offset ever issued. It only grows: trimming
    drops events but never the counter, so an offset is never reused.
    """

    last_offset: int = 0
    events: list[ModelEvent] = field(default_factory=list)
    # Retention (``StreamModel.set_retention``): None is no limit.
    max_age_us: int | None = None
    max_events: int | None = None


def _check_offset(offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ModelError(f"offset must be an int >= 0, got {offset!r}")
    return offset


class StreamModel:
    """Append-only logs with dense per-stream offsets and consumer checkpoints.

    - ``publish`` takes the stream's next offset (1, 2, 3, ...), never one
      issued before, also after a trim;
    - ``read_since(offset, limit)``: the kept events above ``offset``,
      ascending, at most ``limit``;
    - a consumer's saved offset starts at 0 and never moves back;
    - ``trim_to(offset)`` drops the events below ``offset``.

    Transactions are not modelled as such: take a ``snapshot()``, apply the
    transaction's operations to it, and adopt it on commit (on rollback it is
    dropped, so a rolled-back publish leaves no event and no used offset).
    """

    def __init__(self) -> None:
        self.streams: dict[str, StreamLog] = {}
        # (stream, consumer) -> saved offset; absent means never saved (0).
        self.offsets: dict[tuple[str, str], int] = {}
        # Consumers that hold their unread events back from retention.
        self.protected: set[tuple[str, str]] = set()

    def snapshot(self) -> StreamModel:
        """An independent copy (the state a transaction starts from)."""
        return copy.deepcopy(self)

    def _log(self, stream: str) -> StreamLog:
        return self.streams.get(stream) or StreamLog()

    def last_offset(self, stream: str) -> int:
        """The last offset ever issued on ``stream`` (0 if none)."""
        return self._log(stream).last_offset

    def publish(self, stream: str, payload: Any, *, now_us: int, key: str | None = None) -> int:
        """Append an event (``key`` None for a plain publish); returns its offset."""
        if key == "":
            raise ModelError("a present key must be non-empty")
        log = self.streams.setdefault(stream, StreamLog())
        log.last_offset += 1
        log.events.append(ModelEvent(log.last_offset, key, copy.deepcopy(payload), now_us))
        return log.last_offset

    def read_since(self, stream: str, offset: int, limit: int = 100) -> list[StreamEvent]:
        """Kept events of ``stream`` with offsets above ``offset``, ascending, at most ``limit``."""
        _check_offset(offset)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ModelError(f"limit must be an int >= 1, got {limit!r}")
        picked = [e for e in self._log(stream).events if e.offset > offset][:limit]
        return [
            StreamEvent(
                offset=e.offset,
                stream=stream,
                key=e.key,
                payload=copy.deepcopy(e.payload),
                created_at=to_datetime(e.created_at_us),
            )
            for e in picked
        ]

    def read_from_consumer(self, stream: str, consumer: str, limit: int = 100) -> list[StreamEvent]:
        """``read_since`` from ``consumer``'s saved offset (which does not move)."""
        return self.read_since(stream, self.get_offset(stream, consumer), limit)

    def save_offset(self, stream: str, consumer: str, offset: int) -> None:
        """Checkpoint ``consumer`` at ``offset``; a lower offset changes nothing.

        Any offset >= 0 is accepted, also one beyond the last issued.
        """
        _check_offset(offset)
        pair = (stream, consumer)
        self.offsets[pair] = max(self.offsets.get(pair, 0), offset)

    def get_offset(self, stream: str, consumer: str) -> int:
        """``consumer``'s saved offset on ``stream``; 0 when never saved."""
        return self.offsets.get((stream, consumer), 0)

    def trim_to(self, stream: str, offset: int) -> int:
        """Drop the events of ``stream`` below ``offset``; returns how many went.

        The counter stays: the next publish still gets ``last_offset + 1``.
        """
        _check_offset(offset)
        log = self.streams.get(stream)
        if log is None:
            return 0
        kept = [e for e in log.events if e.offset >= offset]
        dropped = len(log.events) - len(kept)
        log.events = kept
        return dropped

    # -- retention -------------------------------------------------------------
    def set_retention(self, stream: str, max_age_us: int | None, max_events: int | None) -> None:
        log = self.streams.setdefault(stream, StreamLog())
        log.max_age_us, log.max_events = max_age_us, max_events

    def protect(self, stream: str, consumer: str) -> None:
        self.protected.add((stream, consumer))

    def unprotect(self, stream: str, consumer: str) -> bool:
        if (stream, consumer) not in self.protected:
            return False
        self.protected.discard((stream, consumer))
        return True

    def prunable(self, stream: str, now_us: int) -> list[int]:
        """The offsets retention drops from ``stream`` now, ascending.

        An event goes when it is beyond the newest ``max_events`` or older
        than ``max_age`` (created before ``now - max_age``; by age only the
        run of events before the first one young enough goes, so a late
        clock never punches a hole), and never when it is above the saved
        offset of a protected consumer (one that never saved holds all).
        """
        log = self.streams.get(stream)
        if log is None or (log.max_age_us is None and log.max_events is None):
            return []
        cut = 0
        if log.max_events is not None:
            cut = max(cut, log.last_offset - log.max_events)
        if log.max_age_us is not None:
            cutoff = now_us - log.max_age_us
            young = [e.offset for e in log.events if e.created_at_us >= cutoff]
            cut = max(cut, young[0] - 1 if young else log.last_offset)
        held = [self.get_offset(s, c) for s, c in self.protected if s == stream]
        if held:
            cut = min(cut, min(held))
        return [e.offset for e in log.events if e.offset <= cut]

    def prune(self, now_us: int) -> int:
        """Housekeeping: every stream's prunable events go; how many."""
        total = 0
        for name, log in self.streams.items():
            gone = set(self.prunable(name, now_us))
            log.events = [e for e in log.events if e.offset not in gone]
            total += len(gone)
        return total


__all__ = [
    "DeadJob",
    "FinishedJob",
    "LiveJob",
    "LockModel",
    "LockState",
    "ModelError",
    "ModelEvent",
    "QueueModel",
    "StreamLog",
    "StreamModel",
]
