"""Transaction control statements for PostgreSQL (kept with the engine's SQL)."""

from __future__ import annotations

BEGIN = "BEGIN"
BEGIN_READ = "BEGIN READ ONLY"
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
