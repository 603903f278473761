"""Fuzz target: name validation and the Postgres identifier mapping.

Property: ``check_name``/``check_identifier``/``check_key``/``check_schema``/
``quote_ident`` either return a valid value or raise ``ReservedName``,
``InvalidName`` or ``InvalidArgument``, never anything else; a wake channel's
identifier is at most 63 bytes of plain lower-case ASCII, and no two distinct
names ever map to the same identifier or queue name within a run.

Run: ``python fuzz/fuzz_names.py -atheris_runs=100000`` (or ``-max_total_time=60``).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import atheris
import fuzzvalues as fv

with atheris.instrument_imports():
    from alkstore.engines.postgres import names as pg
    from alkstore.protocol.values import names
    from alkstore.protocol.values.errors import InvalidArgument, InvalidName, ReservedName

_IDENT = re.compile(r"alk_[0-9a-f]{56}")
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]*")
_SEEN_LIMIT = 50_000

# identifier -> the input it came from, across the whole run.
channel_of: dict[str, str] = {}
outbox_of: dict[str, str] = {}
quoted_of: dict[str, str] = {}


def _remember(seen: dict[str, str], key: str, source: str, what: str) -> None:
    if len(seen) > _SEEN_LIMIT:
        seen.clear()
    previous = seen.setdefault(key, source)
    if previous != source:
        raise AssertionError(f"{what}: {previous!r} and {source!r} both map to {key!r}")


def _valid_identifier(value: Any) -> bool:
    if not isinstance(value, str) or not value or "\x00" in value:
        return False
    if len(value) > names.MAX_NAME_LENGTH:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_name_like(fn: Any, value: Any, *, reserved_allowed: bool) -> None:
    valid = _valid_identifier(value)
    reserved = valid and value.startswith(names.RESERVED_PREFIX) and not reserved_allowed
    try:
        out = fn(value)
    except ReservedName:
        assert reserved, f"{fn.__name__}({value!r}) raised ReservedName"
        return
    except InvalidName:
        assert not valid, f"{fn.__name__}({value!r}) refused a valid name"
        return
    assert valid and not reserved, f"{fn.__name__}({value!r}) accepted an invalid name"
    assert out is value, f"{fn.__name__} changed its input"


def _check_channel(channel: str) -> None:
    ident = pg.channel_identifier(channel)
    assert _IDENT.fullmatch(ident), ident
    assert len(ident.encode("utf-8")) <= pg.MAX_IDENTIFIER_BYTES
    assert ident == pg.channel_identifier(channel), "channel_identifier is not deterministic"
    _remember(channel_of, ident, channel, "channel_identifier")
    assert pg.quote_ident(ident) == f'"{ident}"'
    assert pg.listen_sql(channel) == f'LISTEN "{ident}"'


def _check_quote(name: str) -> None:
    try:
        quoted = pg.quote_ident(name)
    except InvalidName:
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            return
        assert not name or "\x00" in name or size > pg.MAX_IDENTIFIER_BYTES, name
        return
    assert name and "\x00" not in name
    assert len(name.encode("utf-8")) <= pg.MAX_IDENTIFIER_BYTES
    assert quoted.startswith('"') and quoted.endswith('"')
    inner = quoted[1:-1]
    assert '"' not in inner.replace('""', ""), f"unescaped quote in {quoted!r}"
    assert inner.replace('""', '"') == name
    _remember(quoted_of, quoted, name, "quote_ident")


def _check_schema(value: Any) -> None:
    try:
        out = pg.check_schema(value)
    except InvalidArgument:
        ok = (
            isinstance(value, str)
            and bool(_SCHEMA.fullmatch(value))
            and len(value) <= pg.MAX_IDENTIFIER_BYTES
            and not value.startswith("pg_")
            and value.isascii()
        )
        assert not ok, f"check_schema refused {value!r}"
        return
    assert out is value
    assert isinstance(out, str) and _SCHEMA.fullmatch(out) and out.isascii()
    assert len(out.encode("utf-8")) <= pg.MAX_IDENTIFIER_BYTES
    assert not out.startswith("pg_")
    assert pg.quote_ident(out) == f'"{out}"'


def TestOneInput(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeIntInRange(0, 7) == 0:
        value: Any = fv.any_scalar(fdp)
    else:
        value = fv.any_text(fdp, 80)
    kind = fdp.ConsumeIntInRange(0, 5)
    if kind == 0:
        _check_name_like(names.check_name, value, reserved_allowed=False)
        _check_name_like(lambda v: names.check_name(v, "queue"), value, reserved_allowed=False)
    elif kind == 1:
        _check_name_like(names.check_identifier, value, reserved_allowed=True)
        _check_name_like(names.check_key, value, reserved_allowed=True)
    elif kind == 2:
        try:
            outbox = names.check_name(value, "outbox")
        except (InvalidName, ReservedName):
            return
        queue = names.outbox_queue_name(outbox)
        assert isinstance(queue, str) and queue.startswith(names.RESERVED_PREFIX)
        try:
            names.check_name(queue)
        except ReservedName:
            pass
        except InvalidName:
            # Longer than a consumer name may be, but still plain text.
            assert len(queue) > names.MAX_NAME_LENGTH
            queue.encode("utf-8")
        else:
            raise AssertionError(f"outbox queue {queue!r} is not reserved")
        _remember(outbox_of, queue, outbox, "outbox_queue_name")
    elif kind == 3:
        if isinstance(value, str):
            _check_channel(value)
            _check_channel(names.queue_channel(value))
            _check_channel(names.stream_channel(value))
    elif kind == 4:
        if isinstance(value, str):
            _check_quote(value)
    else:
        _check_schema(value)


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
