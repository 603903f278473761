"""How names reach PostgreSQL: as bound data, or as mapped identifiers.

Two kinds of name, two rules:

- Names stored as data (queue, stream, lock, schedule and consumer names,
  worker ids, lock owners) are always bound parameters of type ``text`` in
  columns with the ``"C"`` collation. Postgres compares them byte for byte
  and never folds, truncates or quotes them, so any two distinct strings are
  two distinct names: they cannot alias.

- Wake channels are identifiers: ``LISTEN``/``NOTIFY`` take a channel name
  that Postgres folds to lower case when unquoted and truncates to 63 bytes
  (``NAMEDATALEN - 1``); ``pg_notify()`` refuses longer ones. A consumer's
  channel name may be up to 1024 characters of any Unicode text, so it is
  never used as is: :func:`channel_identifier` maps it to a fixed-shape ASCII
  identifier, ``alk_`` followed by 56 lowercase hex digits of the name's
  SHA-256 (60 bytes: no truncation, no folding, nothing to quote; quoting is
  still applied for hygiene).

  Collision bound: the digest is truncated to 224 bits, so two distinct
  names collide with probability 2**-224, and among ``n`` distinct channel
  names the chance of any collision is at most ``n**2 / 2**225`` (for a
  trillion names, below 1e-43). A collision would only cost a spurious wake,
  which the contract already allows (wakes are hints), never a lost one.

Schema names are identifiers too; they come from configuration, not from
consumers, so they are validated (:func:`check_schema`) rather than mapped.
"""

from __future__ import annotations

import functools
import hashlib
import re

from ...protocol.values.errors import InvalidArgument, InvalidName, brief

# Longest identifier Postgres keeps without truncating (NAMEDATALEN - 1).
MAX_IDENTIFIER_BYTES = 63
CHANNEL_PREFIX = "alk_"
CHANNEL_DIGEST_HEX = 56  # 224 bits; the identifier is 60 bytes

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@functools.lru_cache(maxsize=4096)
def channel_identifier(channel: str, scope: str = "") -> str:
    """The LISTEN/NOTIFY identifier of a wake channel (deterministic, 60
    ASCII bytes). ``scope`` is the schema of a store outside the default
    one: LISTEN/NOTIFY are per database, so two stores in two schemas of one
    database would otherwise wake each other on every queue and stream name
    they share. The default schema's identifiers stay those of earlier
    releases (empty scope), so processes of both versions still wake each
    other there."""
    text = channel if not scope else f"{scope}\x00{channel}"
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return CHANNEL_PREFIX + digest[:CHANNEL_DIGEST_HEX]


def quote_ident(name: str) -> str:
    """Quote ``name`` as an SQL identifier, exactly as written.

    Refuses what Postgres would not keep faithfully (an empty name, a NUL, or
    more than 63 UTF-8 bytes, which Postgres would silently truncate).
    """
    if not name:
        raise InvalidName(name, "an SQL identifier must be non-empty")
    if "\x00" in name:
        raise InvalidName(name, "an SQL identifier cannot contain NUL")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidName(name, "an SQL identifier must be valid Unicode text") from exc
    if size > MAX_IDENTIFIER_BYTES:
        raise InvalidName(
            name, f"an SQL identifier is at most {MAX_IDENTIFIER_BYTES} bytes (got {size})"
        )
    return '"' + name.replace('"', '""') + '"'


def check_schema(schema: object) -> str:
    """Validate the engine's schema name: lower-case ASCII, at most 63 bytes.

    Only names that Postgres would also accept unquoted without folding are
    allowed, so the schema is the same object whether a human types it in
    psql quoted or not. ``pg_`` names are reserved for the system.
    """
    if not isinstance(schema, str) or not _SCHEMA.fullmatch(schema):
        raise InvalidArgument(
            f"schema name must match [a-z_][a-z0-9_]{{0,62}}, got {brief(schema)}"
        )
    if schema.startswith("pg_"):
        raise InvalidArgument(f"schema name {brief(schema)} uses the system prefix 'pg_'")
    return schema


def listen_sql(channel: str, scope: str = "") -> str:
    """``LISTEN`` for a wake channel (a statement with no parameters)."""
    return f"LISTEN {quote_ident(channel_identifier(channel, scope))}"


def unlisten_sql(channel: str, scope: str = "") -> str:
    """``UNLISTEN`` for a wake channel (a statement with no parameters)."""
    return f"UNLISTEN {quote_ident(channel_identifier(channel, scope))}"
