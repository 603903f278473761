"""Fuzz target: every public method with integer, name, duration, instant or
payload parameters, on a real SQLite store and a real Postgres store at once.

Covered (``COVERS`` below maps each method to its entries, ``NOT_FUZZED``
names the few left out and why; a test in tests/fuzz checks both against the
API): the store's ``queue``, ``stream``, ``outbox`` (with their options),
``notify``, ``listen``, ``try_lock``, ``hold_lock``, ``schedule``,
``unschedule``, ``run_schedules``, ``run_schedule_now``, ``run_scheduler``, ``pause_schedule``,
``resume_schedule``, ``get_job`` and ``prune``, and every read model (listed after the
fuzzed writes, so what they stored must read back); every ``Queue``
method with arguments, ``enqueue``/``enqueue_batch`` with all their options
and ``work``'s five arguments together and one at a time;
``Job.ack/retry/fail/heartbeat/release`` on a freshly claimed job and
``Lock.renew/release`` on a held lock; every ``Stream`` method with
arguments; ``EventReceiver.recv_timeout/read_since`` and
``WakeReceiver.recv_timeout``; the ``Outbox`` methods with arguments; and the
transaction handle's ``enqueue``, ``outbox_enqueue`` (with their options),
``publish``, ``publish_with_key``, ``notify`` and ``save_offset``.

Property: each call either succeeds on both engines or raises the same
contract error on both (``InvalidArgument``, ``InvalidName``,
``ReservedName``, ``CodecError``; ``PayloadTooLarge`` for a notify payload
over Postgres's limit, on Postgres only), never anything else (no raw
sqlite3/psycopg, Overflow, Type or Attribute error); and a call that raised
left every alkstore table of its engine exactly as it was. A transaction
method runs inside a transaction that catches the refusal and commits, so a
partial write would show. What a settled job, a renewed lock, a claim
with the queue's options or a fired schedule stored must read back (an
instant past what a datetime holds would raise on every later read). The
long-running methods (``work``, ``run_scheduler``) must refuse bad arguments
at once; given good ones they run for a moment and must log nothing at
WARNING or above.

The first byte of an input picks the entry (``NAMES[data[0] % len]``), the
rest its arguments; an entry's first run on both engines prints
``fuzz_api: ran <entry> on both engines`` (``tests/fuzz`` seeds one input
per entry and checks every entry ran).

Needs PostgreSQL at ``$ALKSTORE_DSN`` (default: the local test server).
Run: ``python fuzz/fuzz_api.py -atheris_runs=2000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sqlite3
import sys
import tempfile
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import atheris
import fuzzvalues as fv
import psycopg
import trio

with atheris.instrument_imports():
    from alkstore import (
        CodecError,
        EventReceiver,
        InvalidArgument,
        InvalidName,
        Job,
        JobCancelled,
        JobFailed,
        Lock,
        PayloadTooLarge,
        Rate,
        ReservedName,
        ResultTimeout,
        Store,
        WakeReceiver,
    )
    from alkstore.io_trio import PostgresOptions, SqliteOptions, open_postgres, open_sqlite

DSN = os.environ.get("ALKSTORE_DSN", "postgresql://postgres@127.0.0.1:5432/test")
# Named like the test suite's schemas, so a later test session drops it if
# this process could not.
SCHEMA = f"alk_t_{os.getpid()}_{uuid.uuid4().hex[:10]}"
ALLOWED = (InvalidArgument, InvalidName, ReservedName, CodecError, PayloadTooLarge)
# Start afresh now and then, so the tables stay small.
RESET_EVERY = 200


class Engines:
    """A SQLite and a Postgres store, open in a trio thread of their own."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="alkstore-fuzz-")
        self.path = os.path.join(self.dir, "fuzz.db")
        self.stores: dict[str, Store] = {}
        self._token: Any = None
        self._stop: trio.Event | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main, ready), daemon=True)
        self._thread.start()
        if not ready.wait(60) or not self.stores:
            raise RuntimeError("could not open the stores (is PostgreSQL up?)")
        self.sqlite = sqlite3.connect(self.path, isolation_level=None)
        self.pg = psycopg.connect(DSN, autocommit=True)
        self.calls = 0
        self._pg_query: str | None = None
        atexit.register(self.close)

    async def _main(self, ready: threading.Event) -> None:
        pg_options = PostgresOptions(schema=SCHEMA, pool_size=2, housekeeping_interval=None)
        try:
            async with (
                # No housekeeping passes: they write, and would look like a
                # refused call that wrote something.
                open_sqlite(self.path, options=SqliteOptions(housekeeping_interval=None)) as sq,
                open_postgres(DSN, options=pg_options) as pg,
            ):
                self.stores = {"sqlite": sq, "postgres": pg}
                self._token = trio.lowlevel.current_trio_token()
                self._stop = trio.Event()
                ready.set()
                await self._stop.wait()
        finally:
            ready.set()

    def run(self, fn: Callable[[Store], Awaitable[Any]], engine: str) -> Any:
        async def call() -> Any:
            with trio.fail_after(10):
                return await fn(self.stores[engine])

        return trio.from_thread.run(call, trio_token=self._token)

    def tables(self, engine: str) -> list[str]:
        if engine == "sqlite":
            rows = self.sqlite.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name LIKE '\\_\\_alkstore\\_%' ESCAPE '\\' "
                "AND name != '__alkstore_notifications' ORDER BY name"
            ).fetchall()
            return [f'"{r[0]}"' for r in rows]
        rows = self.pg.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            (SCHEMA,),
        ).fetchall()
        return [f'"{SCHEMA}"."{r[0]}"' for r in rows]

    def fingerprint(self, engine: str) -> Any:
        """Changes whenever anything is written to an alkstore table.

        SQLite: ``data_version`` of a connection of our own, which moves on
        every commit of another connection that changed the file. Postgres:
        per table, the row count and the newest row version (``xmin``), in
        one query."""
        if engine == "sqlite":
            return self.sqlite.execute("PRAGMA data_version").fetchone()[0]
        if self._pg_query is None:
            parts = [
                f"SELECT {i}, count(*), max(xmin::text::bigint) FROM {table}"
                for i, table in enumerate(self.tables("postgres"))
            ]
            self._pg_query = " UNION ALL ".join(parts)
        return self.pg.execute(self._pg_query).fetchall()

    def reset(self) -> None:
        for engine in ("sqlite", "postgres"):
            for table in self.tables(engine):
                if "meta" in table:
                    continue
                if engine == "sqlite":
                    self.sqlite.execute(f"DELETE FROM {table}")
                else:
                    self.pg.execute(f"DELETE FROM {table}")

    def close(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            self._thread.join(30)
        with contextlib.suppress(psycopg.Error):
            self.pg.execute(f'DROP SCHEMA IF EXISTS "{SCHEMA}" CASCADE')


ENGINES: Engines | None = None


# -- argument values: mostly plausible, often at the edges, sometimes junk ----------------
def an_int(fdp: atheris.FuzzedDataProvider) -> Any:
    choice = fdp.ConsumeIntInRange(0, 9)
    if choice <= 5:
        return fv.any_int(fdp)
    if choice == 6:
        return fdp.PickValueInList([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**31])
    return fv.any_scalar(fdp)


def a_name(fdp: atheris.FuzzedDataProvider) -> Any:
    choice = fdp.ConsumeIntInRange(0, 9)
    if choice <= 5:
        return fv.any_text(fdp)
    if choice == 6:
        return "__alkstore_" + fv.any_text(fdp, 8)
    return fv.any_scalar(fdp)


def a_duration(fdp: atheris.FuzzedDataProvider) -> Any:
    choice = fdp.ConsumeIntInRange(0, 9)
    if choice <= 3:
        return fv.any_float(fdp)
    if choice <= 5:
        return fv.any_timedelta(fdp)
    if choice <= 7:
        return fdp.ConsumeIntInRange(-5, 10**7)
    return fv.any_scalar(fdp)


def an_instant(fdp: atheris.FuzzedDataProvider) -> Any:
    if fdp.ConsumeIntInRange(0, 4) == 0:
        return fv.any_scalar(fdp)
    return fv.any_datetime(fdp)


def a_payload(fdp: atheris.FuzzedDataProvider) -> Any:
    return fv.any_value(fdp, 3)


def a_flag(fdp: atheris.FuzzedDataProvider) -> Any:
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return fv.any_scalar(fdp)
    return fdp.ConsumeBool()


def a_state(fdp: atheris.FuzzedDataProvider) -> Any:
    """What ``Queue.list_jobs`` takes as ``state``: mostly one it knows."""
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return fv.any_scalar(fdp)
    states = ["ready", "scheduled", "pending", "processing", "dead", "acked", "cancelled"]
    return fdp.PickValueInList([None, *states])


def an_error(fdp: atheris.FuzzedDataProvider) -> Any:
    """What ``Job.retry/fail`` take as ``error``: text, an exception, None, or junk."""
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice <= 1:
        return fv.any_text(fdp)
    if choice == 2:
        return ValueError(fv.any_text(fdp))
    if choice == 3:
        return None
    return fv.any_value(fdp, 2)


KINDS: dict[str, Callable[[atheris.FuzzedDataProvider], Any]] = {
    "int": an_int,
    "name": a_name,
    "duration": a_duration,
    "instant": an_instant,
    "payload": a_payload,
    "flag": a_flag,
    "error": an_error,
    "state": a_state,
}


async def _in_tx(store: Store, body: Callable[[Any], Awaitable[Any]]) -> None:
    """Run ``body`` in a transaction that commits even when ``body`` is
    refused, then re-raise the refusal: a refused call that wrote part of its
    work would otherwise be hidden by the rollback."""
    refused: BaseException | None = None
    async with store.transaction() as tx:
        try:
            await body(tx)
        except ALLOWED as exc:
            refused = exc
    if refused is not None:
        raise refused


async def _sync(make: Callable[[], Any]) -> Any:
    return make()


async def _enter(cm: Any) -> None:
    async with cm:
        pass


# A moment for a waiting call given a valid timeout, and for a long-running
# one (a worker, the scheduler) given valid arguments, to show what it does.
MOMENT = 0.05


async def _recv_timeout(receiver: WakeReceiver | EventReceiver, seconds: Any) -> None:
    async with receiver:
        with trio.move_on_after(MOMENT):
            await receiver.recv_timeout(seconds)


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def _briefly(run: Callable[[], Awaitable[Any]]) -> None:
    """A method that runs until cancelled: it refuses bad arguments at once
    (before anything is claimed or written); with good ones it runs for a
    moment and logs no warning or error (a worker that accepted arguments it
    cannot use logs a failed claim at every poll)."""
    caught = _Warnings()
    logger = logging.getLogger("alkstore")
    logger.addHandler(caught)
    try:
        with trio.move_on_after(MOMENT):
            await run()
            raise AssertionError("returned without being cancelled")
    finally:
        logger.removeHandler(caught)
    if caught.records:
        record = caught.records[0]
        raise AssertionError(f"accepted its arguments, then logged {record.levelname}: "
                             f"{record.getMessage()[:300]}")  # fmt: skip


async def _result(s: Store, job_id: Any, timeout: Any) -> None:
    """``Queue.result``: refuses bad arguments at once; with good ones, how
    the job ended (or that it has not, within ``timeout`` or a moment) is an
    answer, not a refusal."""
    with contextlib.suppress(ResultTimeout, JobFailed, JobCancelled), trio.move_on_after(MOMENT):
        await s.queue("q").result(job_id, timeout=timeout)


async def _workflow(s: Store, name: Any, step: Any, queue: Any, in_tx: bool) -> None:
    """A two-step workflow (``step``, then "last" after it), enqueued alone
    or in a transaction, then read back."""
    wf = s.workflow(name)
    first = wf.step(step, queue, 1)
    wf.step("last", queue, 2, after=[first])
    if in_tx:
        await _in_tx(s, lambda tx: tx.enqueue_workflow(wf))
        return
    run = await wf.enqueue()
    await run.status()


async def _handler(job: Job) -> None:
    pass


def _work(s: Store, **options: Any) -> Awaitable[None]:
    """``Queue.work`` on a queue of its own (empty, bar a fuzzed enqueue)."""
    options.setdefault("poll_interval", 0.01)
    return _briefly(lambda: s.queue("wq").work(_handler, **options))


async def _deliver(payload: Any) -> None:
    pass


def _hold_name(name: Any) -> Any:
    """``hold_lock``'s lock names live apart from ``try_lock``'s, which holds
    names for a long time: a contended ``hold_lock`` would wait its timeout."""
    return name + "/hold" if isinstance(name, str) and name else name


# -- subjects: made before the call is fingerprinted, so making them is not
# taken for a write by the call ---------------------------------------------------
async def _claimed_job(s: Store) -> Job:
    q = s.queue("jobs")
    await q.enqueue(1)
    job = await q.claim_one("fuzzer")
    assert job is not None
    return job


async def _held_lock(s: Store) -> Lock:
    lock = await s.try_lock("fuzz-lock", "fuzzer", 600)
    assert lock is not None
    return lock


async def _wake_receiver(s: Store) -> WakeReceiver:
    return s.listen("fuzz-channel")


async def _event_receiver(s: Store) -> EventReceiver:
    return s.stream("s").subscribe("fuzz-consumer")


async def _opened_event_receiver(s: Store) -> EventReceiver:
    receiver = s.stream("s").subscribe("fuzz-consumer")
    await receiver.__aenter__()
    return receiver


# -- read-backs: what a call that returned wrote must read back (an instant
# stored past what a datetime holds would raise on every later read) ----------------
async def _read_job(job: Job) -> None:
    for attr in ("run_at", "created_at", "expires_at", "claim_expires_at"):
        getattr(job, attr)
    queue: Any = job.store.queue(job.queue)  # reads take no options
    await queue.get_job(job.id)
    await queue.dead_letters(1000)
    await queue.next_due()


async def _job_then_read(job: Job, settle: Awaitable[Any]) -> None:
    await settle
    await _read_job(job)


async def _claim_then_read(q: Any) -> None:
    await q.enqueue(1)
    for job in await q.claim_batch("fuzzer", 1):
        await _read_job(job)


async def _lock_then_read(lock: Lock, renew: Awaitable[Any]) -> None:
    await renew
    lock.expires_at  # noqa: B018


async def _try_lock_then_read(s: Store, name: Any, owner: Any, ttl: Any) -> None:
    lock = await s.try_lock(name, owner, ttl)
    if lock is not None:
        lock.expires_at  # noqa: B018


async def _schedule_then_fire(s: Store, expires_after: Any, max_attempts: Any) -> None:
    """A schedule due now, fired at once: its job must read back."""
    await s.schedule("fire-now", "fired", "@every 1ms", 1, expires_after=expires_after,
                     max_attempts=max_attempts)  # fmt: skip
    await trio.sleep(0.002)  # past its first fire time
    await s.run_schedules()
    await s.unschedule("fire-now")
    q = s.queue("fired")
    for job in await q.claim_batch("fuzzer", 100):
        await _read_job(job)
        await job.ack()


async def _inspect(s: Store) -> None:
    """Every read model, over whatever the fuzzed calls stored."""
    await s.list_queues()
    await s.list_streams()
    await s.list_locks()
    await s.list_schedules()
    await s.stream("s").info()
    await s.queue("q").list_jobs(limit=1000)


async def _then_list_schedules(change: Awaitable[Any], s: Store) -> None:
    await change
    await s.list_schedules()


async def _read_and_close(r: EventReceiver, offset: Any, limit: Any) -> Any:
    try:
        return await r.read_since(offset, limit)
    finally:
        r.close()


# name -> (argument kinds, call[, subject]). Each call gets the store (or, with
# a subject, what the subject made of the store beforehand) and its arguments.
Call = Callable[..., Awaitable[Any]]
Subject = Callable[[Store], Awaitable[Any]]
METHODS: dict[str, tuple[tuple[str, ...], Call] | tuple[tuple[str, ...], Call, Subject]] = {
    "queue": (("name", "duration", "int"),
              lambda s, n, vt, ma: _sync(lambda: s.queue(n, visibility_timeout=vt,
                                                         max_attempts=ma))),
    "enqueue": (("name", "payload", "int"), lambda s, n, p, pr: s.queue(n).enqueue(p, priority=pr)),
    "enqueue_delay": (("payload", "duration", "duration"),
                      lambda s, p, d, e: s.queue("q").enqueue(p, delay=d, expires=e)),
    "enqueue_run_at": (("instant", "int"),
                       lambda s, at, ma: s.queue("q").enqueue(1, run_at=at, max_attempts=ma)),
    "enqueue_batch": (("payload", "payload", "int"),
                      lambda s, a, b, pr: s.queue("q").enqueue_batch([a, b], priority=pr)),
    "claim_batch": (("name", "int"), lambda s, w, n: s.queue("q").claim_batch(w, n)),
    "ack_batch": (("int", "int", "name"),
                  lambda s, a, b, w: s.queue("q").ack_batch([a, b], w)),
    "get_job": (("int",), lambda s, i: s.queue("q").get_job(i)),
    "cancel": (("int",), lambda s, i: s.queue("q").cancel(i)),
    "requeue_dead": (("int",), lambda s, i: s.queue("q").requeue_dead(i)),
    "dead_letters": (("int",), lambda s, n: s.queue("q").dead_letters(n)),
    "purge_dead": (("instant",), lambda s, at: s.queue("q").purge_dead(at)),
    "publish": (("name", "payload"), lambda s, n, p: s.stream(n).publish(p)),
    "publish_with_key": (("name", "payload"),
                         lambda s, k, p: s.stream("s").publish_with_key(k, p)),
    "read_since": (("int", "int"), lambda s, o, n: s.stream("s").read_since(o, n)),
    "read_from_consumer": (("name", "int"),
                           lambda s, c, n: s.stream("s").read_from_consumer(c, n)),
    "save_offset": (("name", "int"), lambda s, c, o: s.stream("s").save_offset(c, o)),
    "get_offset": (("name",), lambda s, c: s.stream("s").get_offset(c)),
    "trim_to": (("int",), lambda s, o: s.stream("s").trim_to(o)),
    "set_retention": (("duration", "duration"),
                      lambda s, h, d: s.queue("q").set_retention(history=h, dead=d)),
    "stream_set_retention": (("duration", "int"),
                             lambda s, a, n: s.stream("s").set_retention(max_age=a, max_events=n)),
    "protect": (("name",), lambda s, c: s.stream("s").protect(c)),
    "unprotect": (("name",), lambda s, c: s.stream("s").unprotect(c)),
    "prune": ((), lambda s: s.prune()),
    "notify": (("name", "payload"), lambda s, c, p: s.notify(c, p)),
    "try_lock": (("name", "name", "duration"), _try_lock_then_read),
    "schedule": (("name", "name", "payload", "int", "int", "duration"),
                 lambda s, n, q, p, pr, ma, e: s.schedule(n, q, "@every 1h", p, priority=pr,
                                                          max_attempts=ma, expires_after=e)),
    "unschedule": (("name",), lambda s, n: s.unschedule(n)),
    "outbox_enqueue": (("name", "payload"), lambda s, n, p: s.outbox(n).enqueue(p)),
    "tx_enqueue": (("name", "payload", "int"),
                   lambda s, n, p, pr: _in_tx(s, lambda tx: tx.enqueue(n, p, priority=pr))),
    "tx_publish": (("name", "payload"), lambda s, n, p: _in_tx(s, lambda tx: tx.publish(n, p))),
    "tx_notify": (("name", "payload"), lambda s, n, p: _in_tx(s, lambda tx: tx.notify(n, p))),
    "tx_save_offset": (("name", "name", "int"),
                       lambda s, n, c, o: _in_tx(s, lambda tx: tx.save_offset(n, c, o))),
    "tx_outbox_enqueue": (("name", "payload"),
                          lambda s, n, p: _in_tx(s, lambda tx: tx.outbox_enqueue(n, p))),
    "tx_publish_with_key": (("name", "name", "payload"),
                            lambda s, n, k, p: _in_tx(s, lambda tx: tx.publish_with_key(n, k, p))),
    "tx_enqueue_options": (("duration", "duration", "instant", "int"),
                           lambda s, d, e, at, ma: _in_tx(s, lambda tx: tx.enqueue(
                               "q", 1, delay=d, expires=e, run_at=at, max_attempts=ma))),
    "tx_outbox_enqueue_options": (("duration", "int", "int"),
                                  lambda s, d, pr, ma: _in_tx(s, lambda tx: tx.outbox_enqueue(
                                      "o", 1, delay=d, priority=pr, max_attempts=ma))),
    # queues, beyond the above
    "claim_one": (("name",), lambda s, w: s.queue("q").claim_one(w)),
    "claim_with_options": (("duration", "int"),
                           lambda s, vt, ma: _claim_then_read(s.queue(
                               "vq", visibility_timeout=vt, max_attempts=ma))),
    "enqueue_batch_options": (("payload", "duration", "duration", "int"),
                              lambda s, p, d, e, ma: s.queue("q").enqueue_batch(
                                  [p], delay=d, expires=e, max_attempts=ma)),
    "enqueue_expires_at": (("instant",), lambda s, at: s.queue("q").enqueue(1, expires=at)),
    "enqueue_unique": (("payload", "name", "duration"),
                       lambda s, p, k, uf: s.queue("q").enqueue_unique(p, k, unique_for=uf)),
    "enqueue_batch_unique": (("name", "payload", "name", "payload"),
                             lambda s, k1, a, k2, b: s.queue("q").enqueue_batch_unique(
                                 [(k1, a), (k2, b)])),
    "set_limits": (("int",), lambda s, n: s.queue("q").set_limits(concurrency_per_key=n)),
    # a rate and a per-key rate: any int limit and any duration as the period
    "set_limits_rate": (("int", "duration", "int", "duration"),
                        lambda s, n, per, kn, kper: s.queue("q").set_limits(
                            rate=Rate(n, per), rate_per_key=Rate(kn, kper))),
    "enqueue_concurrency_key": (("payload", "name"),
                                lambda s, p, k: s.queue("q").enqueue(p, concurrency_key=k)),
    "set_unique_policy": (("flag",),
                          lambda s, f: s.queue("q").set_unique_policy(processing_blocks=f)),
    "tx_enqueue_unique": (("name", "payload", "name"),
                          lambda s, n, p, k: _in_tx(s, lambda tx: tx.enqueue_unique(n, p, k))),
    # a zoned schedule's options: a zone name, a catch-up policy, its cap and grace
    "schedule_zoned": (("name", "name", "int", "duration"),
                       lambda s, tz, cu, cm, g: s.schedule(
                           "z", "q", "30 2 * * *", tz=tz, catch_up=cu, catch_up_max=cm,
                           catch_up_grace=g)),
    "work": (("int", "name", "duration", "duration", "duration"),
             lambda s, c, w, p, sw, hb: _work(s, concurrency=c, worker_id=w, poll_interval=p,
                                              sweep_interval=sw, heartbeat_interval=hb)),
    # One argument at a time, the others valid: a bad value alone is far
    # likelier than among four others that all happen to be good.
    "work_concurrency": (("int",), lambda s, c: _work(s, concurrency=c)),
    "work_worker_id": (("name",), lambda s, w: _work(s, worker_id=w)),
    "work_poll_interval": (("duration",), lambda s, p: _work(s, poll_interval=p)),
    "work_sweep_interval": (("duration",), lambda s, sw: _work(s, sweep_interval=sw)),
    "work_heartbeat_interval": (("duration",), lambda s, hb: _work(s, heartbeat_interval=hb)),
    # a freshly claimed job
    "job_ack": ((), lambda j: _job_then_read(j, j.ack()), _claimed_job),
    "job_retry": (("duration", "error"),
                  lambda j, d, e: _job_then_read(j, j.retry(delay=d, error=e)), _claimed_job),
    "job_fail": (("error",), lambda j, e: _job_then_read(j, j.fail(e)), _claimed_job),
    "job_heartbeat": (("duration",), lambda j, x: _job_then_read(j, j.heartbeat(x)),
                      _claimed_job),
    "job_release": (("flag",), lambda j, r: _job_then_read(j, j.release(refund=r)),
                    _claimed_job),
    # a held lock, and the helper that holds one
    "lock_renew": (("duration",), lambda lock, t: _lock_then_read(lock, lock.renew(t)),
                   _held_lock),
    "lock_release": ((), lambda lock: lock.release(), _held_lock),
    "hold_lock": (("name", "name", "duration", "duration", "duration"),
                  lambda s, n, o, ttl, to, poll: _enter(s.hold_lock(
                      _hold_name(n), o, ttl, timeout=to, poll=poll))),
    # wakes and subscriptions
    "listen": (("name",), lambda s, c: _enter(s.listen(c))),
    "wake_recv_timeout": (("duration",), _recv_timeout, _wake_receiver),
    "subscribe": (("name", "int", "duration"),
                  lambda s, c, b, d: _enter(s.stream("s").subscribe(c, batch=b, backstop=d))),
    "event_recv_timeout": (("duration",), _recv_timeout, _event_receiver),
    "event_read_since": (("int", "int"), _read_and_close, _opened_event_receiver),
    # outbox, beyond the above
    "outbox": (("name", "duration", "int"),
               lambda s, n, vt, ma: _sync(lambda: s.outbox(n, visibility_timeout=vt,
                                                          max_attempts=ma))),
    "outbox_enqueue_options": (("name", "duration", "int"),
                               lambda s, n, d, pr: s.outbox(n).enqueue(1, delay=d, priority=pr)),
    "outbox_run_once": (("name", "int", "name"),
                        lambda s, n, b, w: s.outbox(n).run_once(_deliver, batch=b, worker_id=w)),
    "outbox_dead_letters": (("int",), lambda s, n: s.outbox("o").dead_letters(n)),
    "outbox_requeue_dead": (("int",), lambda s, i: s.outbox("o").requeue_dead(i)),
    "outbox_purge_dead": (("instant",), lambda s, at: s.outbox("o").purge_dead(at)),
    # scheduler, beyond the above
    "schedule_fired": (("duration", "int"), _schedule_then_fire),
    "run_scheduler": (("duration",),
                      lambda s, m: _briefly(lambda: s.run_scheduler(max_sleep=m))),
    "pause_schedule": (("name",), lambda s, n: _then_list_schedules(s.pause_schedule(n), s)),
    "run_schedule_now": (("name",), lambda s, n: s.run_schedule_now(n)),
    "resume_schedule": (("name",), lambda s, n: _then_list_schedules(s.resume_schedule(n), s)),
    # inspection
    "store_get_job": (("int",), lambda s, i: s.get_job(i)),
    "list_jobs": (("state", "int", "int"),
                  lambda s, st, n, a: s.queue("q").list_jobs(state=st, limit=n, after=a)),
    "inspect": ((), _inspect),
    "list_events": (("int", "int"),
                    lambda s, b, n: s.stream("s").list_events(before=b, limit=n)),
    "throughput": (("duration", "duration"),
                   lambda s, w, b: s.queue("q").throughput(window=w, bucket=b)),
    # dependencies, results, workflows
    "enqueue_depends_on": (("int", "int"),
                           lambda s, a, b: s.queue("q").enqueue(1, depends_on=[a, b])),
    "result": (("int", "duration"), _result),
    "workflow": (("name", "name", "name"), lambda s, n, st, q: _workflow(s, n, st, q, False)),
    "tx_enqueue_workflow": (("name", "name", "name"),
                            lambda s, n, st, q: _workflow(s, n, st, q, True)),
    "workflow_run": (("int",), lambda s, i: s.workflow_run(i)),
    "list_workflows": (("int", "int"), lambda s, b, n: s.list_workflows(before=b, limit=n)),
}  # fmt: skip
NAMES = sorted(METHODS)

# Every public method with parameters -> the entries that call it. A test
# (tests/fuzz) checks this against the API, so a new method is not missed.
COVERS: dict[str, tuple[str, ...]] = {
    "Store.queue": ("queue", "claim_with_options"),
    "Store.stream": ("publish",),
    "Store.outbox": ("outbox", "outbox_enqueue"),
    "Store.notify": ("notify",),
    "Store.listen": ("listen",),
    "Store.try_lock": ("try_lock",),
    "Store.hold_lock": ("hold_lock",),
    "Store.schedule": ("schedule", "schedule_fired", "schedule_zoned"),
    "Store.unschedule": ("unschedule",),
    "Store.run_scheduler": ("run_scheduler",),
    "Store.run_schedules": ("schedule_fired",),
    "Store.pause_schedule": ("pause_schedule",),
    "Store.run_schedule_now": ("run_schedule_now",),
    "Store.resume_schedule": ("resume_schedule",),
    "Store.get_job": ("store_get_job",),
    "Store.list_queues": ("inspect",),
    "Store.list_streams": ("inspect",),
    "Store.list_locks": ("inspect",),
    "Store.list_schedules": ("inspect",),
    "Stream.info": ("inspect",),
    "Queue.list_jobs": ("list_jobs",),
    "Queue.throughput": ("throughput",),
    "Stream.list_events": ("list_events",),
    "Queue.enqueue": ("enqueue", "enqueue_delay", "enqueue_run_at", "enqueue_expires_at",
                      "enqueue_concurrency_key", "enqueue_depends_on"),
    "Queue.result": ("result",),
    "Store.workflow": ("workflow", "tx_enqueue_workflow"),
    "Store.workflow_run": ("workflow_run",),
    "Store.list_workflows": ("list_workflows",),
    "Transaction.enqueue_workflow": ("tx_enqueue_workflow",),
    "Queue.enqueue_batch": ("enqueue_batch", "enqueue_batch_options"),
    "Queue.enqueue_unique": ("enqueue_unique",),
    "Queue.enqueue_batch_unique": ("enqueue_batch_unique",),
    "Queue.set_unique_policy": ("set_unique_policy",),
    "Queue.set_limits": ("set_limits", "set_limits_rate"),
    "Queue.claim_one": ("claim_one",),
    "Queue.claim_batch": ("claim_batch",),
    "Queue.ack_batch": ("ack_batch",),
    "Queue.get_job": ("get_job",),
    "Queue.cancel": ("cancel",),
    "Queue.requeue_dead": ("requeue_dead",),
    "Queue.dead_letters": ("dead_letters",),
    "Queue.purge_dead": ("purge_dead",),
    "Queue.set_retention": ("set_retention",),
    "Queue.work": (
        "work",
        "work_concurrency",
        "work_worker_id",
        "work_poll_interval",
        "work_sweep_interval",
        "work_heartbeat_interval",
    ),
    "Job.ack": ("job_ack",),
    "Job.retry": ("job_retry",),
    "Job.fail": ("job_fail",),
    "Job.heartbeat": ("job_heartbeat",),
    "Job.release": ("job_release",),
    "Lock.renew": ("lock_renew",),
    "Lock.release": ("lock_release",),
    "Stream.publish": ("publish",),
    "Stream.publish_with_key": ("publish_with_key",),
    "Stream.read_since": ("read_since",),
    "Stream.read_from_consumer": ("read_from_consumer",),
    "Stream.save_offset": ("save_offset",),
    "Stream.get_offset": ("get_offset",),
    "Stream.trim_to": ("trim_to",),
    "Stream.set_retention": ("stream_set_retention",),
    "Stream.protect": ("protect",),
    "Stream.unprotect": ("unprotect",),
    "Store.prune": ("prune",),
    "Stream.subscribe": ("subscribe",),
    "EventReceiver.recv_timeout": ("event_recv_timeout",),
    "EventReceiver.read_since": ("event_read_since",),
    "WakeReceiver.recv_timeout": ("wake_recv_timeout",),
    "Outbox.enqueue": ("outbox_enqueue", "outbox_enqueue_options"),
    "Outbox.run_once": ("outbox_run_once",),
    "Outbox.dead_letters": ("outbox_dead_letters",),
    "Outbox.requeue_dead": ("outbox_requeue_dead",),
    "Outbox.purge_dead": ("outbox_purge_dead",),
    "Transaction.enqueue": ("tx_enqueue", "tx_enqueue_options"),
    "Transaction.enqueue_unique": ("tx_enqueue_unique",),
    "Transaction.outbox_enqueue": ("tx_outbox_enqueue", "tx_outbox_enqueue_options"),
    "Transaction.publish": ("tx_publish",),
    "Transaction.publish_with_key": ("tx_publish_with_key",),
    "Transaction.notify": ("tx_notify",),
    "Transaction.save_offset": ("tx_save_offset",),
}
# Public methods with parameters that are not fuzzed here, and why.
NOT_FUZZED: dict[str, str] = {
    "Store.join": "takes the application's own connection object",
    "Job.payload_as": "pure decoding, fuzzed by fuzz_codec.py (convert)",
    "Outbox.work": "passes its options to Queue.work (fuzzed)",
    "Transaction.execute": "the caller's own SQL: its errors are the database's",
}


def _outcome(engines: Engines, engine: str, name: str, args: list[Any]) -> str:
    _, method, *prepare = METHODS[name]
    subject: Any = None
    if prepare:
        subject = engines.run(prepare[0], engine)
    before = engines.fingerprint(engine)

    def call(store: Store) -> Awaitable[Any]:
        return method(store if subject is None else subject, *args)

    try:
        engines.run(call, engine)
    except ALLOWED as exc:
        after = engines.fingerprint(engine)
        assert after == before, f"{engine}: a call that raised {exc!r} wrote something"
        return type(exc).__name__
    return "ok"


RAN: set[str] = set()


def TestOneInput(data: bytes) -> None:
    global ENGINES
    if ENGINES is None:
        ENGINES = Engines()
    engines = ENGINES
    engines.calls += 1
    if engines.calls % RESET_EVERY == 0:
        engines.reset()
    # The first byte picks the entry, so that a seed input per entry
    # reaches every one of them (tests/fuzz does that).
    name = NAMES[data[0] % len(NAMES)] if data else NAMES[0]
    fdp = atheris.FuzzedDataProvider(data[1:])
    args = [KINDS[kind](fdp) for kind in METHODS[name][0]]
    got = {engine: _outcome(engines, engine, name, args) for engine in ("sqlite", "postgres")}
    if name not in RAN:
        RAN.add(name)
        print(f"fuzz_api: ran {name} on both engines", flush=True)
    if got["postgres"] == "PayloadTooLarge" and got["sqlite"] == "ok":
        return  # the engines' one documented difference: NOTIFY's 8000-byte limit
    assert got["sqlite"] == got["postgres"], f"{name}{tuple(args)!r:.300}: {got}"


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
