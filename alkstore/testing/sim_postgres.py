"""The simulation's PostgreSQL backend: real backends, real row locks.

Unlike SQLite, Postgres lets every actor hold a write transaction at once,
and a statement can wait inside the server on a row another open transaction
locked (an ``ack`` behind a claim, a publisher behind another publisher's
stream counter, a lock taker behind another's insert). Statements are sent
through libpq's asynchronous interface, so a waiting one stays in flight
while other actors step. After each step the backend *settles*: it polls
every in-flight statement until each has finished or shows an ungranted lock
in ``pg_locks``. A lock is granted by the backend that releases it, before
that backend's COMMIT returns, so "waits on a lock" is a stable state that
only another actor's step can change, and runs replay exactly, with one
limit: when one commit releases three or more statements waiting on the
same row (three lock takers, or publishers of a new stream, inserting one
key), which of them wins is the server's timing. The suite's
configurations keep to two contenders per row.

A crash is ``pg_terminate_backend`` with a wait: the victim's transaction is
rolled back and its locks released before the next step. Every run starts
from empty tables (and job ids from 1 again) in a schema of its own,
and wakes are recorded by a connection that LISTENs on the run's channels.

The deadlock detector is switched off on the actors' sessions (superusers
only; other roles keep the server's ``deadlock_timeout``): a lock cycle then
shows as a run where everyone waits, which the simulation reports, instead
of as a timing-dependent abort.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Sequence
from typing import Any

from psycopg import pq

from ..engines.postgres import PostgresDialect, migrate
from ..engines.postgres import control as sql
from ..engines.postgres.schema import qualified
from ..protocol.dialect import Dialect
from ..protocol.plan import Fetch, Statement, run_sync
from ..protocol.values import codec
from ..protocol.values.errors import DatabaseError
from ..runner.postgres.wire import Wire, check
from .sim_backend import SimConn, Snapshot

# A statement that neither finishes nor waits on a lock for this long is
# stuck on something the simulation does not model: fail loudly.
SETTLE_LIMIT_S = 30.0
_TABLES = (
    "jobs", "dead", "history", "queues", "streams", "events", "offsets", "locks", "schedules",
    "waiting", "deps", "workflows", "workflow_steps", "attempts",
)


class _Session:
    """A blocking libpq connection for set-up, observation and crashes."""

    def __init__(self, dsn: str) -> None:
        self.pg = pq.PGconn.connect(dsn.encode())
        if self.pg.status != pq.ConnStatus.OK:
            message = self.pg.get_error_message()
            self.pg.finish()
            raise DatabaseError(f"PostgreSQL: cannot connect for the simulation: {message}")
        self.wire = Wire(self.pg)
        self.pid = self.pg.backend_pid

    def _exec(self, text: str, params: Sequence[Any]) -> pq.abc.PGresult:
        values, types, formats = self.wire.dump(params)
        return self.pg.exec_params(
            self.wire.encode_sql(text), values, param_types=types, param_formats=formats
        )

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.wire.rows(self._exec(text, params))

    def run(self, statement: Statement) -> Any:
        return self.wire.result(self._exec(statement.sql, statement.params), statement.fetch)

    def close(self) -> None:
        self.pg.finish()


class PgSimConn:
    def __init__(self, dsn: str, observer: _Session, read_begin: str) -> None:
        self._session = _Session(dsn)
        self._observer = observer
        self._read_begin = read_begin
        self.pg = self._session.pg
        self.pid = self._session.pid
        # A simulated crash ends a backend, never the server: waiting for
        # the WAL flush at each COMMIT would buy nothing and cost most of a
        # step's time.
        self._session.rows("SET synchronous_commit = off")
        # Not a superuser: the server's deadlock_timeout applies.
        with contextlib.suppress(DatabaseError):
            self._session.rows("SET deadlock_timeout = '1h'")
        self.closed = False
        self.in_flight = False
        self.waiting = False
        self._results: list[pq.abc.PGresult] = []

    def begin(self, write: bool) -> bool:
        check(self.pg.exec_((sql.BEGIN if write else self._read_begin).encode()))
        return True

    def send(self, statement: Statement) -> None:
        self._session.wire.send(statement)
        self.in_flight, self.waiting, self._results = True, False, []

    def poll(self) -> bool:
        """True once the in-flight statement's results are all in."""
        self.pg.consume_input()
        if self.pg.is_busy():
            return False
        while (res := self.pg.get_result()) is not None:
            self._results.append(res)
        self.waiting = False
        return True

    def result(self, fetch: Fetch) -> Any:
        self.in_flight = False
        value = None
        for res in self._results:
            value = self._session.wire.result(res, fetch)
        return value

    def finish(self, commit: bool) -> None:
        check(self.pg.exec_((sql.COMMIT if commit else sql.ROLLBACK).encode()))

    @property
    def reusable(self) -> bool:
        return (
            not self.closed
            and not self.in_flight
            and self.pg.transaction_status == pq.TransactionStatus.IDLE
        )

    def crash(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            if self.pg.transaction_status != pq.TransactionStatus.IDLE or self.in_flight:
                # Closing the socket is not enough: a backend waiting on a
                # lock only notices its client left once the wait ends.
                self._observer.rows("SELECT pg_terminate_backend($1::int)", (self.pid,))
                # A backend leaves pg_stat_activity after its transaction was
                # rolled back and its locks released. (pg_terminate_backend's
                # own wait polls every 100 ms: too slow for thousands of runs.)
                deadline = time.monotonic() + SETTLE_LIMIT_S
                while self._observer.rows(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = $1::int", (self.pid,)
                ):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"backend {self.pid} outlived pg_terminate_backend")
                    time.sleep(0.0005)
        finally:
            self._session.close()
        self.in_flight = self.waiting = False


class PostgresSimRun:
    exclusive_writer = False

    def __init__(self, backend: PostgresSimBackend, channels: list[str]) -> None:
        self.dialect = backend.dialect
        self._backend = backend
        self._observer = backend.observer
        self._by_identifier = {self.dialect.channel_identifier(c): c for c in channels}  # type: ignore[attr-defined]
        self._woken: set[str] = set()
        schema = backend.schema
        # DELETE, not TRUNCATE: on these few rows it is fifty times faster,
        # and exhaustive exploration empties the tables thousands of times.
        empty = "; ".join(f"DELETE FROM {qualified(schema, t)}" for t in _TABLES)
        check(
            self._observer.pg.exec_(
                f"{empty}; SELECT setval(pg_get_serial_sequence($${qualified(schema, 'jobs')}$$, "
                "'id'), 1, false), setval(pg_get_serial_sequence("
                f"$${qualified(schema, 'workflows')}$$, 'id'), 1, false)".encode()
            )
        )
        for identifier in self._by_identifier:
            self._observer.rows(f'LISTEN "{identifier}"')
        self._jobs = qualified(schema, "jobs")
        self._dead = qualified(schema, "dead")
        self._history = qualified(schema, "history")
        self._waiting = qualified(schema, "waiting")
        self._attempts = qualified(schema, "attempts")
        self._events = qualified(schema, "events")
        self._conns: list[PgSimConn] = []

    def connect(self) -> SimConn:
        conn = self._backend.take_conn()
        self._conns.append(conn)
        return conn

    def settle(self, conns: list[SimConn]) -> None:
        pending = [c for c in conns if isinstance(c, PgSimConn) and c.in_flight]
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while pending:
            pending = [c for c in pending if not c.poll()]
            running = [c for c in pending if not c.waiting]
            if running:
                # Most statements finish within a millisecond: wait for that
                # before asking the server who is waiting on a lock. (One
                # that waited before is asked about at once: most often it
                # still waits.)
                select.select([c.pg.socket for c in running], [], [], 0.002)
                pending = [c for c in pending if not c.poll()]
            if not pending:
                return
            waiting = {
                int(r[0])
                for r in self._observer.rows(
                    "SELECT DISTINCT pid FROM pg_locks WHERE NOT granted AND pid = ANY($1)",
                    ([c.pid for c in pending],),
                )
            }
            for c in pending:
                c.waiting = c.pid in waiting
            if all(c.waiting for c in pending):
                return
            if time.monotonic() > deadline:
                stuck = [c.pid for c in pending if not c.waiting]
                raise RuntimeError(f"statements on backends {stuck} neither finish nor wait")

    def snapshot(self) -> Snapshot:
        rows = self._observer.rows(
            f"SELECT 'j', id, payload, NULL FROM {self._jobs} UNION ALL "
            f"SELECT 'd', id, payload, NULL FROM {self._dead} UNION ALL "
            f"SELECT 'w', id, payload, NULL FROM {self._waiting} UNION ALL "
            f"SELECT 'e', 0, payload, NULL FROM {self._events} WHERE stream = 'events' UNION ALL "
            f"SELECT 'h', id, outcome, result FROM {self._history} UNION ALL "
            f"SELECT 'u', id, unique_key, NULL FROM {self._jobs} WHERE unique_key IS NOT NULL "
            f"UNION ALL SELECT 'a', job_id, NULL, NULL FROM {self._attempts}"
        )
        # Wakes committed before this query reached the server have arrived
        # by now or will arrive with a later one: none is ever missed.
        while (note := self._observer.pg.notifies()) is not None:
            identifier = note.relname.decode()
            self._woken.add(self._by_identifier.get(identifier, identifier))
        jobs = [r for r in rows if r[0] in ("j", "d")]
        history = [r for r in rows if r[0] == "h"]
        return Snapshot(
            job_ids={int(r[1]) for r in jobs},
            job_markers={codec.decode(r[2]).get("marker") for r in rows if r[0] in "jdw"},
            event_markers={codec.decode(r[2]).get("marker") for r in rows if r[0] == "e"},
            woken_channels=set(self._woken),
            history_ids={int(r[1]) for r in history},
            live_unique_keys=[str(r[2]) for r in rows if r[0] == "u"],
            dead_ids={int(r[1]) for r in rows if r[0] == "d"},
            waiting_ids=[int(r[1]) for r in rows if r[0] == "w"],
            history=[(int(r[1]), str(r[2]), r[3]) for r in history],
            attempt_job_ids={int(r[1]) for r in rows if r[0] == "a"},
        )

    def live_job_ids(self) -> list[int]:
        return [int(r[0]) for r in self._observer.rows(f"SELECT id FROM {self._jobs}")]

    def close(self) -> None:
        # Wakes are matched when read, so none of this run's can reach the next.
        self._observer.rows("UNLISTEN *")
        while self._observer.pg.notifies() is not None:
            pass
        for conn in self._conns:
            self._backend.give_back(conn)


class PostgresSimBackend:
    """Runs on one schema of a real server, emptied before each run.

    ``schema`` must be one the caller may drop: it is created and migrated
    here and every run truncates its tables. Connections outlive runs (a
    crashed actor's is terminated, never reused); ``close`` ends them.
    """

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        schema: str,
        dialect: Dialect | None = None,
        *,
        read_begin: str = sql.BEGIN_READ,
    ) -> None:
        self.dsn = dsn
        self.schema = schema
        self.dialect: Dialect = dialect or PostgresDialect(schema)
        # How a read-only operation's transaction begins: the executors'
        # own (one snapshot), or a broken one in tests.
        self.read_begin = read_begin
        self.observer = _Session(dsn)
        self._idle: list[PgSimConn] = []
        try:
            self.observer.rows(sql.BEGIN)
            run_sync(migrate(schema), self.observer.run)
            # Autovacuum could take a lock on these tables mid-run (to
            # truncate the pages the per-run DELETE empties), and a wait on
            # anyone but an actor would make the run depend on timing.
            for table in _TABLES:
                self.observer.rows(
                    f"ALTER TABLE {qualified(schema, table)} SET (autovacuum_enabled = false)"
                )
            self.observer.rows(sql.COMMIT)
        except BaseException:
            self.observer.close()
            raise

    def open_run(self, channels: list[str]) -> PostgresSimRun:
        """A run on the schema, emptied first; wakes on ``channels`` are recorded."""
        return PostgresSimRun(self, channels)

    def take_conn(self) -> PgSimConn:
        """A connection for an actor: an idle one kept from an earlier run, or a new one."""
        if self._idle:
            return self._idle.pop()
        return PgSimConn(self.dsn, self.observer, self.read_begin)

    def give_back(self, conn: PgSimConn) -> None:
        """Keep a healthy idle connection for the next run; end any other."""
        if conn.reusable:
            self._idle.append(conn)
        else:
            conn.crash()

    def close(self) -> None:
        """End every kept connection and the observer's."""
        for conn in self._idle:
            conn.crash()
        self._idle.clear()
        self.observer.close()

    def __enter__(self) -> PostgresSimBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
