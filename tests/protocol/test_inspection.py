"""``protocol/inspection.py``: which pages a job listing reads and how it
merges them, the arguments it refuses, and how the read models' rows decode
(``protocol/rows.py``)."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from alkstore.engines.postgres import PostgresDialect
from alkstore.engines.sqlite import SqliteDialect
from alkstore.protocol.dialect import LIVE_FILTERS, STATE_PENDING, STATE_PROCESSING
from alkstore.protocol.plan import Fetch, Statement, run_sync
from alkstore.protocol.plans.inspection import (
    JOB_STATES,
    check_after,
    check_job_state,
    first_ids,
    list_jobs,
    list_queues,
    sources,
)
from alkstore.protocol.plans.queues import cancel
from alkstore.protocol.rows import (
    dead_info,
    history_info,
    job_info,
    lock_info,
    queue_summary,
    stream_info,
)
from alkstore.protocol.values.errors import CodecError, InvalidArgument
from alkstore.protocol.values.names import cancel_channel
from alkstore.protocol.values.timeconv import to_datetime
from alkstore.protocol.values.types import ConsumerInfo, JobInfo, QueueLimits, Rate

S = 1_000_000
T0 = 1_700_000_000 * S


def job(job_id: int) -> JobInfo:
    t = to_datetime(T0)
    return JobInfo(job_id, "q", "pending", None, 0, 0, 3, t, t, None, None, None, None)


def test_the_states_a_listing_takes() -> None:
    assert JOB_STATES == (
        "pending", "ready", "scheduled", "processing", "waiting", "dead", "acked", "cancelled",
    )  # fmt: skip
    for state in (*JOB_STATES, None):
        assert check_job_state(state) == state
    for bad in ("done", "READY", "", 0, b"ready", ("ready",)):
        with pytest.raises(InvalidArgument, match="job state"):
            check_job_state(bad)
    assert check_after(None) == 0 and check_after(7) == 7
    for bad in (-1, True, 1.0, "3", 2**63):
        with pytest.raises(InvalidArgument):
            check_after(bad)


def test_each_state_reads_its_own_table_and_no_state_reads_live_and_dead() -> None:
    assert sources(None) == ("pending", "processing", "waiting", "dead")
    for state in JOB_STATES:
        assert sources(state) == (state,)


def test_the_merged_pages_are_the_lowest_ids_of_all_tables() -> None:
    """Invariant: merging one page per table (each the lowest ``limit`` ids
    above ``after`` of its table) gives the lowest ``limit`` ids of the
    tables together, so paging by the last id lists every job once."""
    rng = random.Random(7)
    for _ in range(200):
        everything = sorted(rng.sample(range(1, 60), rng.randint(0, 30)))
        # Each job is in one table (live pending, processing, dead ...).
        tables: list[list[int]] = [[], [], []]
        for i in everything:
            tables[rng.randrange(3)].append(i)
        limit = rng.randint(1, 5)
        listed: list[int] = []
        after = 0
        while True:
            pages = [[job(i) for i in t if i > after][:limit] for t in tables]
            page = first_ids(pages, limit)
            if not page:
                break
            assert len(page) <= limit
            listed += [j.id for j in page]
            after = page[-1].id
        assert listed == everything


class _Named:
    """A dialect stand-in whose statements are named for the method asked."""

    def __getattr__(self, name: str) -> Any:
        def statement(*args: Any) -> Statement:
            return Statement(name, args, Fetch.ALL)

        return statement


def _reads(plan: Any) -> list[Statement]:
    seen: list[Statement] = []

    def execute(statement: Statement) -> Any:
        seen.append(statement)
        return []

    assert run_sync(plan, execute) == []
    return seen


def test_a_listing_asks_for_a_page_of_each_table_it_reads() -> None:
    d: Any = _Named()
    assert _reads(list_jobs(d, "q", None, 0, 10, T0)) == [
        Statement("job_page", ("q", "pending", 0, 10, T0), Fetch.ALL),
        Statement("job_page", ("q", "processing", 0, 10, T0), Fetch.ALL),
        Statement("waiting_page", ("q", 0, 10), Fetch.ALL),
        Statement("dead_page", ("q", 0, 10), Fetch.ALL),
    ]
    for which in LIVE_FILTERS:
        assert _reads(list_jobs(d, "q", which, 5, 2, T0)) == [
            Statement("job_page", ("q", which, 5, 2, T0), Fetch.ALL)
        ]
    assert _reads(list_jobs(d, "q", "cancelled", 5, 2, T0)) == [
        Statement("history_page", ("q", "cancelled", 5, 2), Fetch.ALL)
    ]
    with pytest.raises(InvalidArgument):
        _reads(list_jobs(d, "q", "gone", 0, 10, T0))
    with pytest.raises(InvalidArgument):
        _reads(list_jobs(d, "q", None, 0, 0, T0))


def test_list_queues_names_an_outbox_by_its_outbox() -> None:
    summary = (0, 0, 0, None, 0, 0, None, None, None, None, None, None, None, None, None, 0)
    answers = {"queue_names": [("__alkstore_outbox:mail",), ("mail",)]}

    def execute(statement: Statement) -> Any:
        return answers.get(statement.sql, summary)

    class Dialect(_Named):
        def queue_summary(self, queue: str, now_us: int) -> Statement:
            return Statement("summary", (queue, now_us), Fetch.ONE)

    listed = run_sync(list_queues(Dialect(), T0), execute)  # type: ignore[arg-type]
    assert [(s.name, s.outbox) for s in listed] == [("__alkstore_outbox:mail", "mail"),
                                                   ("mail", None)]  # fmt: skip
    assert listed[1].paused is False  # no queues row: not paused
    assert listed[1].limits == QueueLimits() and listed[1].unique_processing_blocks is True


# -- rows ----------------------------------------------------------------------------


def test_a_live_job_row_carries_its_flow_control_keys() -> None:
    row = (9, "q", "1", 0, 1, 3, T0, T0, None, "w", T0 + S, 1, None, 1, None, "u:1", "acct:7")
    info = job_info(row)
    assert info.state == "processing" and (info.unique_key, info.concurrency_key) == (
        "u:1", "acct:7",
    )  # fmt: skip
    plain = job_info((*row[:-2], None, None))
    assert plain.unique_key is None and plain.concurrency_key is None
    with pytest.raises(CodecError, match="concurrency_key"):
        job_info((*row[:-1], 5))
    with pytest.raises(CodecError, match="wrong shape"):
        job_info(row[:-2])  # a claim's row is not an inspection's


def test_a_history_row_is_a_finished_job() -> None:
    row = (9, "q", "cancelled", '{"a": 1}', 2, 1, 3, T0, T0 - S, T0 + S, None, "why", "k", "c",
           None)  # fmt: skip
    info = history_info(row)
    assert info.state == "cancelled" and info.payload == {"a": 1}
    assert info.finished_at == to_datetime(T0 + S) and info.claimed_by is None
    assert info.last_error == "why" and info.expires_at is None and info.died_at is None
    # History keeps both flow-control keys, and the result.
    assert info.unique_key == "k" and info.concurrency_key == "c" and info.result is None
    plain = history_info((*row[:-3], None, None, '{"total": 3}'))
    assert plain.unique_key is None and plain.concurrency_key is None
    assert plain.result == {"total": 3}
    with pytest.raises(CodecError, match="outcome"):
        history_info((9, "q", "lost", "1", 2, 1, 3, T0, T0, T0, None, None, None, None, None))
    with pytest.raises(CodecError, match="unique_key"):
        history_info((9, "q", "acked", "1", 2, 1, 3, T0, T0, T0, None, None, 7, None, None))
    with pytest.raises(CodecError, match="concurrency_key"):
        history_info((*row[:-2], 7, None))
    with pytest.raises(CodecError):
        history_info((*row[:-1], "{not json"))
    with pytest.raises(CodecError, match="wrong shape"):
        history_info(row[:-1])


def test_a_dead_letter_row_keeps_its_concurrency_key() -> None:
    row = (9, "q", '{"a": 1}', 2, 3, 3, T0, T0 - S, None, "w", "boom", "failed", T0 + S, "c")
    info = dead_info(row)
    assert info.state == "dead" and info.dead_reason == "failed"
    assert info.died_at == to_datetime(T0 + S) and info.last_error == "boom"
    # The dead table keeps the concurrency key (a requeue restores it), not the unique key.
    assert info.concurrency_key == "c" and info.unique_key is None
    assert dead_info((*row[:-1], None)).concurrency_key is None
    with pytest.raises(CodecError, match="concurrency_key"):
        dead_info((*row[:-1], 7))
    with pytest.raises(CodecError, match="wrong shape"):
        dead_info(row[:-1])


def test_a_queue_summary_row_reads_flags_and_spans_on_both_engines() -> None:
    limits = (2, 5, 3 * S, None, None)
    sqlite = queue_summary("q", None, (1, 2, 3, T0, 4, 5, 1, 60 * S, None, *limits, 0, 6))
    postgres = queue_summary("q", None, (1, 2, 3, T0, 4, 5, True, 60 * S, None, *limits, False, 6))
    assert sqlite.waiting == 6
    assert sqlite == postgres
    assert sqlite.paused is True and sqlite.history_retention == timedelta(minutes=1)
    assert sqlite.oldest_ready_at == to_datetime(T0) and sqlite.dead_retention is None
    assert sqlite.limits == QueueLimits(2, Rate(5, per=3)) and not sqlite.unique_processing_blocks
    none = (None,) * 5
    # A policy never set (NULL) or set to block: a processing job keeps its key.
    for blocks in (None, 1, True):
        row = (1, 2, 3, T0, 4, 5, 1, None, None, *none, blocks, 0)
        summary = queue_summary("q", None, row)
        assert summary.unique_processing_blocks is True and summary.limits == QueueLimits()
    with pytest.raises(CodecError, match="paused"):
        queue_summary("q", None, (1, 2, 3, T0, 4, 5, 2, None, None, *none, None, 0))
    with pytest.raises(CodecError, match="unique_processing"):
        queue_summary("q", None, (1, 2, 3, T0, 4, 5, 1, None, None, *none, 2, 0))
    with pytest.raises(CodecError, match="rate"):
        queue_summary("q", None, (1, 2, 3, T0, 4, 5, 1, None, None, None, 0, S, None, None, 1, 0))
    with pytest.raises(CodecError, match="concurrency_limit"):
        queue_summary("q", None, (1, 2, 3, T0, 4, 5, 1, None, None, "2", *none[1:], None, 0))
    with pytest.raises(CodecError, match="wrong shape"):
        queue_summary("q", None, (1, 2, 3))


def test_a_consumers_lag_is_how_far_the_head_is_past_it_never_below_zero() -> None:
    info = stream_info(
        "s", (10, None, None, 4, 7, T0), [("a", 3, 0), ("b", 10, 1), ("c", 12, False)]
    )
    assert info.consumers == (
        ConsumerInfo("a", 3, 7, False), ConsumerInfo("b", 10, 0, True),
        ConsumerInfo("c", 12, 0, False),
    )  # fmt: skip
    never = stream_info("s", (None, None, None, 0, None, None), [("a", 3, 0)])
    assert never.head_offset == 0 and never.consumers == (ConsumerInfo("a", 3, 0, False),)


def test_a_released_lock_has_no_owner_and_no_expiry() -> None:
    released = lock_info(("l", None, 4, 0, 0))
    assert (released.owner, released.expires_at, released.held) == (None, None, False)
    lapsed = lock_info(("l", "o", 4, T0, False))
    assert lapsed.expires_at == to_datetime(T0) and lapsed.held is False


@pytest.mark.parametrize("dialect", [SqliteDialect(), PostgresDialect("alk_t_plan")])
def test_only_a_processing_jobs_cancel_notifies_the_cancel_channel(dialect: Any) -> None:
    """A pending job is nobody's: its cancel wakes no worker (and writes
    nothing but the delete); a processing job's cancel wakes the queue's
    cancel channel, read in the same transaction as the delete."""
    for state, wakes in ((STATE_PENDING, False), (STATE_PROCESSING, True)):
        seen: list[Statement] = []

        def execute(statement: Statement, state: int = state, seen: list[Statement] = seen) -> Any:
            seen.append(statement)
            if statement.sql == dialect.cancel_target("q", 1).sql:
                return (state, False)
            return 1 if statement.fetch is Fetch.ROWCOUNT else None

        assert run_sync(cancel(dialect, "q", 1, "o", T0), execute) is True
        notified = [s for s in seen if s.wakes == (cancel_channel("q"),)]
        assert bool(notified) is wakes, state
    # a job that is not there (not live, not waiting): nothing else runs
    seen = []
    assert run_sync(cancel(dialect, "q", 1, "o", T0), lambda s: seen.append(s)) is False
    assert [s.sql for s in seen] == [
        dialect.cancel_target("q", 1).sql, dialect.get_waiting("q", 1).sql
    ]
