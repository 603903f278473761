"""Decoding rows read back from an engine into value types.

A row may have been written by another program or another version, so every
field is checked; a malformed row raises ``CodecError`` instead of a raw
``TypeError`` deep inside user code.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .dialect import (
    ATTEMPT_COLUMNS,
    CLAIM_COLUMNS,
    CONSUMER_COLUMNS,
    DEAD_COLUMNS,
    EVENT_COLUMNS,
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    JOB_INFO_COLUMNS,
    LOCK_COLUMNS,
    QUEUE_SUMMARY_COLUMNS,
    SCHEDULE_COLUMNS,
    STATE_PENDING,
    STATE_PROCESSING,
    STREAM_SUMMARY_COLUMNS,
    WAITING_COLUMNS,
)
from .plan import Row
from .values import codec
from .values.attempts import ATTEMPT_OUTCOMES, Attempt
from .values.errors import CodecError, DatabaseError, InvalidArgument, SchemaMismatch, brief
from .values.timeconv import to_datetime
from .values.types import (
    ConsumerInfo,
    DeadReason,
    JobInfo,
    JobRecord,
    JobState,
    LockInfo,
    QueueLimits,
    QueueSummary,
    Rate,
    ScheduleInfo,
    StreamEvent,
    StreamInfo,
)

if TYPE_CHECKING:
    from .values.schedules import CatchUp, ScheduleOptions

_DEAD_REASONS = frozenset({"failed", "max_attempts", "expired", "claim_expired"})
_OUTCOMES = frozenset({"acked", "cancelled"})


def _int(value: Any, what: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodecError(f"row field {what} is not an integer: {brief(value)}")
    # A subclass (an IntEnum, a driver's own type) is handed on as a plain
    # int: callers compare, hash and serialise it as one. ``int.__int__``
    # copies the value without calling a method the subclass may override.
    return int.__int__(value)


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


def _bool(value: Any, what: str) -> bool:
    # SQLite stores a flag as 0 or 1, Postgres as a boolean.
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise CodecError(f"row field {what} is not a flag: {brief(value)}")


def _opt_span(value: Any, what: str) -> timedelta | None:
    us = _opt_int(value, what)
    if us is None:
        return None
    try:
        return timedelta(microseconds=us)
    except OverflowError as exc:
        raise CodecError(f"row field {what} is out of a timedelta's range: {brief(us)}") from exc


def _shape(row: Row, n: int, what: str) -> None:
    if not isinstance(row, tuple | list) or len(row) != n:
        raise CodecError(f"{what} row has the wrong shape: {brief(row)}")


def job_record(row: Row) -> JobRecord:
    """A row returned by a claim (``CLAIM_COLUMNS``)."""
    # The common case, checked in one pass (``type(x) is int`` also refuses
    # bool); anything unusual takes the field-by-field path for its error.
    if type(row) is tuple and len(row) == len(CLAIM_COLUMNS):
        (id_, queue, text, priority, attempts, max_attempts, run_at, created_at, expires_at,
         claimed_by, visible_at, _state, _error, claims, headers,
         history_us, keep) = row  # fmt: skip
        if (
            type(id_) is int and type(queue) is str and type(text) is str
            and type(priority) is int and type(attempts) is int and type(max_attempts) is int
            and type(run_at) is int and type(created_at) is int
            and (expires_at is None or type(expires_at) is int)
            and type(claimed_by) is str and type(visible_at) is int and type(claims) is int
            and (headers is None or type(headers) is str)
            and (history_us is None or type(history_us) is int)
            and (keep is True or keep is False or (type(keep) is int and keep in (0, 1)))
        ):  # fmt: skip
            payload = codec.decode(text)
            return JobRecord(id_, queue, payload, priority, attempts, max_attempts, run_at,
                             created_at, expires_at, claimed_by, visible_at, claims,
                             headers, history_us, bool(keep))  # fmt: skip
    return _job_record_checked(row)


def claimed_at_once(row: Row) -> tuple[JobRecord, int | None]:
    """A row of ``Dialect.claim_at_once``: the claimed job, and when the
    queue's next live job falls due (None: the claim was full)."""
    if not isinstance(row, tuple | list) or len(row) != len(CLAIM_COLUMNS) + 1:
        raise CodecError(f"claim row has the wrong shape: {brief(row)}")
    return job_record(tuple(row[:-1])), _opt_int(row[-1], "next_due")


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

    def flag(self, name: str) -> bool:
        return _bool(self._get(name), name)

    def opt_flag(self, name: str, default: bool = False) -> bool:
        """A flag, NULL (a row a LEFT JOIN did not find, or a setting never
        made) read as ``default``."""
        value = self._get(name)
        return default if value is None else _bool(value, name)

    def opt_span(self, name: str) -> timedelta | None:
        return _opt_span(self._get(name), name)

    def payload(self) -> codec.JSON:
        return codec.decode(self.text("payload"))


_POSITIONS: dict[tuple[str, ...], dict[str, int]] = {
    columns: {name: i for i, name in enumerate(columns)}
    for columns in (
        JOB_COLUMNS, JOB_INFO_COLUMNS, CLAIM_COLUMNS, DEAD_COLUMNS, EVENT_COLUMNS, HISTORY_COLUMNS,
        SCHEDULE_COLUMNS, QUEUE_SUMMARY_COLUMNS, STREAM_SUMMARY_COLUMNS, CONSUMER_COLUMNS,
        LOCK_COLUMNS, WAITING_COLUMNS, ATTEMPT_COLUMNS,
    )
}  # fmt: skip


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
        headers=f.opt_text("headers"),
        history_us=f.opt_integer("history_us"),
        kept=f.flag("keep"),
    )


def _times(f: _Fields) -> dict[str, Any]:
    return {
        "run_at": f.instant("run_at"),
        "created_at": f.instant("created_at"),
        "expires_at": f.opt_instant("expires_at"),
    }


def job_info(row: Row) -> JobInfo:
    """A live job row (``JOB_INFO_COLUMNS``) for inspection."""
    f = _Fields(row, JOB_INFO_COLUMNS, "job")
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
        unique_key=f.opt_text("unique_key"),
        concurrency_key=f.opt_text("concurrency_key"),
    )


def dead_info(row: Row) -> JobInfo:
    """A dead-letter row (``DEAD_COLUMNS``). The dead table keeps the
    job's concurrency key, not its unique key (None)."""
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
        concurrency_key=f.opt_text("concurrency_key"),
    )


def attempt(row: Row) -> Attempt:
    """An attempt row (``ATTEMPT_COLUMNS``)."""
    f = _Fields(row, ATTEMPT_COLUMNS, "attempt")
    outcome = f.text("outcome")
    if outcome not in ATTEMPT_OUTCOMES:
        raise CodecError(f"row field outcome has an unknown value: {brief(outcome)}")
    return Attempt(
        attempt=f.integer("attempt"),
        outcome=outcome,
        worker=f.opt_text("worker"),
        started_at=f.opt_instant("started_at"),
        finished_at=f.instant("finished_at"),
        error=f.opt_text("error"),
        trace=f.opt_text("trace"),
    )


def history_info(row: Row) -> JobInfo:
    """A history row (``HISTORY_COLUMNS``): a finished job, with its unique
    and concurrency keys."""
    f = _Fields(row, HISTORY_COLUMNS, "history")
    outcome = f.text("outcome")
    if outcome not in _OUTCOMES:
        raise CodecError(f"row field outcome has an unknown value: {brief(outcome)}")
    state: JobState = outcome  # type: ignore[assignment]
    return JobInfo(
        **_identity(f),
        state=state,
        run_at=f.instant("run_at"),
        created_at=f.instant("created_at"),
        expires_at=None,
        claimed_by=f.opt_text("worker"),
        claim_expires_at=None,
        last_error=f.opt_text("last_error"),
        finished_at=f.instant("finished_at"),
        unique_key=f.opt_text("unique_key"),
        concurrency_key=f.opt_text("concurrency_key"),
        result=result_value(f.opt_text("result")),
    )


def result_value(text: str | None) -> codec.JSON:
    """A stored result (JSON text, None for none) decoded."""
    return None if text is None else codec.decode(text)


def waiting_info(row: Row) -> JobInfo:
    """A waiting job's row (``WAITING_COLUMNS``): not claimable until its
    dependencies finished; never attempted."""
    f = _Fields(row, WAITING_COLUMNS, "waiting job")
    return JobInfo(
        id=f.integer("id"),
        queue=f.text("queue"),
        payload=f.payload(),
        priority=f.integer("priority"),
        attempts=0,
        max_attempts=f.integer("max_attempts"),
        **_times(f),
        state="waiting",
        claimed_by=None,
        claim_expires_at=None,
        last_error=None,
        concurrency_key=f.opt_text("concurrency_key"),
    )


def queue_summary(name: str, outbox: str | None, row: Row) -> QueueSummary:
    """A queue's summary row (``QUEUE_SUMMARY_COLUMNS``)."""
    f = _Fields(row, QUEUE_SUMMARY_COLUMNS, "queue summary")
    return QueueSummary(
        name=name,
        ready=f.integer("ready"),
        scheduled=f.integer("scheduled"),
        processing=f.integer("processing"),
        dead=f.integer("dead"),
        oldest_ready_at=f.opt_instant("oldest_ready"),
        paused=f.opt_flag("paused"),
        history=f.integer("history"),
        history_retention=f.opt_span("history_us"),
        dead_retention=f.opt_span("dead_us"),
        outbox=outbox,
        limits=_limits(*(f.opt_integer(c) for c in _LIMIT_FIELDS)),
        # NULL (never set) or true: a processing job keeps its key.
        unique_processing_blocks=f.opt_flag("unique_processing", default=True),
        waiting=f.integer("waiting"),
    )


def stream_info(name: str, summary: Row, consumers: list[Row]) -> StreamInfo:
    """A stream's summary row (``STREAM_SUMMARY_COLUMNS``) and its consumers'
    rows (``CONSUMER_COLUMNS``). A consumer's lag is how far the head is
    past its saved offset, never below 0 (an offset may be saved past the
    head)."""
    f = _Fields(summary, STREAM_SUMMARY_COLUMNS, "stream summary")
    head = f.opt_integer("last_offset") or 0
    listed = []
    for row in consumers:
        c = _Fields(row, CONSUMER_COLUMNS, "consumer")
        offset = c.integer("offset")
        listed.append(
            ConsumerInfo(c.text("consumer"), offset, max(0, head - offset), c.flag("keep"))
        )
    return StreamInfo(
        name=name,
        head_offset=head,
        events=f.integer("events"),
        oldest_offset=f.opt_integer("oldest_offset"),
        oldest_event_at=f.opt_instant("oldest_created_at"),
        max_age=f.opt_span("max_age_us"),
        max_events=f.opt_integer("max_events"),
        consumers=tuple(listed),
    )


def lock_info(row: Row) -> LockInfo:
    """A lock row (``LOCK_COLUMNS``). A released lock keeps its row for the
    token count, with no owner: it has no expiry to show."""
    f = _Fields(row, LOCK_COLUMNS, "lock")
    owner = f.opt_text("owner")
    return LockInfo(
        name=f.text("name"),
        owner=owner,
        token=f.integer("token"),
        expires_at=None if owner is None else f.instant("expires_at"),
        held=f.flag("held"),
    )


def schedule_info(
    row: Row,
    options_of: Callable[[str], ScheduleOptions],
    catch_up_of: Callable[[object, object, object], CatchUp],
) -> ScheduleInfo:
    """A schedule row (``SCHEDULE_COLUMNS``); ``options_of`` decodes its
    stored job options (``schedule.ScheduleOptions.decode``), ``catch_up_of``
    its catch-up policy (``schedule.CatchUp.decode``)."""
    f = _Fields(row, SCHEDULE_COLUMNS, "schedule")
    options = options_of(f.text("options"))
    expires = options.expires_after_us
    policy = catch_up_of(
        f.text("catch_up"), f.opt_integer("catch_up_max"), f.opt_integer("catch_up_grace_us")
    )
    return ScheduleInfo(
        name=f.text("name"),
        queue=f.text("queue"),
        expression=f.text("expression"),
        payload=f.payload(),
        priority=options.priority,
        max_attempts=options.max_attempts,
        expires_after=_opt_span(expires, "expires_after_us"),
        next_fire_at=f.instant("next_fire_at"),
        last_fire_at=f.opt_instant("last_fire_at"),
        paused=f.flag("paused"),
        created_at=f.instant("created_at"),
        tz=f.text("tz"),
        catch_up=policy.policy,
        catch_up_max=policy.cap,
        catch_up_grace=_opt_span(policy.grace_us, "catch_up_grace_us"),
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
        raise SchemaMismatch(version, newest, where)
    return version


def require_schema(found: int, expected: int, where: str) -> int:
    """``found`` when it is ``expected``; ``SchemaMismatch`` otherwise. A
    read-only store reads the schema it finds and never migrates it."""
    if found != expected:
        raise SchemaMismatch(found, expected, where)
    return found


def queue_limits(row: Row | None) -> QueueLimits:
    """A queue's ``LIMIT_COLUMNS`` row (None: a queue never configured)."""
    if row is None:
        return QueueLimits()
    _shape(row, 5, "queue limits")
    return _limits(*(_opt_int(v, what) for v, what in zip(row, _LIMIT_FIELDS, strict=True)))


def _limits(
    concurrency: int | None,
    rate: int | None,
    rate_us: int | None,
    key_rate: int | None,
    key_rate_us: int | None,
) -> QueueLimits:
    return QueueLimits(concurrency, _rate(rate, rate_us), _rate(key_rate, key_rate_us))


_LIMIT_FIELDS = (
    "concurrency_limit", "rate_limit", "rate_period_us", "key_rate_limit", "key_rate_period_us",
)  # fmt: skip


def _rate(limit: int | None, period_us: int | None) -> Rate | None:
    if limit is None or period_us is None:
        return None
    try:
        return Rate(limit, timedelta(microseconds=period_us))
    except (InvalidArgument, OverflowError) as exc:  # a period past timedelta's range
        raise CodecError(f"row holds a rate out of range: {exc}") from None
