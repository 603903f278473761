"""Transaction control statements for PostgreSQL (kept with the engine's SQL)."""

from __future__ import annotations

BEGIN = "BEGIN"
# A read plan (``@reads``: inspection, the read models) may take several
# statements, and under READ COMMITTED each one sees a new snapshot: a job
# moving between two of a listing's statements was listed twice, or not at
# all. REPEATABLE READ takes one snapshot for the whole transaction; read
# only, it never fails to serialise, so nothing has to be retried.
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
STEP_SAVEPOINT = "SAVEPOINT alkstore_step"
STEP_ROLLBACK = "ROLLBACK TO SAVEPOINT alkstore_step"
STEP_RELEASE = "RELEASE SAVEPOINT alkstore_step"
# Run on an application's idle, non-autocommit psycopg connection before
# joining it: psycopg sends BEGIN first, so the application's transaction is
# open and alkstore's steps become savepoints inside it.
OPEN_IMPLICIT = "SELECT 1"

# SQLSTATEs that mean "rolled back because of concurrent transactions; run it
# again": serialization_failure, deadlock_detected, lock_not_available (a
# lock_timeout or NOWAIT).
CONFLICT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})

# Sent on the listening connection when it has been quiet for a while: an
# answer proves the whole path to the server (a TCP keepalive only proves the
# next hop, which a proxy or pooler in between answers for).
PROBE = "SELECT 1"


def liveness_params(dead_peer_timeout: float) -> dict[str, str]:
    """libpq connection parameters that make the kernel notice a dead peer
    within about ``dead_peer_timeout`` seconds: keepalive probes on an idle
    connection (first after half the bound, then three more in the other
    half), and ``tcp_user_timeout`` for data sent and never acknowledged.
    Whole seconds for the keepalives (libpq's unit), milliseconds for the
    user timeout."""
    idle = max(1, round(dead_peer_timeout / 2))
    interval = max(1, round(dead_peer_timeout / 6))
    return {
        "keepalives": "1",
        "keepalives_idle": str(idle),
        "keepalives_interval": str(interval),
        "keepalives_count": "3",
        "tcp_user_timeout": str(max(1, round(dead_peer_timeout * 1000))),
    }
