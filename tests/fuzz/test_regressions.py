"""Every crash the fuzz targets in ``fuzz/`` found, as a direct call.

Each test calls the pure function with the input that crashed it (reduced by
hand where the fuzzer's input was larger than needed) and checks the
documented outcome: a value, or an error from the taxonomy.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone

import orjson
import pytest

from alkstore.engines.postgres import names as pg
from alkstore.engines.sqlite import SqliteDialect
from alkstore.protocol import rows
from alkstore.protocol.plans import claim, schedule
from alkstore.protocol.values import codec, names, schedules, types
from alkstore.protocol.values.backoff import Backoff
from alkstore.protocol.values.errors import CodecError, InvalidArgument, InvalidName
from alkstore.protocol.values.timeconv import MAX_DURATION_US, MAX_INSTANT_US, duration_us
from alkstore.protocol.values.types import QueueOptions, check_max_attempts, resolve_enqueue

HUGE_INT = 10**4400  # past the interpreter's int-to-str limit of 4300 digits
NOW = 1_700_000_000_000_000


def _event(created_at: object) -> tuple[object, ...]:
    return (1, "s", None, "{}", created_at)


def _job(**overrides: object) -> tuple[object, ...]:
    fields: dict[str, object] = {
        "id": 1,
        "queue": "q",
        "payload": "{}",
        "priority": 0,
        "attempts": 0,
        "max_attempts": 3,
        "run_at": 0,
        "created_at": 0,
        "expires_at": None,
        "claimed_by": "w",
        "visible_at": 0,
        "state": 1,
        "last_error": None,
        "claims": 1,
        "headers": None,
        "unique_key": None,
        "concurrency_key": None,
    }
    fields.update(overrides)
    return tuple(fields.values())


def _dead(**overrides: object) -> tuple[object, ...]:
    fields: dict[str, object] = {
        "id": 1,
        "queue": "q",
        "payload": "{}",
        "priority": 0,
        "attempts": 3,
        "max_attempts": 3,
        "run_at": 0,
        "created_at": 0,
        "expires_at": None,
        "claimed_by": "w",
        "last_error": None,
        "reason": "failed",
        "died_at": 0,
        "concurrency_key": None,
    }
    fields.update(overrides)
    return tuple(fields.values())


# -- fuzz_rows ---------------------------------------------------------------


def test_the_rows_these_tests_spoil_decode_unspoiled() -> None:
    # So each CodecError below is the spoiled field's, not a wrong shape's.
    assert rows.job_info(_job()).id == 1
    assert rows.dead_info(_dead()).id == 1


@pytest.mark.parametrize("us", [2**63 - 1, -(2**63), 253_402_300_800_000_000])
def test_row_timestamp_past_datetime_range_is_codec_error(us: int) -> None:
    # Was OverflowError from to_datetime.
    with pytest.raises(CodecError):
        rows.stream_event(_event(us))
    with pytest.raises(CodecError):
        rows.job_info(_job(run_at=us))
    with pytest.raises(CodecError):
        rows.job_info(_job(expires_at=us))
    with pytest.raises(CodecError):
        rows.job_info(_job(visible_at=us))
    with pytest.raises(CodecError):
        rows.dead_info(_dead(died_at=us))


def test_row_timestamp_at_the_edges_of_datetime_range_decodes() -> None:
    assert rows.stream_event(_event(253_402_300_799_999_999)).created_at.year == 9999
    assert rows.stream_event(_event(-62_135_596_800_000_000)).created_at.year == 1


def test_deeply_nested_row_is_codec_error() -> None:
    # Was RecursionError from the repr in the error message.
    row: object = 1
    for _ in range(5000):
        row = [row]
    with pytest.raises(CodecError):
        rows.stream_event(row)  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        rows.stream_event((row, "s", None, "{}", 0))


def test_row_with_huge_int_is_codec_error() -> None:
    # Was ValueError: the error message's repr of an int past 4300 digits.
    with pytest.raises(CodecError):
        rows.job_record((HUGE_INT,))
    with pytest.raises(CodecError):
        rows.stream_event(_event(HUGE_INT))
    with pytest.raises(CodecError):
        rows.job_info(_job(state=HUGE_INT))


@pytest.mark.parametrize(
    "row",
    [("x", 0, 0, None, 3, 3), (1, 0, 0, None, 3), (1, 0, 0, 1.5, 3, 3), (1, True, 0, None, 3, 3)],
)
def test_sweep_row_is_decoded_strictly(row: tuple[object, ...]) -> None:
    # Was ValueError/TypeError from int(v), or a silent int(1.5) == 1.
    with pytest.raises(CodecError):
        claim.sweep_candidate(row)
    plan = claim.sweep(SqliteDialect(), "q", NOW)
    plan.send(None)
    with pytest.raises(CodecError):
        plan.send([row])


def test_sweep_row_decodes() -> None:
    candidate = claim.sweep_candidate((7, 1, 5, None, 3, 3, 0))
    assert candidate == claim.SweepCandidate(7, 1, 5, None, 3, 3)
    with pytest.raises(CodecError):  # a row from before dependencies (no "kept")
        claim.sweep_candidate((7, 1, 5, None, 3, 3))
    assert claim.sweep_decision(candidate, 10) == "claim_expired"


class _Untruthy:
    def __bool__(self) -> bool:
        raise RuntimeError("no truth")


@pytest.mark.parametrize("flag", [2, -1, "1", None, 1.0, _Untruthy()])
def test_sweep_row_keep_flag_is_a_flag(flag: object) -> None:
    """The keep column was read with ``bool()``, so any value passed and one
    whose ``__bool__`` raises escaped as that error (fuzz_rows)."""
    with pytest.raises(CodecError):
        claim.sweep_candidate((7, 1, 5, None, 3, 3, flag))
    assert claim.sweep_candidate((7, 1, 5, None, 3, 3, True)).kept
    assert claim.sweep_candidate((7, 1, 5, None, 3, 3, 1)).kept


def test_claim_row_of_a_live_job_row_shape_is_codec_error() -> None:
    """A claim row one column short (a live job row without the queue's
    history retention) took the fast path and failed to unpack (ValueError)."""
    row = (1, "q", '"x"', 0, 1, 3, 5, 4, None, "w", 9, 1, None, 1, None, 60_000_000)
    with pytest.raises(CodecError):
        rows.job_record(row)
    record = rows.job_record((*row, 0))
    assert record.history_us == 60_000_000 and record.headers is None and not record.kept



class _Uncomparable:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")

    __hash__ = object.__hash__


def test_claim_row_whose_keep_flag_refuses_comparison_is_codec_error() -> None:
    """The fast path compared the keep flag with ``==`` before checking its
    type, so a value whose ``__eq__`` raises escaped as that error (fuzz_rows)."""
    row = (1, "q", '"x"', 0, 1, 3, 5, 4, None, "w", 9, 1, None, 1, None, None)
    with pytest.raises(CodecError):
        rows.job_record((*row, _Uncomparable()))
    with pytest.raises(CodecError):
        rows.job_record((*row, 1.0))
    assert rows.job_record((*row, 1)).kept and not rows.job_record((*row, False)).kept


class _IntSub(int):
    pass


def test_an_int_subclass_in_a_row_is_decoded_as_a_plain_int() -> None:
    """A claim-at-once row whose next-due column was an int subclass handed
    the subclass on (fuzz_rows); every decoded integer is a plain int."""
    row = (1, "q", '"x"', 0, 1, 3, 5, 4, None, "w", 9, 1, None, 1, None, None, 0)
    record, due = rows.claimed_at_once((*row, _IntSub(7)))
    assert type(due) is int and due == 7
    record = rows.job_record((_IntSub(1), *row[1:]))
    assert type(record.id) is int and record.id == 1

# -- fuzz_options ------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"factor": None},
        {"jitter": None},
        {"factor": "2"},
        {"jitter": "0.5"},
        {"factor": float("nan")},
        {"factor": True},
    ],
)
def test_backoff_of_wrong_types_is_invalid_argument(kwargs: dict[str, object]) -> None:
    # Was TypeError from the comparison (or NaN accepted as a factor).
    with pytest.raises(InvalidArgument):
        Backoff.of(**kwargs)  # type: ignore[arg-type]


def test_backoff_huge_factor_delay_is_the_cap() -> None:
    # Was OverflowError from float ** int.
    backoff = Backoff.of(factor=1e300, jitter=0.0)
    assert backoff.delay_us(3, 0.5) == backoff.cap_us


def test_backoff_delay_never_exceeds_a_cap_past_2_53() -> None:
    # float(cap_us) rounded up past cap_us: 72598119681452560 > ...554.
    backoff = Backoff.of(
        base=timedelta(microseconds=96827273470),
        cap=timedelta(microseconds=72598119681452554),
        factor=797062.3922596889,
        jitter=0.0,
    )
    assert backoff.delay_us(53, 0.0) == backoff.cap_us


@pytest.mark.parametrize("value", [10**30, 1e308, sys.float_info.max, -1e308])
def test_huge_durations_are_invalid_argument(value: float) -> None:
    # Were accepted (past 64 bits) or OverflowError from round(inf).
    with pytest.raises(InvalidArgument):
        duration_us(value)
    with pytest.raises(InvalidArgument):
        QueueOptions.of(visibility_timeout=value)
    with pytest.raises(InvalidArgument):
        resolve_enqueue("q", None, NOW, QueueOptions(), delay=value)


def test_longest_duration_is_accepted() -> None:
    assert duration_us(timedelta(microseconds=MAX_DURATION_US)) == MAX_DURATION_US
    with pytest.raises(InvalidArgument):
        duration_us(timedelta(microseconds=MAX_DURATION_US + 1))
    with pytest.raises(InvalidArgument):
        duration_us(timedelta.max)


@pytest.mark.parametrize("value", [2**63, 10**30, HUGE_INT], ids=["2**63", "10**30", "huge"])
def test_max_attempts_past_64_bits_is_invalid_argument(value: int) -> None:
    # Were accepted (bigint overflow at the database), or ValueError from the
    # message's repr for HUGE_INT.
    with pytest.raises(InvalidArgument):
        check_max_attempts(value)
    with pytest.raises(InvalidArgument):
        QueueOptions.of(max_attempts=value)
    with pytest.raises(InvalidArgument):
        resolve_enqueue("q", None, NOW, QueueOptions(), max_attempts=value)
    assert check_max_attempts(2**63 - 1) == 2**63 - 1


def test_huge_int_options_are_invalid_argument() -> None:
    for call in (
        lambda: QueueOptions.of(visibility_timeout=-HUGE_INT),
        lambda: resolve_enqueue("q", None, NOW, QueueOptions(), delay=-HUGE_INT),
        lambda: resolve_enqueue("q", None, NOW, QueueOptions(), priority=HUGE_INT),
    ):
        with pytest.raises(InvalidArgument):
            call()


@pytest.mark.parametrize("backoff", ["fast", 1, Backoff])
def test_queue_options_backoff_must_be_a_backoff(backoff: object) -> None:
    # Was accepted and stored as the queue's backoff.
    with pytest.raises(InvalidArgument):
        QueueOptions.of(backoff=backoff)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": timedelta.max},
        {"delay": timedelta(days=3_000_000)},
        {"run_at": datetime.min.replace(tzinfo=timezone(timedelta(hours=1)))},
        {"run_at": datetime.max.replace(tzinfo=timezone(timedelta(hours=-1)))},
        {"expires": datetime.min.replace(tzinfo=timezone(timedelta(hours=1)))},
        {"expires": timedelta(days=3_000_000)},
    ],
)
def test_enqueue_instants_outside_datetime_range_are_invalid_argument(
    kwargs: dict[str, object],
) -> None:
    # Were accepted: run_at/expires that do not fit 64 bits, or that never
    # read back as a datetime.
    with pytest.raises(InvalidArgument):
        resolve_enqueue("q", None, NOW, QueueOptions(), **kwargs)  # type: ignore[arg-type]


def test_enqueue_at_the_edges_of_datetime_range() -> None:
    job = resolve_enqueue("q", None, NOW, QueueOptions(), run_at=datetime.max.replace(tzinfo=UTC))
    assert job.run_at_us == 253_402_300_799_999_999


# -- fuzz_names --------------------------------------------------------------


def test_huge_int_name_is_invalid_name() -> None:
    # Was ValueError from the message's repr.
    with pytest.raises(InvalidName):
        names.check_name(HUGE_INT)
    with pytest.raises(InvalidName):
        names.check_identifier(HUGE_INT)
    with pytest.raises(InvalidArgument):
        pg.check_schema(HUGE_INT)


# -- fuzz_codec --------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    "payload",
    [
        Color.RED,
        Level.LOW,
        {"c": Color.RED},
        [uuid.UUID(int=7)],
        orjson.Fragment(b"[1,"),
        {"raw": orjson.Fragment(b"2")},
    ],
)
def test_encode_refuses_what_orjson_serializes_natively(payload: object) -> None:
    # Were encoded: an enum as its value, a UUID as a string, a Fragment as
    # raw text (here invalid JSON), none reading back as what was written.
    with pytest.raises(CodecError):
        codec.encode(payload)


def test_encode_still_takes_plain_json() -> None:
    payload = {"a": [1, 2.5, "x", None, True, {"b": []}], "t": [1, 2]}
    assert codec.decode(codec.encode(payload)) == payload


@pytest.mark.parametrize("payload", [(1, 2), {"t": (1, 2)}, [[(1,)]], ()])
def test_encode_refuses_tuples(payload: object) -> None:
    # Was accepted and read back as a list: not the exact round trip promised.
    with pytest.raises(CodecError, match="tuple"):
        codec.encode(payload)


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Reading:
    value: float


def test_convert_deeply_nested_recursive_type_is_codec_error() -> None:
    # Was RecursionError.
    payload: dict[str, object] = {"value": 0}
    for _ in range(800):
        payload = {"value": 1, "children": [payload]}
    with pytest.raises(CodecError):
        codec.convert(payload, Node)


def test_convert_int_too_large_for_a_float_is_codec_error() -> None:
    # Was OverflowError from float(int).
    with pytest.raises(CodecError):
        codec.convert({"value": 10**400}, Reading)
    with pytest.raises(CodecError):
        codec.convert(10**400, float)
    assert codec.convert(10**400, float | int) == 10**400  # type: ignore[arg-type]


# -- fuzz_schedule -----------------------------------------------------------


@pytest.mark.parametrize("text", ["R * * * *", "R(0-29) * * * * *", "0 r/5 * * *", "R/5 * * * *"])
def test_random_cron_fields_are_invalid_argument(text: str) -> None:
    # Were accepted: next_after drew a new random time on every call.
    with pytest.raises(InvalidArgument):
        schedules.parse(text)


@pytest.mark.parametrize(
    "text",
    ["@every " + "9" * 400 + "s", "@every 99999999999999999s", "@every 4000000d"],
    ids=["400 digits", "1e17 s", "4e6 d"],
)
def test_huge_every_interval_is_invalid_argument(text: str) -> None:
    # Was OverflowError (float infinity), or accepted past 64 bits.
    with pytest.raises(InvalidArgument):
        schedules.parse(text)


@pytest.mark.parametrize("text", ["* 23 15W * 0", "0 0 30 2 *", "0 0 31 4 *", "0 0 0 31 2 *"])
def test_cron_that_never_fires_is_invalid_argument(text: str) -> None:
    # Were accepted; next_after then raised croniter's CroniterBadDateError.
    with pytest.raises(InvalidArgument):
        schedules.parse(text)


def test_rare_cron_still_parses_and_fires() -> None:
    leap = schedules.parse("0 0 29 2 *")
    assert leap.next_after(NOW) > NOW
    assert schedules.parse("@every 1h30m").every_us == 5_400_000_000


def test_huge_int_schedule_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument):
        schedules.parse(HUGE_INT)


@pytest.mark.parametrize(
    "text",
    [
        '{"priority": "x"}',
        "[1]",
        '{"priority": 1, "max_attempts": 1.5}',
        '{"expires_after_us": true}',
    ],
)
def test_corrupt_stored_schedule_options_are_codec_errors(text: str) -> None:
    from alkstore.protocol.values.errors import CodecError
    from alkstore.protocol.values.schedules import ScheduleOptions

    with pytest.raises(CodecError):
        ScheduleOptions.decode(text)


# -- fuzz_api ----------------------------------------------------------------
# Found by fuzz_api.py once its table covered every public method; each is
# also a contract test on every backend in tests/contract/test_bad_input.py.


@pytest.mark.parametrize(
    "value", [10**30, -(10**30), 10**400, HUGE_INT], ids=["1e30", "-1e30", "1e400", "huge"]
)
def test_seconds_setting_past_a_float_is_invalid_argument(value: int) -> None:
    # check_seconds (recv_timeout, hold_lock's poll and timeout, subscribe's
    # backstop, run_scheduler's max_sleep) raised OverflowError from float().
    from alkstore.protocol.values.timeconv import check_seconds

    with pytest.raises(InvalidArgument):
        check_seconds(value, "timeout", allow_zero=True)


@pytest.mark.parametrize(
    ("error", "stored"),
    [
        ("x\udcff", "x?"),  # was UnicodeEncodeError from sqlite3 (Postgres replaced it)
        ("a\x00b", "a\ufffdb"),  # was kept on SQLite, replaced on Postgres
        ("\ud800\x00", "?\ufffd"),
        ("plain é \U0001f600", "plain é \U0001f600"),
        (None, None),
    ],
)
def test_error_text_is_stored_alike_on_every_engine(error: str | None, stored: str | None) -> None:
    assert claim.storable_error(error) == stored
    d = SqliteDialect()
    retry = claim.retry(d, _record(), NOW, delay_us=None, backoff=Backoff(), draw=0.0, error=error)
    for plan in (claim.fail(d, _record(), NOW, error), retry):
        next(plan)  # the ownership check
        statement = plan.send((3, 3, 0))  # out of attempts: buried
        assert stored in statement.params


def _record(claim_expires_at_us: int = NOW + 1) -> types.JobRecord:
    return types.JobRecord(1, "q", None, 0, 1, 3, NOW, NOW, None, "w", claim_expires_at_us, 1)


FAR = MAX_INSTANT_US - NOW + 1  # ends one microsecond past the year 9999


def test_explicit_durations_ending_past_9999_are_invalid_argument() -> None:
    # Were stored: the job's or lock's instant then raised OverflowError on
    # the handle and CodecError on every later get_job/dead_letters.
    from alkstore.protocol.plans import locks

    d = SqliteDialect()
    lock = types.LockRecord("L", "me", 1, NOW + 1)
    for plan in (
        claim.heartbeat(d, _record(), NOW, FAR),
        claim.retry(d, _record(), NOW, delay_us=FAR, backoff=Backoff(), draw=0.0, error=None),
        locks.try_lock(d, "L", "me", NOW, FAR),
        locks.renew(d, lock, NOW, FAR),
    ):
        with pytest.raises(InvalidArgument, match="9999"):
            next(plan)  # before any statement
    assert next(claim.heartbeat(d, _record(), NOW, FAR - 1)) is not None


def test_derived_deadlines_past_9999_are_capped() -> None:
    # A queue's visibility timeout (at claim), the backoff and a schedule's
    # expires_after end at the year 9999 instead of past it.
    d = SqliteDialect()
    statement = next(claim.claim(d, "q", "w", 1, NOW, MAX_DURATION_US))
    assert MAX_INSTANT_US in statement.params
    longest = timedelta(microseconds=MAX_DURATION_US)
    far = Backoff.of(base=longest, cap=longest, jitter=0)
    plan = claim.retry(d, _record(), NOW, delay_us=None, backoff=far, draw=0.0, error=None)
    next(plan)
    plan.send((1, 3, 0))  # the attempt recorded, its rows trimmed
    plan.send(None)
    assert MAX_INSTANT_US in plan.send(None).params  # rescheduled, capped
    options = schedules.ScheduleOptions.of(expires_after=timedelta(microseconds=MAX_DURATION_US))
    plan = schedule.tick(d, NOW, "origin", 3)
    next(plan)  # due schedules
    plan.send([("s", "q", "@every 1h", "UTC", "null", options.encode(), NOW, "latest", None, None)])
    enqueue = plan.send(1)
    assert MAX_INSTANT_US in enqueue.params


def test_a_stored_rate_period_past_timedelta_is_codec_error() -> None:
    """A queue summary whose rate period overflows ``timedelta`` raised
    OverflowError (found by fuzz_rows once its row had the summary's shape)."""
    with pytest.raises(CodecError):
        rows.queue_limits((None, 1, 10**30, None, None))
