"""Fuzz target: schedule expressions (cron, ``@every``, aliases).

Property: ``schedules.parse`` of any object returns an ``Expression`` or
raises ``InvalidArgument``; for a parsed expression, ``next_after(t)`` is an
int strictly after ``t`` for any ``t`` between 1970 and 2200, the same every
time it is asked (every process must compute the same fire times), and
monotone: ``next_after(next_after(t)) > next_after(t)``.

Run: ``python fuzz/fuzz_schedule.py -atheris_runs=20000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import atheris
import fuzzvalues as fv

with atheris.instrument_imports():
    from alkstore.protocol.values import schedules
    from alkstore.protocol.values.errors import InvalidArgument

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T_MAX = (datetime(2200, 1, 1, tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)

ATOMS = [
    "*",
    "?",
    "L",
    "l",
    "W",
    "LW",
    "H",
    "R",
    "r",
    "H(0-29)",
    "R(0-29)",
    "H/15",
    "R/5",
    "R(5-30)/7",
    "jan",
    "DEC",
    "mon",
    "Sun",
    "sat",
    "0",
    "1",
    "7",
    "12",
    "15",
    "23",
    "29",
    "30",
    "31",
    "59",
    "60",
    "99",
    "2024",
    "-1",
    "4294967296",
    "9" * 30,
    "#",
    "5#3",
    "1#5",
    "6#1",
    "7L",
    "5L",
    "15W",
    "L-3",
]
ALIASES = [
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    "@midnight",
    "@reboot",
    "@HOURLY",
    "@every",
    "@",
]
UNITS = ["ms", "s", "m", "h", "d", "", "us", "w", "S", "M"]
SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u2003", "\x1c", "\x0b"]


def _number(fdp: atheris.FuzzedDataProvider) -> str:
    choice = fdp.ConsumeIntInRange(0, 4)
    if choice == 0:
        return str(fdp.ConsumeIntInRange(0, 100))
    if choice == 1:
        return str(fdp.ConsumeIntInRange(0, 10**12))
    if choice == 2:
        return f"{fdp.ConsumeIntInRange(0, 999)}.{fdp.ConsumeIntInRange(0, 999999):0>6}"
    if choice == 3:
        return "9" * fdp.ConsumeIntInRange(1, 400)
    return fdp.PickValueInList(["0", "0.0", "0.0001", "1", "0.5", "\u0663", "\uff13", "1e3", ".5"])


def _field(fdp: atheris.FuzzedDataProvider) -> str:
    choice = fdp.ConsumeIntInRange(0, 6)
    atom = fdp.PickValueInList(ATOMS)
    if choice == 0:
        return str(atom)
    if choice == 1:
        return f"{atom}-{fdp.PickValueInList(ATOMS)}"
    if choice == 2:
        return f"{atom}/{_number(fdp)}"
    if choice == 3:
        return ",".join(str(fdp.PickValueInList(ATOMS)) for _ in range(fdp.ConsumeIntInRange(1, 4)))
    if choice == 4:
        return f"{atom}-{fdp.PickValueInList(ATOMS)}/{fdp.ConsumeIntInRange(0, 70)}"
    if choice == 5:
        return str(fdp.ConsumeIntInRange(0, 70))
    return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 4))


def _expression(fdp: atheris.FuzzedDataProvider) -> Any:
    kind = fdp.ConsumeIntInRange(0, 6)
    if kind <= 2:
        count = fdp.PickValueInList([5, 5, 6, 6, 4, 7, 1])
        parts = [_field(fdp) for _ in range(count)]
        sep = [
            str(fdp.PickValueInList(SPACES)) if fdp.ConsumeIntInRange(0, 5) == 0 else " "
            for _ in parts
        ]
        return "".join(s + p for s, p in zip(sep, parts, strict=True)).lstrip(" ")
    if kind == 3:
        pieces = [
            _number(fdp) + str(fdp.PickValueInList(UNITS))
            for _ in range(fdp.ConsumeIntInRange(1, 4))
        ]
        joiner = fdp.PickValueInList(["", " ", "  "])
        return str(fdp.PickValueInList(["@every ", "@every  ", "@every", "@EVERY "])) + joiner.join(
            pieces
        )
    if kind == 4:
        text = str(fdp.PickValueInList(ALIASES))
        if fdp.ConsumeBool():
            text += str(fdp.PickValueInList(SPACES)) + _field(fdp)
        return text
    if kind == 5:
        return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 40))
    return fv.any_scalar(fdp)


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    text = _expression(fdp)
    try:
        expr = schedules.parse(text)
    except InvalidArgument:
        return
    assert isinstance(expr, schedules.Expression)
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        t = fdp.ConsumeIntInRange(0, T_MAX)
        first = expr.next_after(t)
        assert type(first) is int, first
        assert first > t, f"{expr}: next_after({t}) = {first}"
        assert expr.next_after(t) == first, f"{expr}: next_after({t}) is not deterministic"
        second = expr.next_after(first)
        assert second > first, f"{expr}: next_after({first}) = {second}"
        # A parsed expression parses again to itself (ticks re-parse stored text).
        assert schedules.parse(expr.text) == expr


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
