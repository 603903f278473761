"""Fuzz target: decoding rows read back from a database.

A row may come from another program or another version, so every decoder
must refuse a malformed row with ``CodecError``. Property: ``rows.job_record``
/``claimed_at_once``/``job_info``/``dead_info``/``stream_event``, the read models' ``history_info``
/``queue_summary``/``stream_info``/``lock_info``/``attempt``, and ``claim.SweepCandidate`` +
``sweep_decision`` on arbitrary tuples (wrong lengths, wrong types, huge
ints, bad JSON, unknown states and reasons) raise only ``CodecError`` and
otherwise return well-typed values.

Run: ``python fuzz/fuzz_rows.py -atheris_runs=100000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime
from typing import Any

import atheris
import fuzzvalues as fv

with atheris.instrument_imports():
    from alkstore.protocol import rows
    from alkstore.protocol.plans import claim
    from alkstore.protocol.values.attempts import Attempt
    from alkstore.protocol.values.errors import CodecError
    from alkstore.protocol.values.types import (
        JobInfo,
        JobRecord,
        LockInfo,
        QueueSummary,
        StreamEvent,
        StreamInfo,
    )

# A plausible row per decoder: (length, field kinds). Kinds steer the fuzzer
# towards rows that get past the first field.
INT, TEXT, JSON, OPT_INT, OPT_TEXT, STATE, REASON, OUTCOME, FLAG, HOW = range(10)
JOB = [INT, TEXT, JSON, INT, INT, INT, INT, INT, OPT_INT, OPT_TEXT, INT, STATE, OPT_TEXT, INT,
       OPT_TEXT]  # fmt: skip
# a claim's row: a job's, then its queue's history retention and whether it is kept
CLAIM = [*JOB, OPT_INT, FLAG]
CLAIM_AT_ONCE = [*CLAIM, OPT_INT]  # the claim's row, then when the next job falls due
JOB_INFO = [*JOB, OPT_TEXT, OPT_TEXT]  # as inspected: a job's, then its unique and concurrency keys
# A dead letter's row ends with its concurrency key; a history row with its
# unique and concurrency keys.
DEAD = [INT, TEXT, JSON, INT, INT, INT, INT, INT, OPT_INT, OPT_TEXT, OPT_TEXT, REASON, INT,
        OPT_TEXT]  # fmt: skip
EVENT = [INT, TEXT, OPT_TEXT, JSON, INT]
SWEEP = [INT, INT, INT, OPT_INT, INT, INT, FLAG]
HISTORY = [INT, TEXT, OUTCOME, JSON, INT, INT, INT, INT, INT, INT, OPT_TEXT, OPT_TEXT, OPT_TEXT,
           OPT_TEXT, JSON]  # fmt: skip
SUMMARY = [INT, INT, INT, OPT_INT, INT, INT, FLAG, OPT_INT, OPT_INT, OPT_INT, OPT_INT, OPT_INT,
           OPT_INT, OPT_INT, FLAG, INT]  # fmt: skip
STREAM = [OPT_INT, OPT_INT, OPT_INT, INT, OPT_INT, OPT_INT]
CONSUMER = [TEXT, INT, FLAG]
LOCK = [TEXT, OPT_TEXT, INT, INT, FLAG]
# an attempt: number, how it ended, worker, start, end, error, trace
ATTEMPT = [INT, HOW, OPT_TEXT, OPT_INT, INT, OPT_TEXT, OPT_TEXT]

JSON_TEXTS = ['{"a": 1}', "[1, 2]", "null", '"x"', "1e400", "NaN", "{", "", "\ud800", '"\\ud800"']
REASONS = ["failed", "max_attempts", "expired", "claim_expired", "dead", "", "FAILED"]
OUTCOMES = ["acked", "cancelled", "dead", "", "ACKED"]
FLAGS = [0, 1, True, False, None, 2, -1, "1"]
HOWS = ["retried", "failed", "max_attempts", "claim_expired", "expired", "acked", "", "RETRIED"]


def _time(fdp: atheris.FuzzedDataProvider) -> int:
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice == 0:
        return fdp.ConsumeIntInRange(0, 10**16)
    if choice == 1:
        return fv.any_int(fdp)
    if choice == 2:
        # Around the edges of what a datetime can hold.
        edge = fdp.PickValueInList([253_402_300_799_999_999, -62_135_596_800_000_000])
        return int(edge) + fdp.ConsumeIntInRange(-2, 2)
    return fdp.ConsumeIntInRange(-(2**63), 2**63 - 1)


def _field(fdp: atheris.FuzzedDataProvider, kind: int) -> Any:
    if fdp.ConsumeIntInRange(0, 11) == 0:
        return fv.any_scalar(fdp)  # a wrong type, most likely
    if kind == INT:
        return _time(fdp)
    if kind == TEXT:
        return fv.any_text(fdp, 12)
    if kind == JSON:
        if fdp.ConsumeBool():
            return fdp.PickValueInList(JSON_TEXTS)
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 16))
    if kind == OPT_INT:
        return None if fdp.ConsumeBool() else _time(fdp)
    if kind == OPT_TEXT:
        return None if fdp.ConsumeBool() else fv.any_text(fdp, 12)
    if kind == STATE:
        return fdp.ConsumeIntInRange(-1, 3)
    if kind == OUTCOME:
        return fdp.PickValueInList(OUTCOMES)
    if kind == FLAG:
        return fdp.PickValueInList(FLAGS)
    if kind == HOW:
        return fdp.PickValueInList(HOWS)
    return fdp.PickValueInList(REASONS)


def _row(fdp: atheris.FuzzedDataProvider, shape: list[int]) -> Any:
    fields = [_field(fdp, kind) for kind in shape]
    change = fdp.ConsumeIntInRange(0, 9)
    if change == 0 and fields:
        del fields[fdp.ConsumeIntInRange(0, len(fields) - 1)]
    elif change == 1:
        fields.append(fv.any_scalar(fdp))
    elif change == 2:
        return fv.any_value(fdp, 2)  # not a row at all
    if fdp.ConsumeIntInRange(0, 3) == 0:
        return fields  # some drivers hand back lists
    return tuple(fields)


def _check(decoder: Any, row: Any, kind: type) -> Any:
    try:
        out = decoder(row)
    except CodecError:
        return None
    assert type(out) is kind, out
    return out


def _check_sweep(fdp: atheris.FuzzedDataProvider) -> None:
    row = _row(fdp, SWEEP)
    now_us = _time(fdp)
    candidate = _check(claim.sweep_candidate, row, claim.SweepCandidate)
    if candidate is None:
        return
    for field in dataclasses.fields(candidate):
        value = getattr(candidate, field.name)
        if field.name == "kept":
            assert isinstance(value, bool), candidate
            continue
        is_int = isinstance(value, int) and not isinstance(value, bool)
        assert is_int or (value is None and field.name == "expires_at_us"), candidate
    _check_decision(candidate, now_us)


def _check_decision(c: Any, now_us: int) -> None:
    reason = claim.sweep_decision(c, now_us)
    claim_live = c.state != 0 and c.visible_at_us > now_us
    if reason is None:
        assert claim_live or (
            (c.expires_at_us is None or c.expires_at_us > now_us) and c.attempts < c.max_attempts
        ), c
    elif reason == "expired":
        assert not claim_live and c.expires_at_us is not None and c.expires_at_us <= now_us
    elif reason in ("claim_expired", "max_attempts"):
        assert not claim_live and c.attempts >= c.max_attempts
        assert (reason == "max_attempts") == (c.state == 0)
    else:
        raise AssertionError(f"unknown reason {reason!r}")


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 9)
    if mode == 0:
        if fdp.ConsumeBool():
            job = _check(rows.job_record, _row(fdp, CLAIM), JobRecord)
        else:
            got = _check(rows.claimed_at_once, _row(fdp, CLAIM_AT_ONCE), tuple)
            job = None if got is None else got[0]
            if got is not None:
                assert type(got[0]) is JobRecord and (got[1] is None or type(got[1]) is int)
        if job is not None:
            assert all(
                type(getattr(job, name)) is int
                for name in ("id", "priority", "attempts", "max_attempts", "run_at_us", "claims")
            )
    elif mode == 1:
        info = _check(rows.job_info, _row(fdp, JOB_INFO), JobInfo)
        if info is not None:
            assert info.state in ("pending", "processing")
            assert isinstance(info.run_at, datetime) and isinstance(info.created_at, datetime)
            assert all(k is None or isinstance(k, str)
                       for k in (info.unique_key, info.concurrency_key))  # fmt: skip
    elif mode == 2:
        dead = _check(rows.dead_info, _row(fdp, DEAD), JobInfo)
        if dead is not None:
            assert dead.state == "dead" and dead.dead_reason in REASONS[:4]
            assert isinstance(dead.died_at, datetime)
            assert dead.unique_key is None
            assert dead.concurrency_key is None or isinstance(dead.concurrency_key, str)
    elif mode == 3:
        event = _check(rows.stream_event, _row(fdp, EVENT), StreamEvent)
        if event is not None:
            assert isinstance(event.created_at, datetime)
    elif mode == 4:
        _check_sweep(fdp)
    elif mode == 5:
        tried = _check(rows.attempt, _row(fdp, ATTEMPT), Attempt)
        if tried is not None:
            assert tried.outcome in HOWS[:5] and tried.died == (tried.outcome != "retried")
            assert isinstance(tried.finished_at, datetime)
            assert tried.duration is None or tried.started_at is not None
    elif mode == 6:
        done = _check(rows.history_info, _row(fdp, HISTORY), JobInfo)
        if done is not None:
            assert done.state in OUTCOMES[:2] and isinstance(done.finished_at, datetime)
            assert all(k is None or isinstance(k, str)
                       for k in (done.unique_key, done.concurrency_key))  # fmt: skip
    elif mode == 7:
        summary = _check(lambda r: rows.queue_summary("q", None, r), _row(fdp, SUMMARY),
                         QueueSummary)  # fmt: skip
        if summary is not None:
            assert isinstance(summary.paused, bool)
            assert isinstance(summary.unique_processing_blocks, bool)
            limit = summary.limits.concurrency_per_key
            assert limit is None or (isinstance(limit, int) and not isinstance(limit, bool))
            assert isinstance(summary.waiting, int) and not isinstance(summary.waiting, bool)
    elif mode == 8:
        consumers = [_row(fdp, CONSUMER) for _ in range(fdp.ConsumeIntInRange(0, 2))]
        info = _check(lambda r: rows.stream_info("s", r, consumers), _row(fdp, STREAM),
                      StreamInfo)  # fmt: skip
        if info is not None:
            assert all(c.lag >= 0 and isinstance(c.protected, bool) for c in info.consumers)
    elif mode == 9:
        lock = _check(rows.lock_info, _row(fdp, LOCK), LockInfo)
        if lock is not None:
            assert isinstance(lock.held, bool) and (lock.owner is None) == (lock.expires_at is None)
    else:
        # Well-typed candidates with any integers at all: a decision, never an error.
        fields: list[int | None] = [_time(fdp) for _ in SWEEP[:-1]]
        if fdp.ConsumeBool():
            fields[3] = None
        fields[1] = fdp.ConsumeIntInRange(-1, 3)
        candidate = claim.SweepCandidate(*fields, kept=fdp.ConsumeBool())  # type: ignore[arg-type]
        _check_decision(candidate, _time(fdp))


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
