"""Decoding rows read back from an engine into value types.

A row may have been written by another program or another version, so every
field is checked; a malformed row raises ``CodecError`` instead of a raw
``TypeError`` deep inside user code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from . import codec
from .dialect import (
    CLAIM_COLUMNS,
    DEAD_COLUMNS,
    EVENT_COLUMNS,
    JOB_COLUMNS,
    STATE_PENDING,
    STATE_PROCESSING,
)
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
    """A row returned by a claim (``CLAIM_COLUMNS``)."""
    # The common case, checked in one pass (``type(x) is int`` also refuses
    # bool); anything unusual takes the field-by-field path for its error.
    if type(row) is tuple and len(row) == 15:
        (id_, queue, text, priority, attempts, max_attempts, run_at, created_at, expires_at,
         claimed_by, visible_at, _state, _error, claims, history_us) = row  # fmt: skip
        if (
            type(id_) is int and type(queue) is str and type(text) is str
            and type(priority) is int and type(attempts) is int and type(max_attempts) is int
            and type(run_at) is int and type(created_at) is int
            and (expires_at is None or type(expires_at) is int)
            and type(claimed_by) is str and type(visible_at) is int and type(claims) is int
            and (history_us is None or type(history_us) is int)
        ):  # fmt: skip
            payload = codec.decode(text)
            return JobRecord(id_, queue, payload, priority, attempts, max_attempts, run_at,
                             created_at, expires_at, claimed_by, visible_at, claims,
                             history_us)  # fmt: skip
    return _job_record_checked(row)


class _Fields:
    """A row read by column name (the row shapes of ``protocol.dialect``),
    each field checked as it is read."""

    __slots__ = ("_at", "_row")

    def __init__(self, row: Row, columns: tuple[str, ...], what: str) -> None:
        _shape(row, len(columns), what)
        self._row = row
        self._at = _POSITIONS[columns]

    def _get(self, name: str) -> Any:
        return self._row[self._at[name]]

    def integer(self, name: str) -> int:
        return _int(self._get(name), name)

    def opt_integer(self, name: str) -> int | None:
        return _opt_int(self._get(name), name)

    def text(self, name: str) -> str:
        return _str(self._get(name), name)

    def opt_text(self, name: str) -> str | None:
        return _opt_str(self._get(name), name)

    def instant(self, name: str) -> datetime:
        return _time(self._get(name), name)

    def opt_instant(self, name: str) -> datetime | None:
        return _opt_time(self._get(name), name)

    def payload(self) -> codec.JSON:
        return codec.decode(self.text("payload"))


_POSITIONS: dict[tuple[str, ...], dict[str, int]] = {
    columns: {name: i for i, name in enumerate(columns)}
    for columns in (JOB_COLUMNS, CLAIM_COLUMNS, DEAD_COLUMNS, EVENT_COLUMNS)
}


def _identity(f: _Fields) -> dict[str, Any]:
    """What every job row shares, live or dead."""
    return {
        "id": f.integer("id"),
        "queue": f.text("queue"),
        "payload": f.payload(),
        "priority": f.integer("priority"),
        "attempts": f.integer("attempts"),
        "max_attempts": f.integer("max_attempts"),
    }


def _job_record_checked(row: Row) -> JobRecord:
    f = _Fields(row, CLAIM_COLUMNS, "job")
    return JobRecord(
        **_identity(f),
        run_at_us=f.integer("run_at"),
        created_at_us=f.integer("created_at"),
        expires_at_us=f.opt_integer("expires_at"),
        claimed_by=f.text("claimed_by"),
        claim_expires_at_us=f.integer("visible_at"),
        claims=f.integer("claims"),
        history_us=f.opt_integer("history_us"),
    )


def _times(f: _Fields) -> dict[str, Any]:
    return {
        "run_at": f.instant("run_at"),
        "created_at": f.instant("created_at"),
        "expires_at": f.opt_instant("expires_at"),
    }


def job_info(row: Row) -> JobInfo:
    """A live job row (``JOB_COLUMNS``) for inspection."""
    f = _Fields(row, JOB_COLUMNS, "job")
    state = f.integer("state")
    if state not in (STATE_PENDING, STATE_PROCESSING):
        raise CodecError(f"row field state has an unknown value: {brief(state)}")
    processing = state == STATE_PROCESSING
    return JobInfo(
        **_identity(f),
        **_times(f),
        state="processing" if processing else "pending",
        claimed_by=f.opt_text("claimed_by") if processing else None,
        claim_expires_at=f.instant("visible_at") if processing else None,
        last_error=f.opt_text("last_error"),
    )


def dead_info(row: Row) -> JobInfo:
    """A dead-letter row (``DEAD_COLUMNS``)."""
    f = _Fields(row, DEAD_COLUMNS, "dead letter")
    reason = f.text("reason")
    if reason not in _DEAD_REASONS:
        raise CodecError(f"row field reason has an unknown value: {brief(reason)}")
    dead_reason: DeadReason = reason  # type: ignore[assignment]
    return JobInfo(
        **_identity(f),
        **_times(f),
        state="dead",
        claimed_by=f.opt_text("claimed_by"),
        claim_expires_at=None,
        last_error=f.opt_text("last_error"),
        dead_reason=dead_reason,
        died_at=f.instant("died_at"),
    )


def stream_event(row: Row) -> StreamEvent:
    """An event row (``EVENT_COLUMNS``)."""
    f = _Fields(row, EVENT_COLUMNS, "event")
    return StreamEvent(
        offset=f.integer("offset"),
        stream=f.text("stream"),
        key=f.opt_text("key"),
        payload=f.payload(),
        created_at=f.instant("created_at"),
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
