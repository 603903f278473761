"""Fuzz target: the JSON payload codec.

Property: ``encode`` either returns text that decodes to an equal value (a
typed object: that ``convert`` reads back into its own type as an equal
object) or raises ``CodecError`` (and never refuses a plain JSON value); ``decode`` of
arbitrary bytes or text returns a JSON value or raises ``CodecError``;
``convert`` into dataclasses, containers and scalars raises only
``CodecError`` and otherwise returns an instance of the target.

Run: ``python fuzz/fuzz_codec.py -atheris_runs=100000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import typing
from typing import Any, Optional, Union

import atheris
import fuzzvalues as fv

with atheris.instrument_imports():
    from alkstore.protocol.values import codec
    from alkstore.protocol.values.errors import CodecError

# orjson refuses to nest deeper than this when encoding.
MAX_DEPTH = 254


@dataclasses.dataclass
class Flat:
    a: int
    b: str
    c: float = 0.0
    d: bool = False
    e: int | None = None


@dataclasses.dataclass(frozen=True)
class Nested:
    flat: Flat
    items: list[int]
    table: dict[str, float]
    either: Union[int, str] = 0  # noqa: UP007 - the typing.Union spelling on purpose
    maybe: Optional[Flat] = None  # noqa: UP045
    anything: Any = None


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Computed:
    x: float
    derived: int = dataclasses.field(init=False, default=0)


@dataclasses.dataclass
class Typed:
    """Typed payloads: filled with fuzzed values of any type, so encode sees
    fields its annotations can and cannot restore."""

    anything: Any
    items: list[int]
    pair: tuple[int, str]
    number: float
    maybe: Optional[Flat] = None  # noqa: UP045
    table: dict[int, Any] = dataclasses.field(default_factory=dict)


class Model:
    """A pydantic-style target."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    @classmethod
    def model_validate(cls, raw: Any) -> Model:
        if not isinstance(raw, dict):
            raise ValueError("expected an object")
        return cls(raw)


TARGETS: list[Any] = [
    Flat,
    Nested,
    Node,
    Computed,
    Model,
    int,
    float,
    str,
    bool,
    list,
    dict,
    list[int],
    list[float],
    dict[str, int],
    dict[str, Flat],
    list[Node],
    int | None,
    Optional[str],  # noqa: UP045
    Union[Flat, list[int], None],  # noqa: UP007
    type(None),
    Any,
    object,
]


def _is_json(value: Any, depth: int = 0) -> bool:
    """Plain JSON that any JSON encoder must accept (exact builtin types only)."""
    if depth > MAX_DEPTH:
        return False
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return -(2**63) <= value < 2**64
    if kind is float:
        return math.isfinite(value)
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if kind is list:
        return all(_is_json(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _is_json(k) for k in value) and all(
            _is_json(v, depth + 1) for v in value.values()
        )
    return False


def _is_typed(value: Any) -> bool:
    """One typed object as a whole payload (here: a dataclass instance)."""
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _check_encode(value: Any) -> None:
    try:
        text = codec.encode(value)
    except CodecError:
        assert not _is_json(value), f"encode refused a JSON value: {value!r:.300}"
        return
    assert isinstance(text, str)
    if _is_typed(value):
        # A typed payload reads back equal into its own type, never lossy.
        back = codec.convert(codec.decode(text), type(value))
        assert back == value, f"{value!r:.300} read back as {back!r:.300}"
        return
    # Exact round trips: what encodes reads back equal and of the same types
    # (a tuple, which would read back as a list, is refused).
    assert _is_json(value), f"encode accepted a value that is not plain JSON: {value!r:.300}"
    back = codec.decode(text)
    assert back == value, f"{value!r:.300} encoded as {text!r:.300}"
    assert codec.encode(back) == text, "re-encoding changed the text"


def _check_decode(raw: str | bytes) -> None:
    try:
        value = codec.decode(raw)
    except CodecError:
        return
    # Whatever decodes is JSON: it encodes again (or is refused as too deep),
    # and reads back the same.
    try:
        text = codec.encode(value)
    except CodecError:
        assert not _is_json(value), f"{raw!r:.300} decoded to a value that does not encode"
        return
    assert codec.decode(text) == value


def _check_convert(value: Any, target: Any) -> None:
    try:
        out = codec.convert(value, target)
    except CodecError:
        return
    origin = typing.get_origin(target)
    if isinstance(target, type) and target not in (object, Any):
        if target is float:
            assert type(out) is float
        else:
            assert isinstance(out, target), f"convert({value!r:.200}, {target}) -> {out!r:.200}"
    elif origin is list:
        assert isinstance(out, list)
    elif origin is dict:
        assert isinstance(out, dict)


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 4)
    if mode == 4:
        _check_encode(
            Typed(
                fv.any_value(fdp),
                fv.any_value(fdp),
                fv.any_value(fdp),
                fv.any_value(fdp),
                fdp.PickValueInList([None, Flat(1, "a"), Flat(fv.any_value(fdp), "b")]),
                {fv.any_int(fdp): fv.any_value(fdp)} if fdp.ConsumeBool() else {},
            )
        )
    elif mode == 0:
        _check_encode(fv.any_value(fdp))
    elif mode == 1:
        if fdp.ConsumeBool():
            _check_decode(fdp.ConsumeBytes(fdp.remaining_bytes()))
        else:
            _check_decode(fdp.ConsumeUnicode(fdp.remaining_bytes()))
    elif mode == 2:
        target = fdp.PickValueInList(TARGETS)
        _check_convert(fv.any_value(fdp), target)
    else:
        # Payloads shaped like the dataclasses, so conversion gets past the
        # first field and into the nested ones.
        target = fdp.PickValueInList(TARGETS)
        _check_convert(_shaped(fdp, 6), target)


def _shaped(fdp: atheris.FuzzedDataProvider, depth: int) -> Any:
    kind = fdp.ConsumeIntInRange(0, 5)
    if depth <= 0 or kind == 0:
        return fv.any_scalar(fdp)
    if kind == 1:
        return {"a": fv.any_scalar(fdp), "b": fv.any_scalar(fdp), "c": fv.any_scalar(fdp)}
    if kind == 2:
        return {
            "flat": _shaped(fdp, depth - 1),
            "items": [fv.any_scalar(fdp) for _ in range(fdp.ConsumeIntInRange(0, 3))],
            "table": {fv.any_text(fdp, 4): fv.any_scalar(fdp)},
            "either": fv.any_scalar(fdp),
            "maybe": _shaped(fdp, depth - 1),
        }
    if kind == 3:
        # A chain of Nodes, possibly very deep.
        node: Any = {"value": fv.any_scalar(fdp)}
        for _ in range(fdp.ConsumeIntInRange(0, 800)):
            node = {"value": 1, "children": [node]}
        return node
    if kind == 4:
        return {"x": fv.any_scalar(fdp), "derived": 1} if fdp.ConsumeBool() else {"x": 1}
    return [_shaped(fdp, depth - 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
