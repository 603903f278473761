"""The simulation's invariants: a ledger of what committed, checked on every
commit, and the failure that reports a broken one.

``Ledger`` is ground truth built from committed operations alone; each of
its methods states the invariants it checks and raises ``_Violation`` when
one breaks. ``Simulation`` turns that into a ``SimulationFailure`` carrying
the seed, the trace and the choices that replay it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..protocol.values.results import ON_FAILURE_RUN
from ..protocol.values.types import JobRecord, LockRecord, QueueLimits, Rate
from .sim_backend import Snapshot


class SimulationFailure(AssertionError):
    """An invariant broke. Carries the seed (when seeded), the trace, the
    choices that led there and, once shrunk, the smallest failing trace."""

    def __init__(
        self,
        message: str,
        trace: list[str],
        seed: int | None,
        choices: list[int] | None = None,
        shrunk_trace: list[str] | None = None,
    ) -> None:
        self.violation = message
        self.trace = trace
        self.seed = seed
        self.choices = choices
        self.shrunk_trace = shrunk_trace
        replay = f"\nreplay: pytest --alkstore-seed={seed}" if seed is not None else ""
        if shrunk_trace is not None:
            shown = (
                f"smallest failing interleaving found by shrinking ({len(shrunk_trace)} "
                f"of {len(trace)} steps):\n" + "\n".join(shrunk_trace)
            )
        else:
            shown = "trace (last steps):\n" + "\n".join(trace[-60:])
        super().__init__(f"{message}\nseed: {seed}{replay}\n{shown}")


# -- the ledger: what committed, and the invariants over it --------------------


@dataclass
class Delivery:
    worker: str
    claims: int
    expires_us: int
    settled: bool = False


class Ledger:
    """Ground truth from committed operations; raises on a broken invariant."""

    def __init__(self) -> None:
        self.enqueued: dict[int, str] = {}  # id -> marker
        self.acked: set[int] = set()
        self.owner: dict[int, Delivery] = {}
        self.rolled_back_markers: set[str] = set()
        self.lock_tokens: dict[str, int] = {}
        self.lock_holder: dict[str, LockRecord] = {}
        self.published: dict[str, list[int]] = {}
        self.read_upto: dict[str, int] = {}
        self.saved: dict[tuple[str, str], int] = {}
        self.max_attempts: dict[int, int] = {}
        self.fired: dict[str, list[int]] = {}
        self.catch_up_max: dict[str, int] = {}  # schedule -> jobs one tick may enqueue
        self.concurrency_key: dict[int, str | None] = {}  # job id -> its key
        self.limits = QueueLimits()
        self.claim_times: list[int] = []  # when each claim of the queue was made
        self.key_claim_times: dict[str, list[int]] = {}  # the same per concurrency key
        # dependencies: each dependent's dependencies and policy on a failed
        # one; the jobs of committed graphs (what a later job may wait for);
        # the result each committed ack carried
        self.deps_of: dict[int, tuple[int, ...]] = {}
        self.policy: dict[int, int] = {}
        self.graph_jobs: list[int] = []
        self.results: dict[int, str] = {}

    def fail(self, message: str) -> None:
        raise _Violation(message)

    # queues
    def claimed(self, jobs: list[JobRecord], now: int) -> None:
        for job in jobs:
            # a job acked once is never delivered again
            if job.id in self.acked:
                self.fail(f"job {job.id} delivered again after it was acked")
            # attempts never exceed max_attempts for a delivered job
            if job.attempts > job.max_attempts:
                self.fail(f"job {job.id} delivered with attempts {job.attempts} > max")
            # never owned by two workers with unexpired claims at once
            previous = self.owner.get(job.id)
            if previous and not previous.settled and previous.expires_us > now:
                self.fail(
                    f"job {job.id} claimed by {job.claimed_by} while {previous.worker} "
                    f"holds an unexpired claim"
                )
            self.owner[job.id] = Delivery(job.claimed_by, job.claims, job.claim_expires_at_us)
        if self.limits.concurrency_per_key is not None and jobs:
            self._within_limit({self.concurrency_key.get(j.id) for j in jobs}, now)
        if self.limits.rate is not None and jobs:
            self.claim_times.extend(now for _ in jobs)
            self._within_rate("the queue", self.claim_times, self.limits.rate)
        if self.limits.rate_per_key is not None:
            for job in jobs:
                key = self.concurrency_key.get(job.id)
                if key is not None:
                    times = self.key_claim_times.setdefault(key, [])
                    times.append(now)
                    self._within_rate(f"concurrency key {key!r}", times, self.limits.rate_per_key)

    def _within_rate(self, what: str, times: list[int], rate: Rate) -> None:
        # no window of the rate's period holds more than its limit of claims
        ordered = sorted(times)
        for first, last in zip(ordered, ordered[rate.limit:], strict=False):
            if last - first < rate.period_us:
                self.fail(
                    f"{what} made {rate.limit + 1} claims within {rate.per.total_seconds():g} s "
                    f"(from {first} to {last}), over its rate {rate.limit}"
                )

    def _within_limit(self, keys: set[str | None], now: int) -> None:
        live: dict[str, int] = {}
        for job_id, d in self.owner.items():
            key = self.concurrency_key.get(job_id)
            if key in keys and key is not None and not d.settled and d.expires_us > now:
                live[key] = live.get(key, 0) + 1
        # a claim leaves at most N jobs of a concurrency key holding live claims
        limit = self.limits.concurrency_per_key or 0
        over = sorted(k for k, n in live.items() if n > limit)
        if over:
            self.fail(f"concurrency key(s) {over} over their limit {limit}: {live}")

    def settled(self, job: JobRecord, kind: str, ok: bool, now: int) -> None:
        current = self.owner.get(job.id)
        owns = (
            current is not None
            and not current.settled
            and current.worker == job.claimed_by
            and current.claims == job.claims
            and current.expires_us > now
        )
        # a job is settled only by the worker that owns it, while it does
        if ok and not owns:
            self.fail(f"{kind} of job {job.id} by {job.claimed_by} succeeded without ownership")
        if not ok and owns and job.id not in self.acked:
            self.fail(f"{kind} of job {job.id} by its owner {job.claimed_by} was refused")
        if ok and current is not None:
            if kind == "heartbeat":
                return
            current.settled = True
            if kind == "ack":
                self.acked.add(job.id)

    def extended(self, job: JobRecord, until: int) -> None:
        current = self.owner.get(job.id)
        if current is not None:
            current.expires_us = until

    # locks
    def granted(self, record: LockRecord, now: int) -> None:
        held = self.lock_holder.get(record.name)
        same = held is not None and held.owner == record.owner and held.expires_at_us > now
        # two holders never hold one lock with unexpired TTLs
        if held is not None and held.expires_at_us > now and not same:
            self.fail(f"lock {record.name} granted to {record.owner} while {held.owner} holds it")
        last = self.lock_tokens.get(record.name, 0)
        # fencing tokens strictly increase (a same-owner refresh keeps its token)
        if same and record.token != held.token:  # type: ignore[union-attr]
            self.fail(f"lock {record.name} refresh changed the token")
        if not same and record.token <= last:
            self.fail(f"lock {record.name} token {record.token} does not exceed {last}")
        self.lock_tokens[record.name] = max(last, record.token)
        self.lock_holder[record.name] = record

    def lock_ended(self, record: LockRecord) -> None:
        held = self.lock_holder.get(record.name)
        if held is not None and held.token == record.token:
            del self.lock_holder[record.name]

    # scheduler
    def fired_at(self, name: str, fire_at_us: int) -> None:
        times = self.fired.setdefault(name, [])
        # each fire time of a schedule is enqueued once, and fire times only move forward
        if fire_at_us in times:
            self.fail(f"schedule {name} fired twice for {fire_at_us}")
        if times and fire_at_us < times[-1]:
            self.fail(f"schedule {name} fired for {fire_at_us} after {times[-1]}")
        times.append(fire_at_us)

    def ticked(self, fires: list[tuple[str, int]], now: int) -> None:
        counts: dict[str, int] = {}
        for name, fire_at_us in fires:
            # a tick enqueues no fire time that has not come yet
            if fire_at_us > now:
                self.fail(f"schedule {name} fired for {fire_at_us}, later than now ({now})")
            counts[name] = counts.get(name, 0) + 1
        for name, count in counts.items():
            # one tick enqueues at most the schedule's catch-up cap (1 unless "all")
            cap = self.catch_up_max.get(name, 1)
            if count > cap:
                self.fail(f"schedule {name} fired {count} jobs in one tick, over its cap {cap}")

    # read models
    def listed(self, ids: list[int], present_at_start: set[int]) -> None:
        """A listing of every state, committed at the point it ends."""
        present = set(self.enqueued) - self.acked
        # a listing holds each job once, in one state: it reads one snapshot
        twice = sorted(i for i, n in Counter(ids).items() if n > 1)
        if twice:
            self.fail(f"a job listing showed jobs {twice} twice")
        # it holds every job that was live or dead from its start to its end
        missing = sorted((present_at_start & present) - set(ids))
        if missing:
            self.fail(f"a job listing left out jobs {missing}, present throughout it")

    # dependencies
    def depends(self, job_id: int, deps: tuple[int, ...], policy: int) -> None:
        self.deps_of[job_id] = deps
        self.policy[job_id] = policy

    def dependencies_hold(self, snap: Snapshot) -> None:
        """The dependency rules, over what has committed (every job kept)."""
        places = Counter([*snap.waiting_ids, *snap.job_ids, *(h[0] for h in snap.history)])
        # a job is in one place: waiting, live or dead, or history (released or cancelled once)
        twice = sorted(i for i, n in places.items() if n > 1)
        if twice:
            self.fail(f"jobs {twice} are in two places at once (waiting, jobs, dead, history)")
        outcome = {job_id: (what, result) for job_id, what, result in snap.history}
        cancelled = {i for i, (what, _) in outcome.items() if what == "cancelled"}
        failed = snap.dead_ids | cancelled
        in_history = {i for i, (what, _) in outcome.items() if what == "acked"}
        # every acked (kept) job is in history as acked, and nothing else is
        if in_history != self.acked:
            self.fail(f"history holds {sorted(in_history)} acked, acked {sorted(self.acked)}")
        waiting = set(snap.waiting_ids)
        for job_id, deps in self.deps_of.items():
            run = self.policy[job_id] == ON_FAILURE_RUN
            open_ = [d for d in deps if d not in self.acked and d not in failed]
            broken = [d for d in deps if d in failed]
            if job_id in waiting:
                # a waiting job has an unfinished dependency (its last finish released it)
                if not open_:
                    self.fail(f"job {job_id} still waits though {list(deps)} all finished")
                # and none of them failed, unless it runs anyway (the failure cancelled it)
                if broken and not run:
                    self.fail(f"job {job_id} still waits though dependency {broken[0]} failed")
            elif job_id in cancelled:
                # a job is cancelled only by a failed dependency, under the cancel policy
                if run or not broken:
                    policy = "run" if run else "cancel"
                    self.fail(f"job {job_id} cancelled, its dependencies {list(deps)} "
                              f"(failed: {broken}) under policy {policy}")  # fmt: skip
            elif open_ or (broken and not run):
                # it left waiting only once every dependency was acked (or failed, under run)
                self.fail(f"job {job_id} was released before its dependencies {list(deps)} "
                          f"finished (open: {open_}, failed: {broken})")  # fmt: skip
        for job_id, result in self.results.items():
            # a result is there once its ack committed
            if outcome.get(job_id, ("", None))[1] != result:
                self.fail(f"job {job_id} acked with {result}, history has {outcome.get(job_id)}")
        early = sorted(
            i for i, (_, r) in outcome.items() if r is not None and i not in self.results
        )
        # and not before
        if early:
            self.fail(f"history holds results of jobs {early} whose acks did not commit")

    # streams
    def read(self, stream: str, after: int, offsets: list[int]) -> None:
        committed = [o for o in self.published.get(stream, []) if o > after]
        # readers see offsets strictly increasing with no gaps among committed events
        if offsets != committed[: len(offsets)]:
            self.fail(f"stream {stream}: read {offsets} after {after}, committed {committed}")

    def saved_offset(self, stream: str, consumer: str, value: int) -> None:
        key = (stream, consumer)
        # saved offsets never move backwards
        if value < self.saved.get(key, 0):
            self.fail(f"saved offset of {key} moved back to {value}")
        self.saved[key] = value


class _Violation(Exception):
    pass
