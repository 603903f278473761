"""JSON payload codec.

orjson is several times faster than the stdlib for the small objects queues
carry. Its conveniences are turned off so that only plain JSON values encode:
datetimes, dataclasses and str/int subclasses pass through to ``default``,
which refuses them, so what a consumer reads back is exactly what it wrote.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import typing
import uuid
from collections.abc import Iterable
from typing import Any, TypeVar

import orjson

from .errors import CodecError

T = TypeVar("T")

JSON = Any  # dict | list | str | int | float | bool | None, recursively

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | (
    orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _refuse(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def _has_non_finite(value: object) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


# Types orjson serializes natively with no passthrough option: an enum as its
# value, a UUID as a string, a Fragment as raw (possibly invalid) JSON text;
# and tuples, as arrays. None of them reads back as what was written, so
# they are refused.
_NATIVE = (enum.Enum, uuid.UUID, orjson.Fragment)
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _refused(value: object) -> str | None:
    """Why ``value`` (already encoded by orjson) is not a JSON value, or None."""
    kind = type(value)
    items: Iterable[object]
    if kind is dict:
        items = value.values()  # type: ignore[attr-defined]
    elif kind is list:
        items = value  # type: ignore[assignment]
    elif kind is tuple:
        return "a tuple (it would read back as a list: pass a list)"
    elif kind not in _PLAIN and isinstance(value, _NATIVE):
        return f"{kind.__name__} (an enum, UUID or Fragment)"
    else:
        return None
    # A loop, not any() over a generator: this runs on every encode.
    for item in items:
        if type(item) not in _PLAIN:
            reason = _refused(item)
            if reason is not None:
                return reason
    return None


def encode(payload: JSON) -> str:
    """Encode a JSON value; raise ``CodecError`` for anything else."""
    try:
        data = orjson.dumps(payload, default=_refuse, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise CodecError(f"payload does not encode as JSON: {exc}") from exc
    # After dumps, which refuses nesting deeper than 255, so this cannot recurse far.
    if type(payload) not in _PLAIN:
        reason = _refused(payload)
        if reason is not None:
            raise CodecError(f"payload holds {reason}, which is not a JSON value")
    # orjson writes NaN and infinities as null, silently changing the value;
    # the scan runs only when a null appears, so the common case stays free.
    if b"null" in data and _has_non_finite(payload):
        raise CodecError("payload contains NaN or an infinity, which JSON cannot carry")
    return data.decode("utf-8")


def decode(text: str | bytes | None) -> JSON:
    """Decode a stored payload; a corrupt row raises ``CodecError``."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CodecError(f"stored payload is not valid JSON: {exc}") from exc


def convert(payload: JSON, target: type[T]) -> T:
    """Decode a JSON value into ``target``.

    Supports dataclasses (fields by name, recursively for annotated dataclass
    fields), classes with a pydantic-style ``model_validate``, and the JSON
    scalar and container types themselves.
    """
    try:
        return typing.cast(T, _convert(payload, target))
    except CodecError:
        raise
    except (TypeError, ValueError, KeyError, OverflowError, RecursionError) as exc:
        # OverflowError: an int too large for a float field; RecursionError: a
        # payload nested deeper than the interpreter's stack (a recursive type).
        raise CodecError(f"cannot decode payload as {_type_name(target)}: {exc}") from exc


def _type_name(target: object) -> str:
    return getattr(target, "__name__", repr(target))


def _convert(payload: JSON, target: Any) -> Any:
    if target is Any or target is object:
        return payload
    origin = typing.get_origin(target)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        errors: list[str] = []
        for option in typing.get_args(target):
            try:
                return _convert(payload, option)
            except (CodecError, TypeError, ValueError, KeyError, OverflowError) as exc:
                errors.append(str(exc))
        raise CodecError(f"payload matches none of {target}: {errors}")
    if origin is list:
        (item,) = typing.get_args(target) or (Any,)
        _expect(payload, list, target)
        return [_convert(v, item) for v in payload]
    if origin is dict:
        args = typing.get_args(target)
        value_type = args[1] if len(args) == 2 else Any
        _expect(payload, dict, target)
        return {k: _convert(v, value_type) for k, v in payload.items()}
    if target is type(None):
        if payload is not None:
            raise CodecError(f"expected null, got {type(payload).__name__}")
        return None
    if isinstance(target, type) and dataclasses.is_dataclass(target):
        _expect(payload, dict, target)
        hints = typing.get_type_hints(target)
        known = {f.name for f in dataclasses.fields(target) if f.init}
        unknown = set(payload) - known
        if unknown:
            raise CodecError(f"unexpected fields for {target.__name__}: {sorted(unknown)}")
        kwargs = {k: _convert(v, hints.get(k, Any)) for k, v in payload.items()}
        return target(**kwargs)
    validate = getattr(target, "model_validate", None)
    if callable(validate):
        return validate(payload)
    if target is float:
        if isinstance(payload, bool) or not isinstance(payload, int | float):
            raise CodecError(f"expected a number, got {type(payload).__name__}")
        return float(payload)
    if target in (int, str, bool, list, dict):
        if isinstance(payload, bool) and target is int:
            raise CodecError("expected an int, got bool")
        _expect(payload, target, target)
        return payload
    raise CodecError(f"cannot decode into {_type_name(target)}")


def _expect(payload: object, kind: type, target: object) -> None:
    if not isinstance(payload, kind):
        raise CodecError(
            f"expected {kind.__name__} for {_type_name(target)}, got {type(payload).__name__}"
        )
