"""``Batch``: the outbox run's account of each claimed message (delivered,
failed, retried, settled), which decides what a stopped run acks, retries and
hands back; tests/cancellation/test_outbox_stop.py stops real runs."""

from __future__ import annotations

import pytest

from alkstore.protocol.plans.outbox import Batch, Step
from alkstore.protocol.values.types import JobRecord


def record(job_id: int) -> JobRecord:
    return JobRecord(job_id, "q", None, 0, 1, 5, 0, 0, None, "w", 10, 1)


def test_batch_account() -> None:
    """The pure account: what a stopped run must ack, retry and hand back."""
    batch = Batch()
    batch.claimed([record(1), record(2), record(3), record(4)])
    error = RuntimeError("x")
    batch.delivered(1)
    batch.failed(2, error)
    assert [r.id for r in batch.to_ack()] == [1]
    assert [(r.id, e) for r, e in batch.to_retry()] == [(2, error)]
    assert [r.id for r in batch.to_release()] == [3, 4]
    assert batch.unsettled()
    batch.retried(2)
    assert batch.to_retry() == []
    assert [r.id for r in batch.open_records()] == [1, 3, 4]
    batch.finished()
    assert not batch.unsettled()
    assert set(batch.steps.values()) == {Step.SETTLED}
    with pytest.raises(ValueError):
        batch.delivered(3)  # settled already: nothing may move it again
