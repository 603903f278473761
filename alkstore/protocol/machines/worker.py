"""The worker's decisions, as pure state machines.

``WorkerPolicy`` decides for the claim loop of ``Queue.work``: events in (a
wake arrived, a claim came back, a job finished, a sweep ran, a drain began,
the current time), one action out (sweep, claim ``n``, wait until an instant
for a kick; while draining, hand back what waits for a slot, or stop).
``Leases`` (``leases.py``) decides for every claim the worker holds: renew
these now, these have lapsed, or wait. The worker's own plans (a claim that
also reads when the next job falls due, the hand-back) are in
``plans/worker.py``; how a job leaves the worker is ``values.outcomes.Outcome``.

Nothing here reads a clock or does IO: ``alkstore/services/worker/``
performs the actions and feeds the results back in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..values.backoff import ROUND_TRIP_BACKOFF, ErrorBackoff
from ..values.ints import check_int
from ..values.names import check_identifier
from ..values.outcomes import Outcome
from ..values.timeconv import MAX_DURATION_US, US_PER_S, Duration, duration_us
from ..values.types import JobRecord
from .leases import Wait

# The default sweep cadence: half the visibility timeout, within these bounds.
_SWEEP_MIN_US = 1 * US_PER_S
_SWEEP_MAX_US = 30 * US_PER_S
# The most handlers one ``Queue.work`` runs at once. Each running handler is a
# task holding a claimed job (and heartbeating it); more than this in one
# process is a misconfiguration, and a claim of that many jobs is one huge
# transaction. Run more workers (or processes) to go wider.
MAX_CONCURRENCY = 10_000
# Claiming ahead: beyond the free slots, claim about this much work, going by
# the rate at which the worker has been finishing jobs, up to ``MAX_AHEAD``
# jobs. Fast jobs are then claimed (and acked) in batches, not one round
# trip per job; slow ones (a rate below one job per horizon) are claimed only
# as slots free up, so other workers get their share.
AHEAD_HORIZON_US = 20_000
# A claim takes time itself (a few round trips: long on a distant server), and
# the work claimed ahead must last until the next claim is back, so the
# horizon is at least this many claim durations. Locally a claim is well
# under a millisecond and the horizon stays AHEAD_HORIZON_US.
AHEAD_CLAIMS = 2
MAX_AHEAD = 1000
# The rate is measured over windows this long, or shorter ones that hold
# this many claims' worth of finished jobs (``concurrency + ahead`` each):
# a fast worker learns its rate within a few claims instead of claiming one
# slot's worth at a time for the first window, which, with several
# processes taking turns at SQLite's write lock, cost a run of 20,000 jobs
# a third of its time. A window spanning several claims still counts the
# waits between them, so the rate is not a burst's.
_RATE_WINDOW_US = 50_000
_RATE_WINDOW_CLAIMS = 4
# The first pause before looking again for a job that was due yet not
# claimed (see ``WorkerPolicy.claimed``); it doubles, up to the poll interval.
STALE_DUE_PAUSE_US = 1_000


# -- actions ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Sweep:
    """Move this queue's expired and stranded jobs to dead."""


@dataclass(frozen=True, slots=True)
class Claim:
    """Claim up to ``n`` jobs (and learn when the next one falls due)."""

    n: int


@dataclass(frozen=True, slots=True)
class HandBack:
    """Draining: hand back the jobs claimed ahead that no handler has started
    (due now, attempt refunded), so other workers take them at once."""


@dataclass(frozen=True, slots=True)
class Stop:
    """Draining is over: end the worker. Whatever it still holds unfinished
    is handed back; ``cancel``: handlers are still running (the drain's
    deadline passed) and are cancelled first, their jobs handed back too."""

    cancel: bool


# ``Wait`` is the one ``Leases`` gives too: both loops sleep on it.
WorkerAction = Sweep | Claim | Wait | HandBack | Stop


@dataclass
class WorkerPolicy:
    concurrency: int
    poll_interval_us: int
    sweep_interval_us: int
    heartbeat_interval_us: int
    # Claimed and not finished (running, or claimed ahead and waiting).
    running: int = 0
    # Claimed ahead of a free slot, not started yet.
    queued: int = 0
    # How many jobs to claim beyond the slots (see ``AHEAD_HORIZON_US``).
    ahead: int = 0
    # Jobs finished per second, smoothed; and the window being measured.
    rate: float = 0.0
    # How long a claim takes, start to result, smoothed.
    claim_us: int = 0
    _window_start_us: int | None = None
    _window_finished: int = 0
    # Time in the window with nothing to run while a claim that came back
    # full was on its way (the queue had work; the claim was slow, as when
    # other processes hold SQLite's write lock), and since when nothing has
    # run. Left out of the rate: counted, waiting for the lock shrank the
    # claim-ahead, and smaller claims then waited for the lock more often.
    _window_stalled_us: int = 0
    _idle_since_us: int | None = None
    # The queue may hold claimable work we have not looked for yet.
    look: bool = True
    next_due_us: int | None = None
    next_poll_us: int = 0
    next_sweep_us: int = 0
    backoff_until_us: int | None = None
    # Failed claims in a row (see ``__post_init__`` for the pauses).
    claim_errors: ErrorBackoff = field(default_factory=ErrorBackoff)
    # Wakes seen so far, and how many had been seen when the claim in flight
    # started: a wake during a claim may announce a job the claim missed.
    _wakes: int = 0
    _wakes_at_claim: int = 0
    # A due-but-unclaimed job asked for a sweep already; and the pause before
    # the next look while it stays so (0: none yet).
    _stale_due_swept: bool = False
    _stale_pause_us: int = 0
    # Draining (see ``drain``): no more claims or sweeps; running handlers
    # may finish until ``drain_until_us`` (None: however long they take).
    draining: bool = False
    drain_until_us: int | None = None

    def __post_init__(self) -> None:
        self.concurrency = check_int(self.concurrency, "concurrency", lo=1, hi=MAX_CONCURRENCY)
        for name in ("poll_interval_us", "sweep_interval_us", "heartbeat_interval_us"):
            value = check_int(getattr(self, name), name, lo=1, hi=MAX_DURATION_US)
            setattr(self, name, value)
        # After a failed claim, pause as any round trip does (50 ms doubling
        # to 5 s), but no longer than the poll interval: the worker promises
        # to look at least that often.
        rt = ROUND_TRIP_BACKOFF
        cap = max(rt.base_us, min(rt.cap_us, self.poll_interval_us))
        self.claim_errors = ErrorBackoff(replace(rt, cap_us=cap))

    @classmethod
    def of(
        cls,
        *,
        concurrency: int,
        visibility_timeout_us: int,
        poll_interval_us: int,
        sweep_interval_us: int | None = None,
        heartbeat_interval_us: int | None = None,
    ) -> WorkerPolicy:
        """Defaults: sweep every half visibility timeout (1 s..30 s); heartbeat
        four times per visibility timeout, so three beats in a row must fail
        before a live worker loses its claim."""
        if sweep_interval_us is None:
            sweep_interval_us = min(_SWEEP_MAX_US, max(_SWEEP_MIN_US, visibility_timeout_us // 2))
        if heartbeat_interval_us is None:
            heartbeat_interval_us = max(1, visibility_timeout_us // 4)
        return cls(concurrency, poll_interval_us, sweep_interval_us, heartbeat_interval_us)

    @classmethod
    def configure(
        cls,
        *,
        concurrency: int,
        visibility_timeout_us: int,
        poll_interval: Duration,
        sweep_interval: Duration | None = None,
        heartbeat_interval: Duration | None = None,
    ) -> WorkerPolicy:
        """The policy for ``Queue.work``'s arguments as the caller gave them,
        each checked before the worker claims anything: ``concurrency`` an int
        in ``[1, MAX_CONCURRENCY]``, the intervals seconds or a timedelta,
        finite and > 0 (``None`` for the defaults of ``of``)."""

        def interval(value: Duration, what: str) -> int:
            return duration_us(value, what, allow_zero=False)

        return cls.of(
            concurrency=concurrency,  # checked by __post_init__
            visibility_timeout_us=visibility_timeout_us,
            poll_interval_us=interval(poll_interval, "poll_interval"),
            sweep_interval_us=(
                None if sweep_interval is None else interval(sweep_interval, "sweep_interval")
            ),
            heartbeat_interval_us=(
                None
                if heartbeat_interval is None
                else interval(heartbeat_interval, "heartbeat_interval")
            ),
        )

    # -- what to do next ---------------------------------------------------------
    def capacity(self) -> int:
        """What to claim now: the free slots, plus the claim-ahead the recent
        rate calls for. Claimed-ahead jobs are heartbeaten like running ones
        and handed back at shutdown."""
        return max(0, self.concurrency + self.ahead - self.running)

    def _worth_claiming(self, capacity: int) -> bool:
        # A slot waits for work: claim whatever can be had. Otherwise top up
        # only once half the target is free (one claim for many jobs).
        starving = self.queued == 0 and self.running < self.concurrency
        return capacity > 0 and (starving or capacity * 2 >= self.concurrency + self.ahead)

    def next_action(self, now_us: int) -> WorkerAction:
        if self.draining:
            return self._drain_action(now_us)
        if self.backoff_until_us is not None and now_us >= self.backoff_until_us:
            self.backoff_until_us = None
        if now_us >= self.next_sweep_us:
            return Sweep()
        capacity = self.capacity()
        if self._worth_claiming(capacity) and self.backoff_until_us is None:
            if now_us >= self.next_poll_us:
                self.look = True
            if self.next_due_us is not None and now_us >= self.next_due_us:
                self.look = True
            if self.look:
                self._wakes_at_claim = self._wakes
                return Claim(capacity)
        return Wait(self._deadline(capacity))

    def _deadline(self, capacity: int) -> int:
        deadline = self.next_sweep_us
        if not self._worth_claiming(capacity):
            # Nothing to claim until jobs finish, which kicks us.
            return deadline
        if self.backoff_until_us is not None:
            return min(deadline, self.backoff_until_us)
        deadline = min(deadline, self.next_poll_us)
        if self.next_due_us is not None:
            deadline = min(deadline, self.next_due_us)
        return deadline

    def _drain_action(self, now_us: int) -> WorkerAction:
        started = self.running - self.queued
        if started == 0:
            # Nothing runs: stop, and what waits for a slot goes back with
            # the stop's hand-back (one round trip, not two).
            return Stop(cancel=False)
        until = self.drain_until_us
        if until is not None and now_us >= until:
            return Stop(cancel=True)
        if self.queued:
            return HandBack()
        # Until a handler finishes (which kicks) or the deadline; without
        # one, look again every poll interval all the same.
        return Wait(now_us + self.poll_interval_us if until is None else until)

    # -- events ------------------------------------------------------------------
    def drain(self, now_us: int, timeout_us: int | None) -> None:
        """Drain: claim and sweep no more, hand back at once what was claimed
        ahead and has not started, let running handlers finish (and be
        settled as usual) until ``now_us + timeout_us`` (``None``: however
        long they take), then stop, cancelling those still running. Asked
        again, the deadline only ever moves closer: a second drain with
        ``timeout_us=0`` stops at once."""
        if timeout_us is not None:
            until = now_us + max(0, timeout_us)
            if self.drain_until_us is None or until < self.drain_until_us:
                self.drain_until_us = until
        self.draining = True

    def woke(self) -> None:
        """Someone enqueued (or handed back) a job on this queue."""
        self._wakes += 1
        self.look = True

    def claimed(
        self,
        now_us: int,
        got: int,
        asked: int,
        next_due_us: int | None,
        returned_us: int | None = None,
    ) -> None:
        """A claim made at ``now_us`` returned ``got`` of ``asked`` jobs and,
        when short, when the next live job of the queue falls due;
        ``returned_us``, when it came back (how long claims take sets how far
        ahead to claim)."""
        if returned_us is not None:
            took = max(0, returned_us - now_us)
            self.claim_us = took if self.claim_us == 0 else (self.claim_us + took) // 2
            if got and got >= asked and self.running == 0:
                self._stalled(now_us, returned_us)
        if got:
            self._idle_since_us = None
        self.running += got
        self.queued += got
        self.claim_errors.succeeded()
        self.backoff_until_us = None
        self.next_poll_us = now_us + self.poll_interval_us
        if got >= asked:
            # A full batch says nothing about what is left: look again as
            # soon as there is room.
            self.look = True
            self.next_due_us = None
            return
        self.look = self._wakes != self._wakes_at_claim
        if next_due_us is not None and next_due_us <= now_us:
            # Due, yet the claim (same transaction) did not take it. A passed
            # ``expires`` deadline does that, which the sweep buries: sweep
            # once now. So does, on Postgres, a row another transaction held
            # locked at the claim's instant (``SKIP LOCKED``: a claim of
            # another worker, an awaiter marking the job kept, a cancel): look
            # again after a pause that doubles from 1 ms up to the poll
            # interval, so such a job waits milliseconds, not the poll
            # interval, and nothing spins.
            if not self._stale_due_swept:
                self._stale_due_swept = True
                self.next_sweep_us = now_us
                next_due_us = None  # the sweep's end looks again
            else:
                pause = max(STALE_DUE_PAUSE_US, 2 * self._stale_pause_us)
                self._stale_pause_us = min(pause, self.poll_interval_us)
                next_due_us = now_us + self._stale_pause_us
        else:
            self._stale_due_swept = False
            self._stale_pause_us = 0
        self.next_due_us = next_due_us

    def claim_failed(self, now_us: int) -> None:
        """A claim raised (the database is unwell): back off, then retry."""
        self.backoff_until_us = now_us + self.claim_errors.failed()

    def swept(self, now_us: int) -> None:
        """A sweep finished (or failed: it is retried next interval)."""
        self.next_sweep_us = now_us + self.sweep_interval_us
        if self._stale_due_swept:
            self.look = True  # re-read when the next job falls due

    def started(self) -> bool:
        """A claimed job's handler started (it no longer waits for a slot).
        True when the jobs claimed ahead run low (under half the claim-ahead
        target, or none left): time to look for more, so the next claim is
        back before the slots run dry."""
        self.queued -= 1
        return self.queued * 2 < self.ahead + 1

    def dropped(self, n: int = 1) -> None:
        """``n`` jobs claimed ahead left without starting (a claim lapsed, or
        they were handed back while draining)."""
        self.queued -= n
        self.running -= n

    def finished(self, outcome: Outcome = Outcome.ACKED, now_us: int | None = None) -> None:
        """A started job left the worker; its slot is free. ``now_us`` feeds
        the rate that sets how far ahead to claim."""
        self.running -= 1
        if outcome is Outcome.RETRIED:
            self.retried()
        if now_us is not None:
            self._count_finish(now_us)
            if self.running == 0:
                self._idle_since_us = now_us

    def _stalled(self, claimed_us: int, returned_us: int) -> None:
        """A full claim made at ``claimed_us`` came back at ``returned_us`` to a
        worker with nothing running: it stalled from when its last job
        finished (or the claim began, or the window opened) until then."""
        since = claimed_us if self._idle_since_us is None else max(claimed_us, self._idle_since_us)
        if self._window_start_us is not None:
            since = max(since, self._window_start_us)
            self._window_stalled_us += max(0, returned_us - since)

    def _count_finish(self, now_us: int) -> None:
        if self._window_start_us is None:
            self._window_start_us = now_us
        self._window_finished += 1
        elapsed = now_us - self._window_start_us
        enough = self._window_finished >= _RATE_WINDOW_CLAIMS * (self.concurrency + self.ahead)
        if elapsed < _RATE_WINDOW_US and not (enough and elapsed > 0):
            return
        # Idle time in the window lowers the measured rate, as it should (a
        # queue that runs dry is not worth claiming far ahead of), except a
        # stall behind a full claim (``_window_stalled_us``).
        working = elapsed - min(self._window_stalled_us, elapsed - 1)  # elapsed > 0 here
        measured = self._window_finished * US_PER_S / working
        self.rate = measured if self.rate == 0.0 else 0.5 * (self.rate + measured)
        horizon_us = max(AHEAD_HORIZON_US, AHEAD_CLAIMS * self.claim_us)
        self.ahead = min(MAX_AHEAD, int(self.rate * horizon_us / US_PER_S))
        self._window_start_us, self._window_finished = now_us, 0
        self._window_stalled_us = 0

    def retried(self) -> None:
        """A job is pending again (due after its backoff): learn when. Counted
        as a wake: a claim in flight may have run before the retry committed."""
        self.woke()


def check_worker_id(worker_id: object) -> str | None:
    """A worker id given to ``Queue.work``: ``None`` (the caller picks a
    default) or a valid identifier. An empty string is refused, not taken
    for "no id"."""
    return None if worker_id is None else check_identifier(worker_id, "worker id")


# Added to what is left of a claim when bounding shielded settling: one round
# trip's worth, generously.
SETTLE_GRACE_S = 2.0


def settle_bound(now_us: int, records: Sequence[JobRecord]) -> float:
    """Seconds that shielded settling (ack, retry, the shutdown hand-back)
    may wait: while the longest claim lasts, plus a grace for the round trip.
    Past that an ack or release is refused anyway (the job is someone else's
    to claim), so a database that does not answer must not hold a shutdown
    longer."""
    left = max((r.claim_expires_at_us for r in records), default=now_us) - now_us
    return max(0.0, left / US_PER_S) + SETTLE_GRACE_S
