"""Decoding rows read back from an engine into value types.

A row may have been written by another program or another version, so every
field is checked; a malformed row raises ``CodecError`` instead of a raw
``TypeError`` deep inside user code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from . import codec
from .dialect import STATE_PENDING, STATE_PROCESSING
from .errors import CodecError, DatabaseError, brief
from .plan import Row
from .timeconv import to_datetime
from .types import DeadReason, JobInfo, JobRecord, StreamEvent

_DEAD_REASONS = frozenset({"failed", "max_attempts", "expired", "claim_expired"})


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"row field {what} is not an integer: {brief(value)}")
    return value


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _time(value: Any, what: str) -> datetime:
    us = _int(value, what)
    try:
        return to_datetime(us)
    except OverflowError as exc:
        raise CodecError(f"row field {what} is out of a datetime's range: {brief(us)}") from exc


def _opt_time(value: Any, what: str) -> datetime | None:
    return None if value is None else _time(value, what)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"row field {what} is not text: {brief(value)}")
    return value


def _opt_str(value: Any, what: str) -> str | None:
    return None if value is None else _str(value, what)


def _shape(row: Row, n: int, what: str) -> None:
    if not isinstance(row, tuple | list) or len(row) != n:
        raise CodecError(f"{what} row has the wrong shape: {brief(row)}")


def job_record(row: Row) -> JobRecord:
    """A row returned by a claim (``JOB_COLUMNS``)."""
    # The common case, checked in one pass (``type(x) is int`` also refuses
    # bool); anything unusual takes the field-by-field path for its error.
    if type(row) is tuple and len(row) == 14:
        (id_, queue, text, priority, attempts, max_attempts, run_at, created_at, expires_at,
         claimed_by, visible_at, _state, _error, claims) = row  # fmt: skip
        if (
            type(id_) is int and type(queue) is str and type(text) is str
            and type(priority) is int and type(attempts) is int and type(max_attempts) is int
            and type(run_at) is int and type(created_at) is int
            and (expires_at is None or type(expires_at) is int)
            and type(claimed_by) is str and type(visible_at) is int and type(claims) is int
        ):  # fmt: skip
            payload = codec.decode(text)
            return JobRecord(id_, queue, payload, priority, attempts, max_attempts, run_at,
                             created_at, expires_at, claimed_by, visible_at, claims)  # fmt: skip
    return _job_record_checked(row)


def _job_record_checked(row: Row) -> JobRecord:
    _shape(row, 14, "job")
    return JobRecord(
        id=_int(row[0], "id"),
        queue=_str(row[1], "queue"),
        payload=codec.decode(_str(row[2], "payload")),
        priority=_int(row[3], "priority"),
        attempts=_int(row[4], "attempts"),
        max_attempts=_int(row[5], "max_attempts"),
        run_at_us=_int(row[6], "run_at"),
        created_at_us=_int(row[7], "created_at"),
        expires_at_us=_opt_int(row[8], "expires_at"),
        claimed_by=_str(row[9], "claimed_by"),
        claim_expires_at_us=_int(row[10], "visible_at"),
        claims=_int(row[13], "claims"),
    )


def job_info(row: Row) -> JobInfo:
    """A live job row (``JOB_COLUMNS``) for inspection."""
    _shape(row, 14, "job")
    state = _int(row[11], "state")
    if state not in (STATE_PENDING, STATE_PROCESSING):
        raise CodecError(f"row field state has an unknown value: {brief(state)}")
    processing = state == STATE_PROCESSING
    return JobInfo(
        id=_int(row[0], "id"),
        queue=_str(row[1], "queue"),
        state="processing" if processing else "pending",
        payload=codec.decode(_str(row[2], "payload")),
        priority=_int(row[3], "priority"),
        attempts=_int(row[4], "attempts"),
        max_attempts=_int(row[5], "max_attempts"),
        run_at=_time(row[6], "run_at"),
        created_at=_time(row[7], "created_at"),
        expires_at=_opt_time(row[8], "expires_at"),
        claimed_by=_opt_str(row[9], "claimed_by") if processing else None,
        claim_expires_at=_time(row[10], "visible_at") if processing else None,
        last_error=_opt_str(row[12], "last_error"),
    )


def dead_info(row: Row) -> JobInfo:
    """A dead-letter row (``DEAD_COLUMNS``)."""
    _shape(row, 13, "dead letter")
    reason = _str(row[11], "reason")
    if reason not in _DEAD_REASONS:
        raise CodecError(f"row field reason has an unknown value: {brief(reason)}")
    dead_reason: DeadReason = reason  # type: ignore[assignment]
    return JobInfo(
        id=_int(row[0], "id"),
        queue=_str(row[1], "queue"),
        state="dead",
        payload=codec.decode(_str(row[2], "payload")),
        priority=_int(row[3], "priority"),
        attempts=_int(row[4], "attempts"),
        max_attempts=_int(row[5], "max_attempts"),
        run_at=_time(row[6], "run_at"),
        created_at=_time(row[7], "created_at"),
        expires_at=_opt_time(row[8], "expires_at"),
        claimed_by=_opt_str(row[9], "claimed_by"),
        claim_expires_at=None,
        last_error=_opt_str(row[10], "last_error"),
        dead_reason=dead_reason,
        died_at=_time(row[12], "died_at"),
    )


def stream_event(row: Row) -> StreamEvent:
    """An event row (``EVENT_COLUMNS``)."""
    _shape(row, 5, "event")
    return StreamEvent(
        offset=_int(row[0], "offset"),
        stream=_str(row[1], "stream"),
        key=_opt_str(row[2], "key"),
        payload=codec.decode(_str(row[3], "payload")),
        created_at=_time(row[4], "created_at"),
    )


def schema_version(row: Row | None, newest: int, where: str) -> int:
    """The schema version stored in ``where`` (0 when none is), refusing a
    value that is not a version number or is newer than ``newest``."""
    if row is None:
        return 0
    text = row[0] if isinstance(row, tuple | list) and len(row) == 1 else None
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 18:
        raise DatabaseError(
            f"{where} holds schema version {brief(text)}, which is not a version number: "
            "the alkstore tables were changed by something else"
        )
    version = int(text)
    if version > newest:
        raise DatabaseError(
            f"{where} is at schema version {version}, newer than this alkstore ({newest}): "
            "upgrade alkstore"
        )
    return version
