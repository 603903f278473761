"""JSON payload codec.

orjson is several times faster than the stdlib for the small objects queues
carry. Its conveniences are turned off so that only plain JSON values encode:
datetimes, dataclasses and str/int subclasses pass through to ``default``,
which refuses them, so what a consumer reads back is exactly what it wrote.

Typed payloads: a payload that is one typed object as a whole (a dataclass,
an attrs class, a ``msgspec.Struct``, a ``NamedTuple``, or a pydantic model)
is converted to JSON by msgspec (pydantic models by their own
``model_dump(mode="json")``) and read back by ``convert`` (``payload_as``)
through ``msgspec.convert`` (pydantic: ``model_validate``). The rule stays
exact round trips: ``encode`` reads the text it made back into the object's
own type and refuses the payload with ``CodecError`` unless the result
equals the object, so whatever cannot come back exactly (a set in a ``list``
field, a NaN, an offset with seconds...) is refused, never stored lossy.
Plain dicts and lists never reach msgspec: the hot path is unchanged.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import uuid
from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi
import orjson

from .errors import CodecError, brief

T = TypeVar("T")

JSON = Any  # dict | list | str | int | float | bool | None, recursively

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | (
    orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _refuse(value: object) -> object:
    if _typed(value) is not None:
        raise TypeError(
            f"{type(value).__name__} is not a JSON value (a typed object is accepted only "
            "as the whole payload)"
        )
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
    elif isinstance(value, tuple):
        # A tuple subclass (orjson writes it as an array) that is not a
        # NamedTuple: it would read back as a list.
        return f"{kind.__name__} (a tuple subclass: it would read back as a list)"
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
    """Encode a JSON value, or one typed object (dataclass, attrs class,
    ``msgspec.Struct``, ``NamedTuple``, pydantic model) that reads back
    equal into its own type; raise ``CodecError`` for anything else."""
    kind = type(payload)
    # Two identity tests on the hot path: a dict or list payload goes
    # straight to orjson, as before typed payloads existed (the JSON path
    # is written out here, not called, to spare the hot path a call).
    if kind is not dict and kind is not list and kind not in _PLAIN:
        typed = _typed(payload)
        if typed is not None:
            return _encode_typed(payload, typed)
    try:
        data = orjson.dumps(payload, default=_refuse, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise CodecError(f"payload does not encode as JSON: {exc}") from exc
    # After dumps, which refuses nesting deeper than 255, so this cannot recurse far.
    if kind not in _PLAIN:
        reason = _refused(payload)
        if reason is not None:
            raise CodecError(f"payload holds {reason}, which is not a JSON value")
    # orjson writes NaN and infinities as null, silently changing the value;
    # the scan runs only when a null appears, so the common case stays free.
    if b"null" in data and _has_non_finite(payload):
        raise CodecError("payload contains NaN or an infinity, which JSON cannot carry")
    return data.decode("utf-8")


def _encode_json(payload: JSON) -> str:
    """``encode`` of what must be a JSON value (a pydantic model's dump)."""
    try:
        data = orjson.dumps(payload, default=_refuse, option=_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise CodecError(f"payload does not encode as JSON: {exc}") from exc
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


# --- typed payloads ---------------------------------------------------------

_PYDANTIC = "pydantic"
_MSGSPEC = "msgspec"


def _is_pydantic(kind: type) -> bool:
    """A pydantic ``BaseModel`` (or a class shaped like one), found without
    importing pydantic, which stays optional."""
    return callable(getattr(kind, "model_validate", None)) and callable(
        getattr(kind, "model_dump", None)
    )


def _typed(value: object) -> str | None:
    """Which library converts ``value`` as a typed payload, or None when it
    is not a typed object (a JSON value, or something to refuse)."""
    kind = type(value)
    if _is_pydantic(kind):
        return _PYDANTIC
    if (
        dataclasses.is_dataclass(kind)
        or isinstance(value, msgspec.Struct)
        or hasattr(kind, "__attrs_attrs__")
        or (isinstance(value, tuple) and hasattr(kind, "_fields"))
    ):
        return _MSGSPEC
    return None


def _encode_typed(payload: Any, typed: str) -> str:
    kind = type(payload)
    name = kind.__name__
    if typed == _PYDANTIC:
        try:
            plain = payload.model_dump(mode="json")
        except (TypeError, ValueError) as exc:  # pydantic's errors are ValueErrors
            raise CodecError(f"{name} does not encode as JSON: {exc}") from exc
        if isinstance(plain, dict | list):
            where = _non_finite_at(plain, "$")
            if where is not None:
                raise CodecError(
                    f"{name} holds NaN or an infinity at `{where}`, which JSON cannot carry"
                )
        text = _encode_json(plain)
    else:
        try:
            # str_keys: a dict[int, ...] field is written with string keys,
            # which convert (str_keys=True) turns back into ints.
            plain = msgspec.to_builtins(payload, str_keys=True)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise CodecError(f"{name} does not encode as JSON: {exc}") from exc
        text = _encode_typed_builtins(plain, name)
    # The rule is exact round trips: read the text back as payload_as will,
    # and refuse what does not come back equal.
    back = convert(orjson.loads(text), kind)
    try:
        same = back == payload
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{name} cannot be compared with what it reads back as: {exc}") from exc
    if not same:
        where = _difference(payload, back, "$")
        raise CodecError(
            f"{name} does not read back equal to itself from JSON (`{where}` reads back as "
            f"{brief(_at(back, where))}): it holds a value its annotations cannot restore (a set "
            "or tuple in a list field, a bytes or datetime in an Any field, a UTC offset "
            "with seconds, a NaN...), or the type has no field-wise ==; refused rather "
            "than stored lossy"
        )
    return text


def _fields(value: object) -> list[str] | None:
    """The field names of a typed object, or None for anything else."""
    kind = type(value)
    if _is_pydantic(kind):
        return list(getattr(kind, "model_fields", {}))
    if _typed(value) is None:
        return None
    try:
        info = mi.type_info(kind)
    except TypeError:
        return None
    if isinstance(info, (*_OBJECTS, mi.NamedTupleType)):
        return [f.name for f in info.fields]
    return None


def _difference(a: object, b: object, path: str) -> str:
    """The path of the first field where ``a`` and ``b`` (of one typed
    class) differ; ``path`` itself when they are not typed objects."""
    names = _fields(a)
    if names is None or type(a) is not type(b):
        return path
    for name in names:
        x, y = getattr(a, name, None), getattr(b, name, None)
        if x != y:
            return _difference(x, y, f"{path}.{name}")
    return path


def _at(value: object, path: str) -> object:
    for name in path.split(".")[1:]:
        value = getattr(value, name, None)
    return value


def _encode_typed_builtins(plain: Any, name: str) -> str:
    """orjson for msgspec's builtins, which keep tuples (written as arrays)."""
    try:
        data = orjson.dumps(plain, option=orjson.OPT_PASSTHROUGH_DATETIME)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise CodecError(f"{name} does not encode as JSON: {exc}") from exc
    if b"null" in data:
        where = _non_finite_at(plain, "$")
        if where is not None:
            raise CodecError(
                f"{name} holds NaN or an infinity at `{where}`, which JSON cannot carry"
            )
    return data.decode("utf-8")


def _non_finite_at(value: object, path: str) -> str | None:
    """The path of the first NaN or infinity in JSON builtins, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            found = _non_finite_at(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _non_finite_at(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def convert(payload: JSON, target: type[T]) -> T:
    """Decode a JSON value into ``target``.

    ``target`` is any type msgspec converts into (dataclasses, attrs classes,
    ``msgspec.Struct``, ``TypedDict``, ``NamedTuple``, enums, ``Literal``,
    ``datetime``/``date``/``time``/``timedelta``, ``UUID``, ``Decimal``,
    ``bytes`` (base64), tuples, sets, unions, JSON types, nested), or a
    pydantic-style class with ``model_validate``. Fields are matched by name;
    an unknown field is an error. A mismatch raises ``CodecError`` naming
    the field (``$.items[0].sku``).
    """
    if target is Any or target is object:
        return payload  # type: ignore[no-any-return]
    if isinstance(target, type) and _is_pydantic(target) and not _msgspec_native(target):
        try:
            return target.model_validate(payload)  # type: ignore[attr-defined, no-any-return]
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise CodecError(f"cannot decode payload as {_type_name(target)}: {exc}") from exc
    try:
        out: T = msgspec.convert(payload, target, str_keys=True)
    except msgspec.ValidationError as exc:
        raise CodecError(f"cannot decode payload as {_type_name(target)}: {exc}") from exc
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        # TypeError: a target msgspec does not support (unknown class,
        # ambiguous union...); RecursionError: nesting past the stack.
        raise CodecError(f"cannot decode into {_type_name(target)}: {exc}") from exc
    info = _info(target)
    if info is not None:
        try:
            where = _unknown_field(payload, info, "$")
        except RecursionError as exc:
            raise CodecError(f"payload nested too deep for {_type_name(target)}") from exc
        if where is not None:
            raise CodecError(
                f"cannot decode payload as {_type_name(target)}: unknown field `{where}`"
            )
    return out


def _msgspec_native(target: type) -> bool:
    return dataclasses.is_dataclass(target) or issubclass(target, msgspec.Struct)


def _type_name(target: object) -> str:
    return getattr(target, "__name__", None) or repr(target)


# --- unknown fields ---------------------------------------------------------
# msgspec ignores keys that match no field of a dataclass, attrs class,
# TypedDict or Struct; the contract makes them an error (a typo in a
# producer's field name must not vanish silently). Checked after a
# successful convert, so the payload's shape already matches the type.

_OBJECTS = (mi.DataclassType, mi.TypedDictType, mi.StructType)
_ITEMS = (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)


@functools.lru_cache(maxsize=512)
def _cached_info(target: Any) -> mi.Type | None:
    info = mi.type_info(target)
    return info if _has_objects(info, set()) else None


def _info(target: Any) -> mi.Type | None:
    """``target``'s msgspec type info when it holds a typed object (else no
    check is needed)."""
    try:
        return _cached_info(target)
    except TypeError:  # unhashable target: not cached
        info = mi.type_info(target)
        return info if _has_objects(info, set()) else None


def _has_objects(info: mi.Type, seen: set[int]) -> bool:
    if id(info) in seen:
        return False
    seen.add(id(info))
    if isinstance(info, _OBJECTS):
        return True
    return any(_has_objects(child, seen) for child in _children(info))


def _children(info: mi.Type) -> list[mi.Type]:
    if isinstance(info, _ITEMS):
        return [info.item_type]
    if isinstance(info, mi.TupleType):
        return list(info.item_types)
    if isinstance(info, mi.DictType | mi.FrozenDictType):
        return [info.value_type]
    if isinstance(info, mi.UnionType):
        return list(info.types)
    if isinstance(info, mi.NamedTupleType | mi.DataclassType | mi.TypedDictType | mi.StructType):
        return [f.type for f in info.fields]
    return []


def _unknown_field(payload: Any, info: mi.Type, path: str) -> str | None:
    """The path of the first key of ``payload`` that no field of ``info``
    names, or None."""
    if isinstance(info, _OBJECTS):
        fields = {f.encode_name: f for f in info.fields}
        if isinstance(payload, list) and isinstance(info, mi.StructType) and info.array_like:
            pairs = [(f.encode_name, v) for f, v in zip(info.fields, payload, strict=False)]
        elif isinstance(payload, dict):
            pairs = list(payload.items())
        else:
            return None
        tag_field = info.tag_field if isinstance(info, mi.StructType) else None
        for key, value in pairs:
            field = fields.get(key)
            if field is None:
                if key == tag_field:
                    continue
                return f"{path}.{key}"
            found = _unknown_field(value, field.type, f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(info, _ITEMS):
        if isinstance(payload, list):
            for i, item in enumerate(payload):
                found = _unknown_field(item, info.item_type, f"{path}[{i}]")
                if found is not None:
                    return found
        return None
    if isinstance(info, mi.TupleType | mi.NamedTupleType):
        types = (
            info.item_types
            if isinstance(info, mi.TupleType)
            else tuple(f.type for f in info.fields)
        )
        if isinstance(payload, list):
            for i, (item, kind) in enumerate(zip(payload, types, strict=False)):
                found = _unknown_field(item, kind, f"{path}[{i}]")
                if found is not None:
                    return found
        return None
    if isinstance(info, mi.DictType | mi.FrozenDictType):
        if isinstance(payload, dict):
            for key, value in payload.items():
                found = _unknown_field(value, info.value_type, f"{path}[{key!r}]")
                if found is not None:
                    return found
        return None
    if isinstance(info, mi.UnionType):
        # msgspec admits at most one object-like and one array-like member
        # (or tagged Structs): check against each member of the payload's
        # shape, and report only when none fits.
        first: str | None = None
        for member in info.types:
            if not _shape_fits(payload, member):
                continue
            found = _unknown_field(payload, member, path)
            if found is None:
                return None
            first = first or found
        return first
    return None


def _shape_fits(payload: Any, info: mi.Type) -> bool:
    if isinstance(payload, dict):
        return isinstance(info, (*_OBJECTS, mi.DictType, mi.FrozenDictType))
    if isinstance(payload, list):
        return isinstance(info, (*_ITEMS, mi.TupleType, mi.NamedTupleType)) or (
            isinstance(info, mi.StructType) and info.array_like
        )
    return False
