"""A job's attempt history on PostgreSQL (``engines/attempt_log.py``, bound to
this engine's tables; docs/queues.md, "Attempts")."""

from __future__ import annotations

from collections.abc import Sequence

from ...protocol.plan import Fetch, Statement
from ...protocol.values.attempts import ATTEMPTS_KEPT
from .. import attempt_log as log
from ..sql import Sql, Variants
from . import tables


class Attempts:
    _record_attempt = Sql(log.record(tables))
    _trim_attempts = Sql(log.trim(tables))

    def record_attempt(
        self,
        job_id: int,
        outcome: str,
        started_us: int | None,
        error: str | None,
        trace: str | None,
        now_us: int,
    ) -> tuple[Statement, ...]:
        return (
            self._record_attempt.bind(job_id=job_id, outcome=outcome, started=started_us,
                                      error=error, trace=trace, now=now_us),
            self._trim_attempts.bind(job_id=job_id, keep=ATTEMPTS_KEPT),
        )  # fmt: skip

    _place_attempts = Variants({buried: Sql(log.place(tables, buried)) for buried in (True, False)})

    def place_attempts(self, job_id: int, buried: bool) -> Statement:
        return self._place_attempts[buried].bind(job_id=job_id)

    _job_attempts = Sql(log.read(tables), Fetch.ALL)

    def job_attempts(self, job_id: int) -> Statement:
        return self._job_attempts.bind(job_id=job_id)

    _forget_attempts = Sql(log.forget(tables, "= ANY(:ids::bigint[])"))

    def forget_attempts(self, job_ids: Sequence[int]) -> Statement:
        return self._forget_attempts.bind(ids=list(job_ids))
