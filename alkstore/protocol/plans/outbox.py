"""Outbox delivery runs: what becomes of each message a run claimed.

``Outbox.run_once`` claims a batch, calls ``deliver`` for each message,
retries those whose delivery raised and acks those delivered. A run can stop
part way: cancelled, or a round trip failed. Whatever stops it, each message
it claimed ends settled by what happened to it, instead of staying claimed
until its visibility timeout:

- ``deliver`` returned: the message was delivered. It is acked (handing it
  back would deliver it twice).
- ``deliver`` raised an ``Exception``: it is retried with backoff, or buried
  once its attempts are spent, as in a run that finishes.
- its delivery never finished (not reached, or ``deliver`` was cancelled or
  raised a ``BaseException``): it is handed back, due now, its attempt
  refunded, as a stopping worker hands back its unfinished jobs. The far
  side may have seen part of it: delivery is at least once.

``Batch`` keeps that account and says what is left to do; it and the plans
here are pure (``alkstore/api/outbox.py`` performs them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..dialect import Dialect
from ..plan import Plan
from ..values.types import JobRecord
from . import claim as claim_plans
from .worker import release_all


class Step(enum.Enum):
    CLAIMED = "claimed"  # its delivery has not finished: hand it back
    DELIVERED = "delivered"  # deliver returned: ack it
    FAILED = "failed"  # deliver raised: retry it
    SETTLED = "settled"  # acked, retried or handed back: nothing left to do


@dataclass
class Batch:
    """The messages one run claimed, in claim order, and how far each got."""

    records: dict[int, JobRecord] = field(default_factory=dict)
    steps: dict[int, Step] = field(default_factory=dict)
    errors: dict[int, Exception] = field(default_factory=dict)

    def claimed(self, records: list[JobRecord]) -> None:
        for record in records:
            self.records[record.id] = record
            self.steps[record.id] = Step.CLAIMED

    def delivered(self, job_id: int) -> None:
        self._move(job_id, Step.CLAIMED, Step.DELIVERED)

    def failed(self, job_id: int, error: Exception) -> None:
        self._move(job_id, Step.CLAIMED, Step.FAILED)
        self.errors[job_id] = error

    def retried(self, job_id: int) -> None:
        self._move(job_id, Step.FAILED, Step.SETTLED)
        self.errors.pop(job_id, None)

    def finished(self) -> None:
        """The settling plan committed: what it acked and handed back is done."""
        for job_id, step in self.steps.items():
            if step in (Step.CLAIMED, Step.DELIVERED):
                self.steps[job_id] = Step.SETTLED

    def _move(self, job_id: int, before: Step, after: Step) -> None:
        step = self.steps.get(job_id)
        if step is not before:
            raise ValueError(f"message {job_id} is {step}, not {before}")
        self.steps[job_id] = after

    def _with(self, step: Step) -> list[JobRecord]:
        return [self.records[i] for i, s in self.steps.items() if s is step]

    def unsettled(self) -> bool:
        return any(s is not Step.SETTLED for s in self.steps.values())

    def open_records(self) -> list[JobRecord]:
        """Every message with something left to do (to bound the settling by)."""
        return [self.records[i] for i, s in self.steps.items() if s is not Step.SETTLED]

    def to_ack(self) -> list[JobRecord]:
        return self._with(Step.DELIVERED)

    def to_retry(self) -> list[tuple[JobRecord, Exception]]:
        return [(r, self.errors[r.id]) for r in self._with(Step.FAILED)]

    def to_release(self) -> list[JobRecord]:
        return self._with(Step.CLAIMED)


def claim(
    d: Dialect, queue: str, worker: str, n: int, now_us: int, visibility_us: int, batch: Batch
) -> Plan[list[JobRecord]]:
    """Claim up to ``n`` messages and note them in ``batch`` as soon as the
    claim's statement answers, before its commit: a run stopped while the
    claim commits then hands back what it may have taken (a hand-back of a
    claim that did not commit is refused, harmlessly)."""
    records = yield from claim_plans.claim(d, queue, worker, n, now_us, visibility_us)
    batch.claimed(records)
    return records


@dataclass(frozen=True, slots=True)
class Settled:
    acked: set[int]  # delivered messages still owned by their claims, now acked
    released: int  # undelivered messages handed back


def settle(d: Dialect, worker: str, batch: Batch, origin: str, now_us: int) -> Plan[Settled]:
    """In one transaction: ack every delivered message, hand back every one
    whose delivery did not finish (due now, attempt refunded, the queue's
    workers woken). Failed deliveries are retried on their own, beforehand.

    Both steps are the worker's own plans (its batched ack, its shutdown
    hand-back), so a message is acked or handed back only while its claim
    (by number) is still this run's: one whose claim lapsed meanwhile is
    someone else's to deliver, again, even if it was claimed by the same
    worker id."""
    acked = yield from claim_plans.ack_many(d, worker, batch.to_ack(), now_us)
    release = batch.to_release()
    released = (yield from release_all(d, release, origin, now_us)) if release else 0
    return Settled(acked, released)
