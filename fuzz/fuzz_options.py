"""Fuzz target: enqueue options, queue options and retry backoff.

Property: ``resolve_enqueue`` with arbitrary delay/run_at/priority/
max_attempts/expires raises only ``InvalidArgument`` or ``CodecError``, and
a ``NewJob`` it returns holds plain ints in range (instants that read back as
datetimes, a 32-bit priority, a 64-bit ``max_attempts`` >= 1).
``QueueOptions.of`` and ``Backoff.of`` raise only ``InvalidArgument``;
``Backoff.delay_us`` is always an int within ``[0, cap]``.

Run: ``python fuzz/fuzz_options.py -atheris_runs=100000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import atheris
import fuzzvalues as fv

with atheris.instrument_imports():
    from alkstore.protocol.values.backoff import Backoff
    from alkstore.protocol.values.errors import CodecError, InvalidArgument
    from alkstore.protocol.values.timeconv import to_datetime
    from alkstore.protocol.values.types import NewJob, QueueOptions, resolve_enqueue

INT64 = (-(2**63), 2**63)
INT32 = (-(2**31), 2**31)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_DURATION_US = 315_537_897_599_999_999  # years 1 to 9999
MIN_US = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
MAX_US = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
NOW_MAX = (datetime(2200, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)


def _plain_int(value: Any) -> bool:
    # Subclasses of int (an IntEnum, say) pass as what they are: ints.
    return isinstance(value, int) and not isinstance(value, bool)


def _within(value: int, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= int(value) < bounds[1]


def _instant_ok(us: Any) -> bool:
    if not _plain_int(us) or not _within(us, INT64):
        return False
    try:
        to_datetime(us)
    except OverflowError:
        return False
    return True


def _option(fdp: atheris.FuzzedDataProvider) -> Any:
    """An option value: mostly of a plausible type, sometimes of a wrong one."""
    choice = fdp.ConsumeIntInRange(0, 7)
    if choice == 0:
        return None
    if choice == 1:
        return fv.any_int(fdp)
    if choice == 2:
        return fv.any_float(fdp)
    if choice == 3:
        return fv.any_timedelta(fdp)
    if choice == 4:
        return fv.any_datetime(fdp)
    if choice == 5:
        return fdp.ConsumeBool()
    return fv.any_scalar(fdp)


def _check_job(job: NewJob, now_us: int, delay: Any, run_at: Any) -> None:
    assert type(job) is NewJob
    assert isinstance(job.payload_json, str)
    assert _plain_int(job.priority) and _within(job.priority, INT32), job
    assert _plain_int(job.max_attempts) and job.max_attempts >= 1
    assert _within(job.max_attempts, INT64)
    assert _instant_ok(job.run_at_us), job
    assert job.expires_at_us is None or _instant_ok(job.expires_at_us), job
    if delay is None and run_at is None:
        assert job.run_at_us == now_us
    if delay is not None:
        assert job.run_at_us >= now_us


def _check_enqueue(fdp: atheris.FuzzedDataProvider) -> None:
    if fdp.ConsumeIntInRange(0, 9) == 0:
        # The clock can read anything a datetime can hold.
        now_us = fdp.ConsumeIntInRange(MIN_US, MAX_US)
    else:
        now_us = fdp.ConsumeIntInRange(0, NOW_MAX)
    defaults = QueueOptions()
    kwargs: dict[str, Any] = {}
    for key in ("delay", "run_at", "priority", "max_attempts", "expires"):
        if fdp.ConsumeBool():
            kwargs[key] = (
                _option(fdp) if key != "priority" or fdp.ConsumeBool() else fv.any_int(fdp)
            )
    payload = fv.any_value(fdp, 2)
    try:
        job = resolve_enqueue("q", payload, now_us, defaults, **kwargs)
    except (InvalidArgument, CodecError):
        return
    _check_job(job, now_us, kwargs.get("delay"), kwargs.get("run_at"))


def _valid_backoff_args(fdp: atheris.FuzzedDataProvider) -> dict[str, Any]:
    """Arguments ``Backoff.of`` accepts, spread over their whole range."""
    return {
        "base": timedelta(microseconds=fdp.ConsumeIntInRange(0, 10**12)),
        "cap": timedelta(microseconds=fdp.ConsumeIntInRange(0, MAX_DURATION_US)),
        "factor": fdp.PickValueInList([1.0, 2.0, 10.0, 1e300, float("inf")])
        if fdp.ConsumeBool()
        else fdp.ConsumeFloatInRange(1.0, 1e6),
        "jitter": fdp.PickValueInList([0.0, 0.5, 1.0])
        if fdp.ConsumeBool()
        else fdp.ConsumeProbability(),
    }


def _check_backoff(fdp: atheris.FuzzedDataProvider) -> Backoff | None:
    kwargs: dict[str, Any] = {}
    if fdp.ConsumeBool():
        kwargs = _valid_backoff_args(fdp)
    for key in ("base", "cap", "factor", "jitter"):
        if fdp.ConsumeBool():
            kwargs[key] = _option(fdp) if fdp.ConsumeIntInRange(0, 3) == 0 else fv.any_float(fdp)
    try:
        backoff = Backoff.of(**kwargs)
    except InvalidArgument:
        return None
    assert _plain_int(backoff.base_us) and backoff.base_us >= 0
    assert _plain_int(backoff.cap_us) and backoff.cap_us >= 0
    assert 0.0 <= backoff.jitter <= 1.0
    assert backoff.factor >= 1.0
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        attempt = fv.any_int(fdp) if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, 100)
        choice = fdp.ConsumeIntInRange(0, 7)
        if choice == 0:
            draw = fv.any_float(fdp)
        elif choice == 1:
            draw = 1.0 - 2.0**-53  # the largest draw below 1
        else:
            draw = fdp.ConsumeProbability()
        try:
            delay = backoff.delay_us(attempt, draw)
        except InvalidArgument:
            assert not 0.0 <= draw < 1.0, f"delay_us refused draw {draw!r}"
            continue
        assert _plain_int(delay), delay
        assert 0 <= delay <= backoff.cap_us, f"{backoff} attempt={attempt} draw={draw}: {delay}"
    return backoff


def _check_queue_options(fdp: atheris.FuzzedDataProvider) -> None:
    kwargs: dict[str, Any] = {}
    if fdp.ConsumeBool():
        kwargs["visibility_timeout"] = _option(fdp)
    if fdp.ConsumeBool():
        kwargs["max_attempts"] = _option(fdp) if fdp.ConsumeBool() else fv.any_int(fdp)
    if fdp.ConsumeBool():
        kwargs["backoff"] = _check_backoff(fdp) if fdp.ConsumeBool() else fv.any_scalar(fdp)
    try:
        options = QueueOptions.of(**kwargs)
    except InvalidArgument:
        return
    assert _plain_int(options.visibility_timeout_us) and options.visibility_timeout_us > 0
    assert _within(options.visibility_timeout_us, INT64)
    assert _plain_int(options.max_attempts) and options.max_attempts >= 1
    assert _within(options.max_attempts, INT64)
    assert isinstance(options.backoff, Backoff), options


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 2)
    if mode == 0:
        _check_enqueue(fdp)
    elif mode == 1:
        _check_backoff(fdp)
    else:
        _check_queue_options(fdp)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
