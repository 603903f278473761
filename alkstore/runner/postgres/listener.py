"""One LISTEN connection per store, shared by every channel.

A single reader task owns the socket: it turns notifications into local
wakes and hands command results (LISTEN/UNLISTEN) back to whoever sent them,
so no two tasks ever wait on the same descriptor. If the connection drops,
the reader reconnects with capped exponential backoff, LISTENs again on every
channel, and wakes every receiver with ``__alkstore_listener_reconnected__``:
notifications may have been missed meanwhile, so everyone re-checks. Those
decisions are ``ListenerLink``'s (``alkstore/protocol/machines/listener.py``); the
reader performs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq

from ...protocol.machines.listener import (
    Connect,
    Listen,
    ListenerLink,
    Lost,
    Probe,
    Publish,
    after_silence,
    quiet_wait,
    reconnect_backoff,
)
from ...protocol.values.backoff import Pause
from ...protocol.values.errors import AlkstoreError, DatabaseError, InvalidArgument
from ...protocol.values.timeconv import check_seconds
from ..hub import WakeHub
from ..runtime import Runtime, Signal
from .conn import PgConnection
from .wire import check


@dataclass
class ListenerOptions:
    """The Postgres listening connection: its connect timeout, reconnect
    pauses and liveness probes (see docs/engines.md); checked when made and
    again at open (``InvalidArgument``)."""

    connect_timeout: float = 10.0
    reconnect_base: float = 0.05
    reconnect_cap: float = 5.0
    # Quiet this long, the connection is probed with a round trip; a probe or
    # a LISTEN unanswered for probe_timeout means the path is dead, and the
    # listener reconnects. A half-open connection is so noticed within
    # probe_interval + probe_timeout.
    probe_interval: float = 5.0
    probe_timeout: float = 5.0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Refuse a setting out of range with ``InvalidArgument``."""
        check_seconds(self.connect_timeout, "listener connect_timeout")
        base = check_seconds(self.reconnect_base, "listener reconnect_base")
        if check_seconds(self.reconnect_cap, "listener reconnect_cap") < base:
            raise InvalidArgument("listener reconnect_cap must be >= reconnect_base")
        check_seconds(self.probe_interval, "listener probe_interval")
        check_seconds(self.probe_timeout, "listener probe_timeout")


class _Pending:
    def __init__(self, runtime: Runtime, answer_within: float) -> None:
        self.deadline = runtime.monotonic() + answer_within
        self.done: Signal = runtime.signal()
        self.results: list[pq.abc.PGresult] = []
        self.error: BaseException | None = None
        # The connection died under the command: the reconnect LISTENs on
        # every registered channel anyway, so the caller need not fail.
        self.lost = False


class PgListener:
    def __init__(
        self,
        runtime: Runtime,
        dsn: str,
        identifier: Callable[[str], str],
        listen_sql: Callable[[str], str],
        unlisten_sql: Callable[[str], str],
        probe_sql: str,
        hub: WakeHub,
        options: ListenerOptions,
        own_pids: set[int] | None = None,
        on_silence: Callable[[], None] = lambda: None,
    ) -> None:
        self._runtime = runtime
        self._dsn = dsn
        self._identifier = identifier
        self._listen_sql = listen_sql
        self._unlisten_sql = unlisten_sql
        self._probe_sql = probe_sql
        self._hub = hub
        self._options = options
        self._own_pids = own_pids if own_pids is not None else set()
        # Called when the connection went silent (a probe unanswered): the
        # pool's idle connections share its path to the server.
        self._on_silence = on_silence
        self._refs: dict[str, int] = {}
        self._channels: dict[str, str] = {}  # identifier -> channel name
        self._listening: set[str] = set()  # channels whose LISTEN went through
        self._sending: dict[str, Signal] = {}  # channel -> its LISTEN in flight
        self._conn: PgConnection | None = None
        self._command_lock = runtime.lock()
        self._pending: _Pending | None = None
        self._connected: Signal = runtime.signal()
        self._closed = False
        self.reconnects = 0

    # -- receivers' side -------------------------------------------------------
    async def listen(self, channel: str) -> None:
        """Return once the server is LISTENing on ``channel`` for us (or,
        while disconnected, once the reconnect is sure to LISTEN on it)."""
        self._refs[channel] = self._refs.get(channel, 0) + 1
        try:
            while channel not in self._listening:
                sending = self._sending.get(channel)
                if sending is not None:
                    # Another receiver's LISTEN is on its way: its outcome is
                    # ours. If its caller is cancelled before it is sent, we
                    # loop and send our own.
                    await sending.wait()
                    continue
                await self._send_listen(channel)
        except BaseException:
            count = self._refs.get(channel, 0) - 1
            if count > 0:
                self._refs[channel] = count
            else:
                self._forget(channel)
            raise

    async def _send_listen(self, channel: str) -> None:
        sending = self._runtime.signal()
        self._sending[channel] = sending
        # Registered before the LISTEN is sent: a reconnect meanwhile must
        # LISTEN on it too.
        self._channels[self._identifier(channel)] = channel
        try:
            await self._command(self._listen_sql(channel))
            self._listening.add(channel)
        finally:
            del self._sending[channel]
            sending.set()

    def _forget(self, channel: str) -> None:
        self._refs.pop(channel, None)
        self._listening.discard(channel)
        self._channels.pop(self._identifier(channel), None)

    async def unlisten(self, channel: str) -> None:
        count = self._refs.get(channel, 0) - 1
        if count > 0:
            self._refs[channel] = count
            return
        self._forget(channel)
        # A dropped connection forgets its LISTENs anyway.
        with contextlib.suppress(AlkstoreError):
            await self._command(self._unlisten_sql(channel))

    async def wait_connected(self, timeout: float) -> bool:
        return await self._runtime.wait_signal(self._connected, timeout)

    async def _command(self, sql: str) -> None:
        """Send a command on the listening connection and wait for its result.

        While disconnected this returns at once: the reconnect LISTENs on
        every channel and then wakes everyone.
        """
        async with self._command_lock:
            # A command whose caller was cancelled may still have its result
            # on the way; libpq takes one command at a time, and the reader
            # hands results to whoever is pending, so let that one finish.
            orphan = self._pending
            if orphan is not None:
                await orphan.done.wait()
            conn = self._conn
            if conn is None:
                return
            pending = _Pending(self._runtime, self._options.probe_timeout)
            self._pending = pending
            try:
                conn.pgconn.send_query(conn.wire.encode_sql(sql))
                while conn.pgconn.flush() == 1:
                    await self._runtime.wait_writable(conn.pgconn.socket, None)
            except (psycopg.OperationalError, OSError) as exc:
                self._pending = None
                raise DatabaseError(f"PostgreSQL: listener connection failed: {exc}") from exc
            await pending.done.wait()
            if pending.lost:
                return
            if pending.error is not None:
                raise pending.error
            for res in pending.results:
                check(res)

    # -- the reader task ----------------------------------------------------
    async def run(self, task_status: Any = None) -> None:
        options = self._options
        link = ListenerLink(reconnect_backoff(options.reconnect_base, options.reconnect_cap))
        conn: PgConnection | None = None
        try:
            while not self._closed:
                action = link.next_action(self._channels.values())
                if isinstance(action, Pause):
                    await self._runtime.sleep(action.seconds)
                    link.paused()
                elif isinstance(action, Connect):
                    try:
                        conn = await PgConnection.connect(
                            self._runtime, self._dsn, timeout=options.connect_timeout
                        )
                    except AlkstoreError:
                        link.failed()
                        continue
                    # Its LISTENs before publishing are bounded like a probe.
                    conn.response_timeout = options.probe_timeout
                    link.connected()
                elif conn is None:
                    raise AssertionError(f"listener: {action} before connecting")
                elif isinstance(action, Listen):
                    # Until the connection is published, a receiver's listen()
                    # counts on this to send its LISTEN.
                    try:
                        await conn.command(self._listen_sql(action.channel))
                    except AlkstoreError:
                        conn.close()
                        conn = None
                        link.failed()
                        continue
                    link.listened(action.channel)
                elif isinstance(action, Publish):
                    self._conn = conn
                    self._connected.set()
                    if action.reconnected:
                        self.reconnects += 1
                        self._hub.wake_reconnected()
                else:
                    try:
                        await self._read(conn)
                    except (psycopg.OperationalError, OSError, AlkstoreError):
                        pass
                    finally:
                        self._conn = None
                        self._connected = self._runtime.signal()
                        self._fail_pending(
                            DatabaseError("PostgreSQL: listener connection lost"), lost=True
                        )
                        conn.close()
                        conn = None
                    link.lost()
        finally:
            if conn is not None:
                conn.close()  # connected, not published yet
            self._fail_pending(DatabaseError("PostgreSQL: listener closed"))

    async def _read(self, conn: PgConnection) -> None:
        pgconn = conn.pgconn
        runtime = self._runtime
        options = self._options
        while True:
            pending = self._pending
            due = None if pending is None else pending.deadline
            wait = quiet_wait(runtime.monotonic(), due, options.probe_interval)
            if wait <= 0 or not await runtime.wait_readable(pgconn.socket, wait):
                # The answer awaited may have come meanwhile (by another
                # task's hand): judge what is pending now.
                now = self._pending
                verdict = after_silence(now is not None and now is pending, now is not None)
                if isinstance(verdict, Lost):
                    self._on_silence()
                    raise DatabaseError(
                        f"PostgreSQL: listener connection gave no answer within "
                        f"{options.probe_timeout} s"
                    )
                if isinstance(verdict, Probe):
                    self._probe(conn)
                continue
            pgconn.consume_input()
            if pgconn.status != pq.ConnStatus.OK:
                raise DatabaseError("PostgreSQL: listener connection lost")
            channels: list[str] = []
            while (note := pgconn.notifies()) is not None:
                if note.be_pid in self._own_pids:
                    continue  # ours: woken locally at commit already
                channel = self._channels.get(note.relname.decode("utf-8", "replace"))
                if channel is not None:
                    channels.append(channel)
            if channels:
                self._hub.wake(channels)
            pending = self._pending
            while pending is not None and not pgconn.is_busy():
                res = pgconn.get_result()
                if res is None:
                    self._pending = None
                    pending.done.set()
                    break
                pending.results.append(res)

    def _probe(self, conn: PgConnection) -> None:
        """Send a round trip nobody waits for: quiet is not proof of life.
        It is pending like a receiver's command, so a command sent meanwhile
        waits its turn, and its answer is bounded the same way."""
        self._pending = _Pending(self._runtime, self._options.probe_timeout)
        conn.pgconn.send_query(conn.wire.encode_sql(self._probe_sql))
        # A probe is a few bytes into an empty socket buffer; if even that
        # does not go out, the next read's deadline finds the path dead.
        conn.pgconn.flush()

    def _fail_pending(self, error: BaseException, *, lost: bool = False) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.error = error
            pending.lost = lost
            pending.done.set()

    @property
    def backend_pid(self) -> int | None:
        """The listening connection's server process (None while reconnecting)."""
        conn = self._conn
        return None if conn is None else conn.pgconn.backend_pid

    def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
