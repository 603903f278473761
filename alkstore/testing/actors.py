"""The simulation's actors: the operations their programs yield, and the
programs themselves.

An operation (``Op``) is one transaction of the core's plans; a program is a
generator of operations (or ``WAIT``, when it has nothing to do until
something changes) that receives each operation's results. ``Programs``
holds the program of each kind of actor: producer, worker, lock holder,
stream publisher, stream reader, scheduler ticker and inspector; ``Simulation``
(``stepping.py``) runs them, one statement per step.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..protocol.dialect import Dialect
from ..protocol.plan import Plan
from ..protocol.plans import claim, dependencies, inspection, locks, queues, schedule, streams
from ..protocol.plans import wakes as wake_plans
from ..protocol.plans import worker as worker_plans
from ..protocol.plans.workflows import NewStep, enqueue_workflow
from ..protocol.values import codec
from ..protocol.values.results import ON_FAILURE_CANCEL, ON_FAILURE_RUN
from ..protocol.values.types import JobRecord, LockRecord, QueueOptions, resolve_enqueue
from .choices import Chooser
from .config import Config
from .sim_backend import SimConn

# Every simulated actor is one store: the origin its wakes carry.
SIM_ORIGIN = "sim"

if TYPE_CHECKING:
    from .invariants import Ledger

US = 1_000_000

# The workflow a graph producer enqueues: each step and the steps it waits for.
GRAPH = {"a": (), "b": (), "c": ("a", "b"), "d": ("c",)}
POLICIES = (ON_FAILURE_CANCEL, ON_FAILURE_RUN)


@dataclass
class Op:
    """One transaction: ``plans(now)`` run in order, then COMMIT (or ROLLBACK).

    ``plans`` is called as soon as the program yields the op, before the
    program resumes, so it may close over the program's loop variables.
    """

    kind: str
    plans: Callable[[int], list[Plan[Any]]]
    write: bool = True
    rollback: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


WAIT = object()  # a program yields this when it has nothing to do right now

Program = Generator[Any, Any, None]


@dataclass
class Actor:
    """An actor as its program knows it: who it is (a new ``incarnation``
    after each crash), its connection, and whether its program has ended.
    Where the stepping engine is in the program is the engine's own
    (``stepping.py``), so nothing here depends on it."""

    name: str
    kind: str
    make_program: Callable[[Actor], Program]
    conn: SimConn
    incarnation: int = 0
    done: bool = False

    @property
    def identity(self) -> str:
        return f"{self.name}#{self.incarnation}"


class Programs:
    """The actors' programs, as methods of the ``Simulation`` that runs them."""

    config: Config
    chooser: Chooser
    ledger: Ledger
    d: Dialect
    queue: str
    options: QueueOptions
    actors: Sequence[Actor]
    _marker: int

    def _next_marker(self) -> str:
        self._marker += 1
        return f"m{self._marker}"

    # -- operations --------------------------------------------------------------
    def _enqueue_op(self, marker: str, key: str | None = None) -> Op:
        def plans(now: int) -> list[Plan[Any]]:
            job = resolve_enqueue(self.queue, {"marker": marker}, now, self.options,
                                  concurrency_key=key)  # fmt: skip
            return [queues.enqueue(self.d, job, "sim", now)]

        return Op("enqueue", plans, meta={"marker": marker, "key": key})

    def _tx_op(self, marker: str, rollback: bool, key: str | None = None) -> Op:
        def plans(now: int) -> list[Plan[Any]]:
            job = resolve_enqueue(self.queue, {"marker": marker}, now, self.options,
                                  concurrency_key=key)  # fmt: skip
            text = codec.encode({"marker": marker})
            return [
                queues.enqueue(self.d, job, "sim", now),
                streams.publish(self.d, "events", None, text, "sim", now),
                wake_plans.notify(self.d, f"ch-{marker}", "sim", now),
            ]

        return Op("tx", plans, rollback=rollback, meta={"marker": marker, "key": key})

    def _unique_op(self, marker: str, key: str, rollback: bool) -> Op:
        def plans(now: int) -> list[Plan[Any]]:
            job = resolve_enqueue(self.queue, {"marker": marker}, now, self.options)
            return [queues.enqueue_unique(self.d, job, key, None, "sim", now)]

        return Op("enqueue_unique", plans, rollback=rollback, meta={"marker": marker})

    def _graph_op(self, actor: Actor, marker: str, rollback: bool) -> Op:
        policies = {
            name: POLICIES[self.chooser.choose(2, f"{actor.identity} {marker}{name} policy")]
            for name, after in GRAPH.items()
            if after
        }

        def plans(now: int) -> list[Plan[Any]]:
            steps = [
                NewStep(
                    name,
                    resolve_enqueue(self.queue, {"marker": f"{marker}{name}"}, now, self.options),
                    after,
                    policies.get(name, ON_FAILURE_CANCEL),
                )
                for name, after in GRAPH.items()
            ]
            return [enqueue_workflow(self.d, "g", steps, SIM_ORIGIN, now)]

        meta = {"marker": marker, "policies": policies}
        return Op("graph", plans, rollback=rollback, meta=meta)

    def _dependent_op(self, actor: Actor, marker: str) -> Op:
        known = self.ledger.graph_jobs
        dep = known[self.chooser.choose(len(known), f"{actor.identity} {marker} dependency")]
        policy = POLICIES[self.chooser.choose(2, f"{actor.identity} {marker} policy")]

        def plans(now: int) -> list[Plan[Any]]:
            job = resolve_enqueue(self.queue, {"marker": marker}, now, self.options)
            return [dependencies.enqueue_dependent(self.d, [job], [dep], policy, SIM_ORIGIN, now)]

        return Op("dependent", plans, meta={"marker": marker, "dep": dep, "policy": policy})

    # -- programs -----------------------------------------------------------------
    def _producer(self, actor: Actor, *, n: int) -> Program:
        for _ in range(n):
            marker = self._next_marker()
            how = 0
            if self.config.rollback_txs:
                how = self.chooser.choose(3, f"{actor.identity} enqueue how")
            if self.config.graphs:
                if self.ledger.graph_jobs and self.chooser.choose(2, f"{actor.identity} shape"):
                    yield self._dependent_op(actor, marker)
                else:
                    yield self._graph_op(actor, marker, rollback=how == 2)
                continue
            if self.config.unique_keys:
                which = self.chooser.choose(self.config.unique_keys, f"{actor.identity} key")
                yield self._unique_op(marker, f"k{which}", rollback=how == 2)
                continue
            key = None
            if self.config.concurrency_keys:
                which = self.chooser.choose(self.config.concurrency_keys, f"{actor.identity} ckey")
                key = f"c{which}"
            if how == 0:
                yield self._enqueue_op(marker, key)
            else:
                yield self._tx_op(marker, rollback=how == 2, key=key)

    def _claim(self, worker: str, now: int, vt: int) -> Plan[list[JobRecord]]:
        """A claim as ``Queue.work`` makes it: one statement on an engine
        that has it (which takes nothing from a limited queue: the worker
        claims a limited queue step by step), otherwise step by step."""
        n, limited = self.config.claim_n, self.ledger.limits.any
        at_once = worker_plans.claim_at_once(self.d, self.queue, worker, n, now, vt,
                                             limited=limited)  # fmt: skip
        if at_once is not None:
            return _jobs(at_once)
        return claim.claim(self.d, self.queue, worker, n, now, vt)

    def _worker(self, actor: Actor) -> Program:
        worker = actor.identity
        vt = self.options.visibility_timeout_us
        while True:
            jobs = yield Op("claim", lambda now: [self._claim(worker, now, vt)])
            if not jobs[0]:
                if self._quiet():
                    return
                yield WAIT
                continue
            job: JobRecord = jobs[0][0]  # the others (claim_n > 1) are left to lapse
            actions = self.config.worker_actions
            action = actions[self.chooser.choose(len(actions), f"{worker} action job {job.id}")]
            if action == "stall":  # holds the claim and walks away
                continue
            if action == "heartbeat":
                yield Op(
                    "heartbeat",
                    lambda now: [claim.heartbeat(self.d, job, now, vt)],
                    meta={"job": job},
                )
                action = "ack"
            result = None
            # ``and`` short-circuits: no choice is drawn outside graph runs
            if (action == "ack" and self.config.graphs
                    and self.chooser.choose(2, f"{worker} result job {job.id}")):  # fmt: skip
                result = codec.encode({"result": job.id})
            if action == "ack":
                plan: Callable[[int], list[Plan[Any]]] = lambda now: [  # noqa: E731
                    claim.ack(self.d, job, now, origin=SIM_ORIGIN, result=result)
                ]
            elif action == "retry":
                plan = lambda now: [  # noqa: E731
                    claim.retry(
                        self.d,
                        job,
                        now,
                        delay_us=US,
                        backoff=self.options.backoff,
                        draw=0.0,
                        error="sim",
                        origin=SIM_ORIGIN,
                    )
                ]
            elif action == "fail":
                plan = lambda now: [claim.fail(self.d, job, now, "sim", origin=SIM_ORIGIN)]  # noqa: E731
            else:
                plan = lambda now: [claim.release(self.d, job, now, refund=True)]  # noqa: E731
            yield Op(action, plan, meta={"job": job, "result": result})

    def _holder(self, actor: Actor) -> Program:
        ttl = round(self.config.lock_ttl_s * US)
        for _ in range(self.config.lock_rounds):
            owner = actor.identity
            got = yield Op("try_lock", lambda now: [locks.try_lock(self.d, "L", owner, now, ttl)])
            record: LockRecord | None = got[0]
            if record is None:
                yield WAIT
                continue
            then = self.chooser.choose(3, f"{owner} lock then")
            if then == 0:
                yield Op(
                    "lock_renew",
                    lambda now: [locks.renew(self.d, record, now, ttl)],
                    meta={"lock": record},
                )
            if then in (0, 1):
                yield Op(
                    "lock_release",
                    lambda now: [locks.release(self.d, record, now)],
                    meta={"lock": record},
                )
            # then == 2: keep it until the TTL lapses

    def _publisher(self, actor: Actor) -> Program:
        for i in range(self.config.events):
            text = codec.encode({"from": actor.identity, "i": i})
            yield Op(
                "publish",
                lambda now: [streams.publish(self.d, "log", None, text, "sim", now)],
            )

    def _reader(self, actor: Actor) -> Program:
        consumer = actor.name
        while True:
            got = yield Op(
                "read",
                lambda now: [streams.read_from_consumer(self.d, "log", consumer, 100)],
                write=False,
                meta={"consumer": consumer},
            )
            events = got[0]
            if not events:
                if self._quiet():
                    return
                yield WAIT
                continue
            last = events[-1].offset
            yield Op(
                "save_offset",
                lambda now: [
                    streams.save_offset(self.d, "log", consumer, last),
                    streams.get_offset(self.d, "log", consumer),
                ],
                meta={"consumer": consumer},
            )

    def _ticker(self, actor: Actor) -> Program:
        attempts = self.config.max_attempts
        for _ in range(self.config.ticks):
            got = yield Op("tick", lambda now: [schedule.tick(self.d, now, "sim", attempts)])
            if not got[0]:
                yield WAIT  # nothing due: a clock jump may make it due

    def _inspector(self, actor: Actor) -> Program:
        """Lists the workers' queue (every state, one page) whenever
        something committed, as ``alkstore jobs`` and the dashboard do."""
        for _ in range(self.config.inspections):
            # What had committed when the listing began: each of these still
            # there when it ends must be in it (``Ledger.listed``).
            present = set(self.ledger.enqueued) - self.ledger.acked
            yield Op(
                "list_jobs",
                lambda now: [inspection.list_jobs(self.d, self.queue, None, 0, 1000, now)],
                write=False,
                meta={"present": present},
            )
            yield WAIT

    def _quiet(self) -> bool:
        """No producer or publisher has work left: idle actors may finish."""
        return all(a.done for a in self.actors if a.kind in ("producer", "publisher"))


def _jobs(plan: Plan[worker_plans.ClaimResult | None]) -> Plan[list[JobRecord]]:
    result = yield from plan
    return [] if result is None else result.jobs
