"""Opening a Postgres store, below the facades: its options and the
opener's arguments checked (the DSN with its liveness parameters, and
read-only sessions). Shared by every Postgres opener (async and
``alkstore.sync``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...engines.postgres import control
from ...engines.postgres.names import check_schema
from ...protocol.values.errors import InvalidArgument, brief
from ...protocol.values.ints import check_bool, check_int
from ...protocol.values.timeconv import check_seconds
from .. import environment
from .executor import END_TIMEOUT
from .listener import ListenerOptions

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass
class PostgresOptions:
    """Engine options for Postgres (not contract: see docs/engines.md)."""

    # Postgres schema holding alkstore's tables, so they never collide with
    # the application's.
    schema: str = "alkstore"
    pool_size: int = 10
    connect_timeout: float = 10.0
    # Longest a sent COMMIT or ROLLBACK is waited for, even by a cancelled
    # caller; past it the connection is dropped (a COMMIT then raises
    # CommitUnknown).
    commit_timeout: float = END_TIMEOUT
    # A peer that stopped answering (a half-open connection after a network
    # blip or a failover) is noticed by the kernel within about this long,
    # on every connection: TCP keepalives and tcp_user_timeout (libpq
    # parameters a DSN may set itself, which then win).
    dead_peer_timeout: float = 10.0
    # Longest one round trip of alkstore's own statements on a pooled
    # connection may go unanswered; past it the connection is dropped, the
    # server is asked to cancel, and the operation fails with DatabaseError
    # (CommitUnknown for a COMMIT). Catches what keepalives cannot: a path
    # whose next hop (a proxy, a pooler) answers for a server that does not.
    # The caller's own statements (tx.execute) are not bounded. None: off.
    response_timeout: float | None = 15.0
    listener: ListenerOptions = field(default_factory=ListenerOptions)
    # Seconds between housekeeping passes (Store.prune) in the background;
    # None: none (run store.prune() yourself, or `alkstore prune`).
    housekeeping_interval: float | None = 10.0
    # Housekeeping vacuums alkstore's churning tables (jobs, claim_log, locks,
    # history, dead) once their dead rows pass autovacuum's threshold, with
    # SKIP_LOCKED, whether or not the server's autovacuum is on; False: leave
    # them to autovacuum (docs/engines.md, "Table health").
    vacuum: bool = True
    # A statement alkstore has sent this many times on a connection is
    # prepared on the server and run by name from then on (parsed and
    # planned once: about 100 us less of server time for a single enqueue):
    # psycopg's prepare_threshold, with its default. None: never, for a
    # pooler that cannot keep prepared statements across transactions
    # (PgBouncer in transaction mode before 1.21).
    prepare_threshold: int | None = 5

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Refuse a setting out of range with ``InvalidArgument`` (again at
        open: the fields may have been changed since)."""
        check_schema(self.schema)
        check_int(self.pool_size, "pool_size", lo=1, hi=10_000)
        check_seconds(self.connect_timeout, "connect_timeout")
        check_seconds(self.commit_timeout, "commit_timeout")
        check_seconds(self.dead_peer_timeout, "dead_peer_timeout")
        if self.response_timeout is not None:
            check_seconds(self.response_timeout, "response_timeout")
        if not isinstance(self.listener, ListenerOptions):
            raise InvalidArgument(f"listener must be a ListenerOptions, got {brief(self.listener)}")
        self.listener.check()
        if self.housekeeping_interval is not None:
            check_seconds(self.housekeeping_interval, "housekeeping_interval")
        check_bool(self.vacuum, "vacuum")
        if self.prepare_threshold is not None:
            check_int(self.prepare_threshold, "prepare_threshold", lo=0, hi=2**31 - 1)


def with_liveness(dsn: str, dead_peer_timeout: float) -> str:
    """``dsn`` with the keepalive parameters of ``dead_peer_timeout`` added,
    those it sets itself kept. A DSN libpq cannot parse is refused here."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise InvalidArgument(f"dsn is not a valid PostgreSQL connection string: {exc}") from None
    extra = {k: v for k, v in control.liveness_params(dead_peer_timeout).items() if k not in given}
    return make_conninfo(dsn, **extra)


def read_only_sessions(dsn: str) -> str:
    """``dsn`` with every session made read-only by the server
    (``default_transaction_read_only``), added to whatever ``options`` it
    sets itself: a write fails there whatever sent it."""
    given = conninfo_to_dict(dsn).get("options")
    setting = "-c default_transaction_read_only=on"
    return make_conninfo(dsn, options=f"{given} {setting}" if given else setting)


def resolve(dsn: object, options: object, read_only: object) -> tuple[PostgresOptions, str, bool]:
    """An opener's arguments, checked: the options, the DSN to connect with
    (``dsn``, else ``$ALKSTORE_DSN``, else the local test server; with the
    keepalive parameters, and read-only sessions for ``read_only``), and
    ``read_only``. Shared by every Postgres opener (async and ``alkstore.sync``)."""
    opts = PostgresOptions() if options is None else options
    if not isinstance(opts, PostgresOptions):
        raise InvalidArgument(f"options must be a PostgresOptions, got {brief(options)}")
    opts.check()
    if dsn is not None and not isinstance(dsn, str):
        raise InvalidArgument(f"dsn must be a str, got {brief(dsn)}")
    read_only = check_bool(read_only, "read_only")
    target = with_liveness(
        dsn or environment.dsn() or DEFAULT_DSN, opts.dead_peer_timeout
    )
    if read_only:
        target = read_only_sessions(target)
    return opts, target, read_only
