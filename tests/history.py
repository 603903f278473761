"""Reading the history table in tests: no API returns its rows yet (the read
models do that), so the tests that compare an engine with the reference
model read it with their own statement."""

from __future__ import annotations

from typing import Any

from alkstore.protocol.plan import Fetch, Plan, Statement, fetch_all, reads
from alkstore.protocol.values import codec


@reads
def history_rows(d: Any) -> Plan[list[tuple[Any, ...]]]:
    """Every history row in id order, shaped as ``FinishedJob.row``."""
    table = "__alkstore_history" if d.name == "sqlite" else d.history
    rows = yield from fetch_all(
        Statement(
            "SELECT id, queue, outcome, payload, attempts, max_attempts, run_at, created_at, "
            f"finished_at, worker, last_error, prune_at FROM {table} ORDER BY id",
            fetch=Fetch.ALL,
        )
    )
    return [(*r[:3], codec.decode(r[3]), *r[4:]) for r in rows]
