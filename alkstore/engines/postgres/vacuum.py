"""Vacuuming alkstore's churning tables on PostgreSQL: which tables, when
they are due, and the command (run outside any transaction, so not a
``Statement`` of a plan)."""

from __future__ import annotations

from ...protocol.plan import Fetch, Statement
from ..sql import Sql
from .names import quote_ident

# The tables whose rows churn with the work (a queue's: inserted, updated by
# each claim, deleted by the ack), and when one is due: more dead rows than
# VACUUM_THRESHOLD + VACUUM_SCALE x the live ones. The same figures as the
# per-table autovacuum settings of schema version 5 (schema.CHURN_STORAGE),
# so alkstore's own vacuum and the server's agree on what "due" means.
CHURN_TABLES = ("jobs", "claim_log", "locks", "history", "dead", "waiting", "deps", "attempts")
VACUUM_THRESHOLD = 1000
VACUUM_SCALE = 0.01


class Vacuum:
    schema: str

    # pg_stat_user_tables: the cumulative statistics, updated by each backend
    # within a second of its commits (no table scan: a read of shared memory).
    _churn_stats = Sql(
        "SELECT relname::text, n_live_tup, n_dead_tup FROM pg_stat_user_tables "
        "WHERE schemaname = :schema AND relname IN ("
        + ", ".join(f"'{t}'" for t in CHURN_TABLES)
        + ") ORDER BY relname",
        Fetch.ALL,
    )

    def churn_stats(self) -> Statement:
        return self._churn_stats.bind(schema=self.schema)

    vacuum_threshold = VACUUM_THRESHOLD
    vacuum_scale = VACUUM_SCALE

    def vacuum(self, table: str) -> str:
        # SKIP_LOCKED: a table another process (or autovacuum) is vacuuming
        # right now is skipped, not waited for. Not FULL: no exclusive lock,
        # readers and writers carry on; the space is reused, not returned.
        if table not in CHURN_TABLES:
            raise ValueError(f"not one of alkstore's churning tables: {table!r}")
        return f"VACUUM (SKIP_LOCKED) {quote_ident(self.schema)}.{quote_ident(table)}"
