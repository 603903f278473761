"""Building arbitrary Python values from fuzz bytes, shared by the targets.

Every builder draws only from an ``atheris.FuzzedDataProvider``, so a crash
input replays the same value. The builders lean towards the edges the code
under test has to handle: boundaries of 32/64-bit integers, NaN and the
infinities, lone surrogates, the reserved name prefix, objects that are not
JSON at all.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import sys
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import atheris
import orjson

INT_EDGES = (
    0,
    1,
    -1,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    2**53,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    10**30,
    -(10**30),
    10**400,
    -(10**400),
    10**4400,  # past the interpreter's int-to-str limit (4300 digits)
    -(10**4400),
)
FLOAT_EDGES = (
    0.0,
    -0.0,
    0.5,
    1.0,
    -1.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    sys.float_info.max,
    -sys.float_info.max,
    sys.float_info.min,
    5e-324,
    1e-7,
    1e300,
    1e16,
    2.0**53,
    2.0**63,
    9.2e12,
    1.0 - 2.0**-53,
)
TEXT_EDGES = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "a\udfff",
    "__alkstore_",
    "__alkstore_x",
    "__ALKSTORE_x",
    "_alkstore_x",
    "é",
    "\U0001f600",
    '"',
    '""',
    "a" * 63,
    "a" * 64,
    "é" * 31 + "a",
    "é" * 32,
    "x" * 1024,
    "x" * 1025,
    "pg_catalog",
    "public",
    "Public",
    "null",
    "NaN",
)


class StrSub(str):
    pass


class IntSub(int):
    pass


class FloatSub(float):
    pass


class DictSub(dict):  # type: ignore[type-arg]
    pass


class ListSub(list):  # type: ignore[type-arg]
    pass


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Weird:
    """An object whose dunders misbehave."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")

    def __hash__(self) -> int:
        return 1

    def __bool__(self) -> bool:
        raise RuntimeError("no truth")


def fixed_offset(fdp: atheris.FuzzedDataProvider) -> timezone:
    minutes = fdp.ConsumeIntInRange(-(24 * 60) + 1, 24 * 60 - 1)
    return timezone(timedelta(minutes=minutes))


def any_int(fdp: atheris.FuzzedDataProvider) -> int:
    choice = fdp.ConsumeIntInRange(0, 4)
    if choice == 0:
        return int(fdp.PickValueInList(list(INT_EDGES)))
    if choice == 1:
        return fdp.ConsumeIntInRange(-1000, 1000)
    if choice == 2:
        return fdp.ConsumeInt(8)
    if choice == 3:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 64))
    return int(fdp.PickValueInList(list(INT_EDGES))) + fdp.ConsumeIntInRange(-2, 2)


def any_float(fdp: atheris.FuzzedDataProvider) -> float:
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice == 0:
        return float(fdp.PickValueInList(list(FLOAT_EDGES)))
    if choice == 1:
        return fdp.ConsumeFloat()
    if choice == 2:
        return fdp.ConsumeRegularFloat()
    return fdp.ConsumeFloatInRange(-1e6, 1e6)


def any_text(fdp: atheris.FuzzedDataProvider, max_len: int = 40) -> str:
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice == 0:
        return str(fdp.PickValueInList(list(TEXT_EDGES)))
    if choice == 1:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, max_len))
    if choice == 2:
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, max_len))
    if choice == 3:
        # Long strings around the length limits, cheaply.
        unit = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(1, 3)) or "a"
        return (unit * 1100)[: fdp.ConsumeIntInRange(0, 1100)]
    if choice == 4:
        return str(fdp.PickValueInList(list(TEXT_EDGES))) + fdp.ConsumeUnicode(
            fdp.ConsumeIntInRange(0, max_len)
        )
    return fdp.ConsumeString(fdp.ConsumeIntInRange(0, max_len))


def any_datetime(fdp: atheris.FuzzedDataProvider) -> datetime:
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice == 0:
        base = fdp.PickValueInList([datetime.min, datetime.max, datetime(1970, 1, 1)])
        value = base
    elif choice == 1:
        # Within about 1900 years of 2000.
        value = datetime(2000, 1, 1) + timedelta(
            microseconds=fdp.ConsumeIntInRange(-(6 * 10**16), 6 * 10**16)
        )
    else:
        lo = datetime.min - datetime(1970, 1, 1)
        hi = datetime.max - datetime(1970, 1, 1)
        us = fdp.ConsumeIntInRange(lo // timedelta(microseconds=1), hi // timedelta(microseconds=1))
        value = datetime(1970, 1, 1) + timedelta(microseconds=us)
    tz = fdp.ConsumeIntInRange(0, 2)
    if tz == 0:
        return value  # naive
    if tz == 1:
        return value.replace(tzinfo=UTC)
    return value.replace(tzinfo=fixed_offset(fdp))


def any_timedelta(fdp: atheris.FuzzedDataProvider) -> timedelta:
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice == 3:
        # Up to a little past the longest duration alkstore accepts.
        return timedelta(microseconds=fdp.ConsumeIntInRange(0, 4 * 10**17))
    if choice == 0:
        edges = [timedelta.max, timedelta.min, timedelta.resolution, -timedelta.resolution]
        return fdp.PickValueInList([*edges, timedelta(0), timedelta(days=1)])
    if choice == 1:
        return timedelta(microseconds=fdp.ConsumeIntInRange(-(10**13), 10**13))
    return timedelta(
        days=fdp.ConsumeIntInRange(-999_999_999, 999_999_999),
        microseconds=fdp.ConsumeIntInRange(0, 86_400 * 10**6 - 1),
    )


def any_scalar(fdp: atheris.FuzzedDataProvider) -> Any:
    """A scalar that may or may not be JSON."""
    choice = fdp.ConsumeIntInRange(0, 22)
    if choice <= 2:
        return any_int(fdp)
    if choice <= 5:
        return any_float(fdp)
    if choice <= 8:
        return any_text(fdp)
    if choice == 9:
        return fdp.ConsumeBool()
    if choice == 10:
        return None
    if choice == 11:
        return fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 8))
    if choice == 12:
        return any_datetime(fdp)
    if choice == 13:
        return any_timedelta(fdp)
    if choice == 14:
        return decimal.Decimal(fdp.PickValueInList(["1.5", "NaN", "1e999", "-0"]))
    if choice == 15:
        return StrSub(any_text(fdp))
    if choice == 16:
        return IntSub(any_int(fdp))
    if choice == 17:
        return FloatSub(any_float(fdp))
    if choice == 18:
        return fdp.PickValueInList(
            [
                Color.RED,
                Level.LOW,
                Point(1, 2),
                object(),
                Weird(),
                uuid.UUID(int=7),
                orjson.Fragment(b"[1,"),
                orjson.Fragment(b"2"),
            ]
        )
    if choice == 19:
        return date(2000, 1, 1)
    if choice == 20:
        return complex(1, 2)
    if choice == 21:
        return fdp.PickValueInList([int, str, Ellipsis, NotImplemented])
    return any_float(fdp) if fdp.ConsumeBool() else any_int(fdp)


def any_value(fdp: atheris.FuzzedDataProvider, depth: int = 4) -> Any:
    """A nested structure: mostly JSON, sometimes not."""
    if depth <= 0 or fdp.remaining_bytes() < 2:
        return any_scalar(fdp)
    choice = fdp.ConsumeIntInRange(0, 12)
    if choice <= 4:
        return any_scalar(fdp)
    if choice <= 6:
        return [any_value(fdp, depth - 1) for _ in range(fdp.ConsumeIntInRange(0, 4))]
    if choice <= 8:
        out: dict[Any, Any] = {}
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            out[any_text(fdp, 10)] = any_value(fdp, depth - 1)
        return out
    if choice == 9:
        # Keys that are not text.
        key = fdp.PickValueInList([1, 1.5, None, True, b"k", ("t",), StrSub("k")])
        return {key: any_value(fdp, depth - 1)}
    if choice == 10:
        return tuple(any_value(fdp, depth - 1) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    if choice == 11:
        kind = fdp.ConsumeIntInRange(0, 2)
        inner = [any_value(fdp, depth - 1) for _ in range(fdp.ConsumeIntInRange(0, 2))]
        if kind == 0:
            return ListSub(inner)
        if kind == 1:
            return DictSub(enumerate(inner))
        return {frozenset([1])}
    # Deep nesting, past the encoder's and the interpreter's recursion limits.
    levels = fdp.ConsumeIntInRange(1, 1200)
    value = any_scalar(fdp)
    as_list = fdp.ConsumeBool()
    for _ in range(levels):
        value = [value] if as_list else {"k": value}
    return value
