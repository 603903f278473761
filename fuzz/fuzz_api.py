"""Fuzz target: every public method with integer, name, duration and payload
parameters, on a real SQLite store and a real Postgres store at once.

Property: each call either succeeds on both engines or raises the same
contract error on both (``InvalidArgument``, ``InvalidName``,
``ReservedName``, ``CodecError``; ``PayloadTooLarge`` for a notify payload
over Postgres's limit, on Postgres only), never anything else (no raw
sqlite3/psycopg, Overflow, Type or Attribute error); and a call that raised
left every alkstore table of its engine exactly as it was.

Needs PostgreSQL at ``$ALKSTORE_PG_DSN`` (default: the local test server).
Run: ``python fuzz/fuzz_api.py -atheris_runs=2000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import atexit
import contextlib
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
        InvalidArgument,
        InvalidName,
        PayloadTooLarge,
        ReservedName,
        Store,
    )
    from alkstore.io_trio import PostgresOptions, SqliteOptions, open_postgres, open_sqlite

DSN = os.environ.get("ALKSTORE_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
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
        try:
            async with (
                # No maintenance rounds: they write, and would look like a
                # refused call that wrote something.
                open_sqlite(self.path, options=SqliteOptions(maintenance_interval=1e6)) as sq,
                open_postgres(DSN, options=PostgresOptions(schema=SCHEMA, pool_size=2)) as pg,
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


KINDS: dict[str, Callable[[atheris.FuzzedDataProvider], Any]] = {
    "int": an_int,
    "name": a_name,
    "duration": a_duration,
    "instant": an_instant,
    "payload": a_payload,
}


async def _in_tx(store: Store, body: Callable[[Any], Awaitable[Any]]) -> None:
    async with store.transaction() as tx:
        await body(tx)


async def _sync(make: Callable[[], Any]) -> Any:
    return make()


# name -> (argument kinds, call). Each call gets the store and its arguments.
METHODS: dict[str, tuple[tuple[str, ...], Callable[..., Awaitable[Any]]]] = {
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
    "notify": (("name", "payload"), lambda s, c, p: s.notify(c, p)),
    "try_lock": (("name", "name", "duration"), lambda s, n, o, t: s.try_lock(n, o, t)),
    "schedule": (("name", "name", "payload", "int", "duration"),
                 lambda s, n, q, p, pr, e: s.schedule(n, q, "@every 1h", p, priority=pr,
                                                      expires_after=e)),
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
}  # fmt: skip
NAMES = sorted(METHODS)


def _outcome(engines: Engines, engine: str, call: Callable[[Store], Awaitable[Any]]) -> str:
    before = engines.fingerprint(engine)
    try:
        engines.run(call, engine)
    except ALLOWED as exc:
        after = engines.fingerprint(engine)
        assert after == before, f"{engine}: a call that raised {exc!r} wrote something"
        return type(exc).__name__
    return "ok"


def TestOneInput(data: bytes) -> None:
    global ENGINES
    if ENGINES is None:
        ENGINES = Engines()
    engines = ENGINES
    engines.calls += 1
    if engines.calls % RESET_EVERY == 0:
        engines.reset()
    fdp = atheris.FuzzedDataProvider(data)
    name = fdp.PickValueInList(NAMES)
    kinds, method = METHODS[name]
    args = [KINDS[kind](fdp) for kind in kinds]

    def call(store: Store) -> Awaitable[Any]:
        return method(store, *args)

    got = {engine: _outcome(engines, engine, call) for engine in ("sqlite", "postgres")}
    if got["postgres"] == "PayloadTooLarge" and got["sqlite"] == "ok":
        return  # the engines' one documented difference: NOTIFY's 8000-byte limit
    assert got["sqlite"] == got["postgres"], f"{name}{tuple(args)!r:.300}: {got}"


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
