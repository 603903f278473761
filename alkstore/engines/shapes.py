"""SQL shapes both engines build their statements from: the select lists of
the protocol's row shapes, the columns a statement moves between tables,
and the skip-scan that finds distinct names one index seek at a time. Not
rules (those are :mod:`.rules`): they decide nothing."""

from __future__ import annotations

from ..protocol.dialect import (
    DEAD_COLUMNS,
    DUE_SCHEDULE_COLUMNS,
    EVENT_COLUMNS,
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    JOB_INFO_COLUMNS,
    SCHEDULE_COLUMNS,
    WAITING_COLUMNS,
    column_list,
)

JOB_COLS = column_list(JOB_COLUMNS)
JOB_INFO_COLS = column_list(JOB_INFO_COLUMNS)
DEAD_COLS = column_list(DEAD_COLUMNS)
EVENT_COLS = column_list(EVENT_COLUMNS)
HISTORY_COLS = column_list(HISTORY_COLUMNS)
SCHEDULE_COLS = column_list(SCHEDULE_COLUMNS)
DUE_SCHEDULE_COLS = column_list(DUE_SCHEDULE_COLUMNS)
# What the sweep reads of a candidate (protocol.plans.claim.SweepCandidate).
SWEEP_COLS = "id, state, visible_at, expires_at, attempts, max_attempts, keep"
# The columns a finished job's move into history fills (the read shape,
# HISTORY_COLUMNS, leaves out its metadata and prune time).
HISTORY_INSERT_COLS = (
    "id, queue, outcome, payload, priority, attempts, max_attempts, run_at, created_at, "
    "finished_at, worker, last_error, headers, prune_at, unique_key, concurrency_key"
)


# A waiting job's row (the ``waiting`` table), as inserted and as the
# inspection reads it (protocol.dialect.WAITING_COLUMNS).
WAITING_COLS = column_list(WAITING_COLUMNS)


def distinct_names(cte: str, table: str, column: str) -> str:
    """A recursive CTE ``cte(name)`` of the distinct values of ``column``,
    each found by one index seek from the one before (a skip-scan); the last
    row is NULL."""
    first = f"SELECT {column} FROM {table} ORDER BY {column} LIMIT 1"
    after = f"SELECT {column} FROM {table} WHERE {column} > {cte}.name ORDER BY {column} LIMIT 1"
    return (
        f"{cte}(name) AS (SELECT ({first}) UNION ALL "
        f"SELECT ({after}) FROM {cte} WHERE {cte}.name IS NOT NULL)"
    )


def per_priority_min(table: str, order: str, indexed: str, where: str, column: str) -> str:
    """``MIN(column)`` over the rows of ``table`` that ``where`` selects, read
    one priority at a time from an index on ``(queue, priority DESC, column,
    ...)`` (``order``: that first key, the rules' ``PRIORITY_FIRST``) whose
    predicate ``indexed`` implies (``where`` implies ``indexed``): a
    recursive CTE steps from each priority present to the next lower one,
    one index seek each (a skip-scan), and each priority's least ``column``
    is its first entry that ``where`` selects. Queues have few priorities,
    so this is a handful of seeks."""
    top = f"SELECT priority FROM {table} WHERE {indexed} ORDER BY {order} LIMIT 1"
    lower = (
        f"SELECT priority FROM {table} WHERE {indexed} AND priority < prios.p "
        f"ORDER BY {order} LIMIT 1"
    )
    first = (
        f"SELECT {column} FROM {table} WHERE {where} AND priority = prios.p "
        f"ORDER BY {column} LIMIT 1"
    )
    return (
        f"WITH RECURSIVE prios(p) AS (SELECT ({top}) UNION ALL "
        f"SELECT ({lower}) FROM prios WHERE prios.p IS NOT NULL) "
        f"SELECT MIN(({first})) FROM prios WHERE prios.p IS NOT NULL"
    )
