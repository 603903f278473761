"""Deterministic simulation: many actors, one SQLite database, every
interleaving of their statements decided by a chooser.

Each actor (producer, worker, lock holder, stream publisher or reader) runs a
program of operations; each operation is one transaction of the core's plans,
run on the actor's own connection one statement per step. SQLite's own locks
decide who blocks (a writer waits while another holds the write lock), so the
interleavings are the ones a real deployment can produce. Between steps the
chooser may also crash an actor (its connection closes, its open transaction
rolls back, it restarts with a new identity) or jump the virtual clock past a
timeout. After every step the invariants are checked against what committed.

Runs are deterministic: a seed (``SeededChooser``) or a path of choices
(``PathChooser``, for exhaustive exploration) replays the same run exactly.

This module is the stepping engine (``Simulation``: scheduling, steps,
faults, the drain); what runs is ``Config`` (``config.py``), the actors and
their programs are in ``actors.py``, the invariants in ``invariants.py``,
seeded runs and shrinking in ``shrinking.py``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..protocol.plan import FinalStatementError, Statement
from ..protocol.plans import claim, queues, schedule
from ..protocol.values import codec, schedules
from ..protocol.values.errors import AlkstoreError, DatabaseError
from ..protocol.values.names import check_name
from ..protocol.values.types import QueueLimits, QueueOptions, Rate
from .actors import GRAPH, SIM_ORIGIN, US, WAIT, Actor, Op, Program, Programs
from .choices import Chooser
from .config import Config
from .invariants import Ledger, SimulationFailure, _Violation
from .sim_backend import SimBackend, SimConn
from .sim_sqlite import SqliteSimBackend

START_US = 1_700_000_000 * US


class _TxRun:
    """An operation in progress: at most one SQL statement per ``step``.

    Stages: ``begin`` (BEGIN not yet run), ``stmts`` (the next statement is
    ready to send), ``sent`` (in flight: the engine may hold it on a lock
    until another actor's step releases it; ``collect`` takes its result),
    ``end`` (COMMIT or ROLLBACK is next).
    """

    def __init__(self, op: Op, conn: SimConn, now: int) -> None:
        self.op = op
        self.conn = conn
        self.now = now
        self.plans = op.plans(now)
        self.index = 0
        self.stage = "begin"
        self.statement: Statement | None = None
        self.values: list[Any] = []
        self.error: BaseException | None = None
        self.waited = False  # its statement in flight was seen waiting on a lock

    def _advance(self, result: Any, first: bool) -> None:
        """Get the next statement to run, moving across plans as they finish."""
        try:
            while self.index < len(self.plans):
                plan = self.plans[self.index]
                final = not first and self.statement is not None and self.statement.final
                try:
                    self.statement = next(plan) if first else plan.send(result)
                    if final:
                        plan.close()
                        raise FinalStatementError(self.statement)
                    return
                except StopIteration as stop:
                    self.values.append(stop.value)
                    self.index += 1
                    first = True
                    result = None
        except AlkstoreError as exc:  # the plan refused: the transaction rolls back
            self.error = exc
        self.statement = None
        self.stage = "end"

    def step(self) -> str:
        """Run one statement: 'blocked' (the engine refused BEGIN for now),
        'progress' or 'done'."""
        if self.stage == "begin":
            if not self.conn.begin(self.op.write):
                return "blocked"
            self.stage = "stmts"
            self._advance(None, True)
            return "progress"
        if self.stage == "stmts":
            assert self.statement is not None
            self.conn.send(self.statement)
            self.stage = "sent"
            return "progress"
        if self.stage == "sent":
            raise RuntimeError("stepped while its statement is in flight")
        self.conn.finish(self.committing)
        return "done"

    def collect(self) -> None:
        """Take the finished statement's result and ready the next one."""
        assert self.statement is not None
        try:
            result = self.conn.result(self.statement.fetch)
        except DatabaseError as exc:
            # Under any interleaving a plan's statement must succeed: a
            # failure here (a deadlock, a unique violation between racing
            # writers) is an error the user would have seen.
            raise _Violation(f"{self.op.kind}: the engine refused a statement: {exc}") from exc
        self.stage = "stmts"
        self._advance(result, False)

    @property
    def committing(self) -> bool:
        return self.error is None and not self.op.rollback

    @property
    def runnable(self) -> bool:
        return self.stage != "sent"

    @property
    def holds_writer(self) -> bool:
        return self.op.write and self.stage != "begin"


@dataclass
class _Stepped(Actor):
    """An actor as the engine steps it: its program under way, the
    transaction in progress (``run``), what the program is sent next, and
    whether it waits for something to change before it is primed again."""

    program: Program | None = None
    run: _TxRun | None = None
    send_value: Any = None
    waiting: bool = False


# -- the simulation -----------------------------------------------------------


class Simulation(Programs):
    """One run of ``config``, every choice taken by ``chooser``.

    ``backend`` is the engine it runs on (SQLite by default, see
    ``sim_sqlite``/``sim_postgres``); ``dialect`` is a shortcut for a SQLite
    backend with that dialect (a deliberately broken one, in tests).
    """

    def __init__(
        self,
        config: Config,
        chooser: Chooser,
        *,
        dialect: Any = None,
        path: Path | None = None,
        backend: SimBackend | None = None,
    ) -> None:
        self.config = config
        self.chooser = chooser
        if backend is None:
            backend = SqliteSimBackend(dialect, path)
        self.now = START_US
        self.trace: list[str] = []
        self.ledger = Ledger()
        self.queue = check_name("jobs")
        self.options = QueueOptions.of(config.visibility_timeout_s, config.max_attempts)
        self.db = backend.open_run([f"ch-m{i}" for i in range(1, config.jobs + 1)])
        self.d = self.db.dialect
        self.actors: list[_Stepped] = []
        try:
            self.driver = self.db.connect()  # set-up and the final drain
            self._ended = False
            self.crashes_left = config.crashes
            self.drops_left = config.drops
            self.jumps_left = config.clock_jumps
            self._marker = 0
            self._build()
        except BaseException:
            self.close()
            raise

    # -- set-up --------------------------------------------------------------
    def _actor(self, name: str, kind: str, make: Callable[[Actor], Program]) -> None:
        self.actors.append(_Stepped(name, kind, make, self.db.connect()))

    def _build(self) -> None:
        c = self.config
        if c.keep_history:
            self._run_alone(Op("retention", lambda now: [queues.set_retention(
                self.d, self.queue, 86_400 * US, None,
            )]), "setup")  # fmt: skip
        concurrency = c.concurrency_limit if c.concurrency_keys else None
        period = timedelta(seconds=c.rate_period_s)
        limits = QueueLimits(
            concurrency,
            None if c.rate_limit is None else Rate(c.rate_limit, period),
            None if c.key_rate_limit is None else Rate(c.key_rate_limit, period),
        )
        if limits.any:
            self.ledger.limits = limits
            self._run_alone(Op("limits", lambda now: [
                queues.set_limits(self.d, self.queue, limits),
            ]), "setup")  # fmt: skip
        if c.pre_enqueued:
            for i in range(c.jobs):
                key = f"c{i % c.concurrency_keys}" if c.concurrency_keys else None
                self._run_alone(self._enqueue_op(self._next_marker(), key), "setup")
        else:
            share = [c.jobs // c.producers + (i < c.jobs % c.producers) for i in range(c.producers)]
            for i, n in enumerate(share):
                self._actor(f"producer{i}", "producer", functools.partial(self._producer, n=n))
        for i in range(c.workers):
            self._actor(f"worker{i}", "worker", self._worker)
        for i in range(c.lock_holders):
            self._actor(f"holder{i}", "holder", self._holder)
        for i in range(c.publishers):
            self._actor(f"publisher{i}", "publisher", self._publisher)
        for i in range(c.readers):
            self._actor(f"reader{i}", "reader", self._reader)
        for i in range(c.inspectors):
            self._actor(f"inspector{i}", "inspector", self._inspector)
        if c.tickers:
            expr = schedules.parse(f"@every {c.schedule_every_s}s")
            policy = schedules.CatchUp.of(c.catch_up, c.catch_up_max)
            self._run_alone(Op("register", lambda now: [schedule.register(
                self.d, "S", self.queue, expr, codec.encode({"marker": "scheduled"}),
                schedules.ScheduleOptions(), now, policy,
            )]), "setup")  # fmt: skip
            self.ledger.catch_up_max["S"] = policy.cap or 1
            # due when the tickers start, ``missed_fire_times`` times over
            self.now += c.missed_fire_times * c.schedule_every_s * US
        for i in range(c.tickers):
            self._actor(f"ticker{i}", "ticker", self._ticker)

    def _run_alone(self, op: Op, who: str) -> list[Any]:
        """Run ``op`` to its end on the driver connection (no actor runs)."""
        run = _TxRun(op, self.driver, self.now)
        while (outcome := run.step()) != "done":
            if outcome == "blocked":  # no actor runs now: nobody could let it in
                self.ledger.fail(f"{who}: {op.kind} refused: a transaction was left open")
            if run.stage == "sent":
                self.db.settle([self.driver])
                if run.stage == "sent":
                    if self.driver.waiting:
                        self.ledger.fail(f"{who}: {op.kind} waits on a lock no one will release")
                    run.collect()
        self._committed(op, run.values, self.now, who)
        return run.values

    # -- commits update the ledger ---------------------------------------------
    def _committed(self, op: Op, values: list[Any], now: int, who: str) -> None:
        led = self.ledger
        kind = op.kind
        if kind == "enqueue":
            led.enqueued[values[0]] = op.meta["marker"]
            led.concurrency_key[values[0]] = op.meta.get("key")
        elif kind == "tx":
            if op.rollback:
                led.rolled_back_markers.add(op.meta["marker"])
            else:
                led.enqueued[values[0]] = op.meta["marker"]
                led.concurrency_key[values[0]] = op.meta.get("key")
                led.published.setdefault("events", []).append(values[1])
        elif kind == "enqueue_unique":
            if op.rollback:
                led.rolled_back_markers.add(op.meta["marker"])
            elif not values[0].duplicate:
                led.enqueued[values[0].id] = op.meta["marker"]
        elif kind == "graph":
            markers = {f"{op.meta['marker']}{name}" for name in GRAPH}
            if op.rollback:
                led.rolled_back_markers |= markers
            else:
                _, ids = values[0]
                for name, job_id in ids.items():
                    led.enqueued[job_id] = f"{op.meta['marker']}{name}"
                    led.graph_jobs.append(job_id)
                    if GRAPH[name]:
                        deps = tuple(ids[dep] for dep in GRAPH[name])
                        led.depends(job_id, deps, op.meta["policies"][name])
        elif kind == "dependent":
            (job_id,) = values[0]
            led.enqueued[job_id] = op.meta["marker"]
            led.graph_jobs.append(job_id)
            led.depends(job_id, (op.meta["dep"],), op.meta["policy"])
        elif kind == "claim":
            led.claimed(values[0], now)
        elif kind in ("ack", "retry", "fail", "release"):
            led.settled(op.meta["job"], kind, bool(values[0]), now)
            if kind == "ack" and values[0] and op.meta.get("result") is not None:
                led.results[op.meta["job"].id] = op.meta["result"]
        elif kind == "heartbeat":
            job = op.meta["job"]
            led.settled(job, "heartbeat", bool(values[0]), now)
            if values[0]:
                led.extended(job, now + self.options.visibility_timeout_us)
        elif kind in ("try_lock", "lock_renew") and values[0] is not None:
            led.granted(values[0], now)
        elif kind == "lock_release" and values[0]:
            led.lock_ended(op.meta["lock"])
        elif kind == "tick":
            fired = values[0] or []
            led.ticked([(f.schedule, f.fire_at_us) for f in fired], now)
            for fire in fired:
                led.fired_at(fire.schedule, fire.fire_at_us)
                led.enqueued[fire.job_id] = "scheduled"
        elif kind == "publish":
            led.published.setdefault("log", []).append(values[0])
        elif kind == "read":
            after = led.read_upto.get(op.meta["consumer"], 0)
            offsets = [e.offset for e in values[0]]
            saved = led.saved.get(("log", op.meta["consumer"]), 0)
            led.read(("log"), saved, offsets)
            if offsets:
                led.read_upto[op.meta["consumer"]] = max(after, offsets[-1])
        elif kind == "save_offset":
            led.saved_offset("log", op.meta["consumer"], values[1])
        elif kind == "list_jobs":
            led.listed([job.id for job in values[0]], op.meta["present"])

    def _check_store(self) -> None:
        """Invariants over the committed rows, as an observer reads them."""
        snap = self.db.snapshot()
        led = self.ledger
        cancelled = {job_id for job_id, what, _ in snap.history if what == "cancelled"}
        # a committed job is never lost: it is waiting, pending, processing,
        # dead, acked or cancelled (by a failed dependency)
        lost = set(led.enqueued) - snap.job_ids - set(snap.waiting_ids) - led.acked - cancelled
        if lost:
            led.fail(f"committed jobs lost: {sorted(lost)}")
        # an acked job is gone for good
        if snap.job_ids & led.acked:
            led.fail(f"acked jobs still present: {sorted(snap.job_ids & led.acked)}")
        if self.config.graphs:
            led.dependencies_hold(snap)
        else:
            # a job acked while its queue keeps history is in history exactly
            # once (and never live or dead beside it); without history, none is
            kept = led.acked if self.config.keep_history else set()
            if snap.history_ids != kept:
                led.fail(f"history holds {sorted(snap.history_ids)}, acked {sorted(kept)}")
        # two live jobs of a queue never hold one unique key
        seen = Counter(snap.live_unique_keys)
        twice = sorted(k for k, n in seen.items() if n > 1)
        if twice:
            led.fail(f"two live jobs hold unique key(s) {twice}")
        # no attempt row outlives its job's record (live, waiting, dead or history)
        orphans = snap.attempt_job_ids - snap.job_ids - set(snap.waiting_ids) - snap.history_ids
        if orphans:
            led.fail(f"attempt rows outlive their jobs: {sorted(orphans)}")
        # a rolled-back transaction leaves no trace and wakes nobody
        wakes = {c.removeprefix("ch-") for c in snap.woken_channels}
        leaked = (snap.job_markers | snap.event_markers | wakes) & led.rolled_back_markers
        if leaked:
            led.fail(f"rolled-back transactions left traces: {sorted(leaked)}")

    # -- scheduling ---------------------------------------------------------------
    def _writer_busy(self, actor: _Stepped) -> bool:
        return self.db.exclusive_writer and any(
            a is not actor and a.run is not None and a.run.holds_writer for a in self.actors
        )

    def _prime(self, actor: _Stepped) -> None:
        """Advance the actor's program to its next operation (no SQL runs here)."""
        while actor.run is None and not actor.done and not actor.waiting:
            if actor.program is None:
                actor.program = actor.make_program(actor)
                value = None
            else:
                value = actor.send_value
            try:
                op = actor.program.send(value) if value is not None else next(actor.program)
            except StopIteration:
                actor.done = True
                return
            if op is WAIT:
                actor.waiting = True
                actor.send_value = None
                return
            actor.run = _TxRun(op, actor.conn, self.now)

    def _options(self) -> list[tuple[str, _Stepped | None]]:
        opts: list[tuple[str, _Stepped | None]] = []
        for actor in self.actors:
            self._prime(actor)
            if actor.run is None or not actor.run.runnable:
                continue  # idle, or its statement waits on another's lock
            if actor.run.stage == "begin" and actor.run.op.write and self._writer_busy(actor):
                continue  # blocked on the write lock: stepping it changes nothing
            opts.append(("step", actor))
        stuck = [a.identity for a in self.actors if a.run is not None and not a.run.runnable]
        if stuck and not opts:
            # everyone left waits on someone else's lock
            self.ledger.fail(f"deadlock: {', '.join(stuck)} wait on locks no one will release")
        if self.crashes_left:
            opts.extend(("crash", a) for a in self.actors if not a.done and a.kind == "worker")
        if self.drops_left:
            # only a connection with a transaction open: dropping an idle one
            # changes nothing the actor could notice
            opts.extend(
                ("drop", a) for a in self.actors if a.run is not None and a.run.stage != "begin"
            )
        if self.jumps_left:
            opts.append(("jump", None))
        return opts

    def _settle(self) -> None:
        """Let the engine finish what it can; collect every finished statement."""
        in_flight = [a for a in self.actors if a.run is not None and a.run.stage == "sent"]
        if not in_flight:
            return
        self.db.settle([a.conn for a in in_flight])
        for actor in in_flight:
            run = actor.run
            assert run is not None
            if actor.conn.waiting:
                if not run.waited:
                    run.waited = True
                    self.trace.append(f"{actor.identity}: {run.op.kind}: waits on a lock")
                continue
            if run.waited:
                run.waited = False
                self.trace.append(f"{actor.identity}: {run.op.kind}: lock granted")
            run.collect()

    def _step(self, actor: _Stepped) -> None:
        run = actor.run
        assert run is not None
        if run.stage == "begin":
            # The operation's clock reading, taken when it was issued (a
            # CLOCK step may come between it and its statements).
            what = f"BEGIN (now +{(run.now - START_US) / US:g}s)"
        elif run.stage == "stmts" and run.statement is not None:
            what = " ".join(run.statement.sql.split()[:3])
        else:
            what = "COMMIT" if run.committing else "ROLLBACK"
        outcome = run.step()
        self.trace.append(
            f"{actor.identity}: {run.op.kind}: {what}{' (blocked)' if outcome == 'blocked' else ''}"
        )
        if outcome == "blocked":
            return
        if outcome == "done":
            actor.run = None
            self._ended = True
            if run.error is None:
                # a rollback op is recorded too: its marker must leave no trace
                self._committed(run.op, run.values, run.now, actor.identity)
            elif run.op.kind in ("graph", "dependent"):
                # every job of a graph run is kept, so whatever a new job
                # waits for is still recorded: nothing may refuse it
                self.ledger.fail(f"{run.op.kind}: refused: {run.error}")
            found_nothing = run.op.kind in ("claim", "read", "tick") and not run.values[0]
            if run.committing and not found_nothing:
                for other in self.actors:
                    other.waiting = False  # something changed: idle actors look again
            actor.send_value = run.values if run.error is None else []
            if actor.send_value == []:
                actor.send_value = [None]

    def _drop(self, actor: _Stepped) -> None:
        """The connection dies under an open transaction: it rolls back, the
        operation fails as the API would report it, the program goes on."""
        self.drops_left -= 1
        run = actor.run
        assert run is not None
        self.trace.append(f"{actor.identity}: {run.op.kind}: CONNECTION DROPPED")
        actor.conn.crash()
        actor.conn = self.db.connect()
        actor.run = None
        actor.send_value = [None]  # what a failed operation sends back

    def _crash(self, actor: _Stepped) -> None:
        self.crashes_left -= 1
        self.trace.append(f"{actor.identity}: CRASH")
        actor.conn.crash()  # an open transaction rolls back, its locks go
        actor.conn = self.db.connect()
        actor.incarnation += 1
        actor.program = None
        actor.run = None
        actor.send_value = None
        actor.waiting = False

    def _jump(self) -> None:
        self.jumps_left -= 1
        step = round(max(self.config.visibility_timeout_s, self.config.lock_ttl_s) * US) + US
        self.now += step
        self.trace.append(f"CLOCK +{step / US:g}s")
        for actor in self.actors:
            actor.waiting = False

    def run(self) -> int:
        """Run to quiescence, drain, check; returns the number of steps taken."""
        steps = 0
        try:
            while steps < self.config.max_steps:
                options = self._options()
                if not options:
                    break
                kind, actor = options[self.chooser.choose(len(options), "schedule")]
                if kind == "step":
                    assert actor is not None
                    self._step(actor)
                elif kind == "crash":
                    assert actor is not None
                    self._crash(actor)
                elif kind == "drop":
                    assert actor is not None
                    self._drop(actor)
                else:
                    self._jump()
                self._settle()
                steps += 1
                # Only a COMMIT or ROLLBACK changes what has committed (a
                # crash rolls back what nobody else could see; a clock jump
                # moves no row), so the store is checked after those alone.
                if self._ended:
                    self._ended = False
                    self._check_store()
            self._abandon_open_transactions()
            self._drain()
        except _Violation as exc:
            seed = getattr(self.chooser, "seed", None)
            taken = getattr(self.chooser, "taken", None)
            raise SimulationFailure(str(exc), self.trace, seed, taken) from None
        finally:
            self.close()
        return steps

    def _abandon_open_transactions(self) -> None:
        """A run cut short by ``max_steps`` may leave transactions open: they
        roll back (as if their actors crashed) so the drain is not blocked
        by, or blind to, rows they lock."""
        for actor in self.actors:
            if actor.run is not None and actor.run.stage != "begin":
                self.trace.append(f"{actor.identity}: {actor.run.op.kind}: abandoned (max_steps)")
                actor.conn.crash()
                actor.conn = self.db.connect()
                actor.run = None

    def _sweep_op(self) -> Op:
        return Op("sweep", lambda now: [claim.sweep(self.d, None, now, origin=SIM_ORIGIN)])

    def _drain(self) -> None:
        """After the run: time passes, the sweep and a fresh worker finish
        everything; then no committed job may be left anywhere."""
        self.now += 3600 * US
        self._run_alone(self._sweep_op(), "drainer")
        for _ in range(10 * max(1, self.config.jobs)):
            self.now += round(self.options.visibility_timeout_us * 2)
            op = Op("claim", lambda now: [claim.claim(self.d, self.queue, "drainer", 10, now, US)])
            jobs = self._run_alone(op, "drainer")[0]
            if not jobs:
                break
            for job in jobs:
                ack = Op("ack", lambda now: [claim.ack(self.d, job, now, origin=SIM_ORIGIN)],
                         meta={"job": job})  # fmt: skip
                self._run_alone(ack, "drainer")
        self._run_alone(self._sweep_op(), "drainer")
        self._check_store()
        live = self.db.live_job_ids()
        # nothing is stranded: after the drain every job is acked or dead
        if live:
            self.ledger.fail(f"jobs stranded after the drain: {live}")
        waiting = self.db.snapshot().waiting_ids
        # nothing waits after the drain: each dependent was released or cancelled
        if waiting:
            self.ledger.fail(f"jobs still waiting after the drain: {sorted(waiting)}")

    def close(self) -> None:
        """End the run: every connection it handed out, crashed ones included."""
        self.db.close()  # every connection it handed out, crashed ones included
