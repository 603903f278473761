"""Transaction control and connection set-up statements for SQLite.

Kept here, not in the drivers, so that every SQL string of the engine lives
in the engine module.
"""

from __future__ import annotations

import re

from ...protocol.values.errors import InvalidArgument, brief
from .schema import PRAGMAS

# Writers take the write lock up front: a deferred transaction that upgrades
# later can fail with SQLITE_BUSY without waiting for busy_timeout.
BEGIN_WRITE = "BEGIN IMMEDIATE"
BEGIN_READ = "BEGIN"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
STEP_SAVEPOINT = "SAVEPOINT alkstore_step"
STEP_ROLLBACK = "ROLLBACK TO alkstore_step"
STEP_RELEASE = "RELEASE alkstore_step"
DATA_VERSION = "PRAGMA data_version"
# Which files a connection has open: ``store.join(conn)`` (alkstore.sync)
# checks that an application's connection is to the store's own file.
DATABASE_LIST = "PRAGMA database_list"
# The transaction Python's sqlite3 opens implicitly (its legacy
# ``isolation_level`` mode), by the mode's name: what ``join`` opens on such
# a connection that has none open yet.
BEGIN_AS = {"": "BEGIN", "DEFERRED": "BEGIN DEFERRED", "IMMEDIATE": "BEGIN IMMEDIATE",
            "EXCLUSIVE": "BEGIN EXCLUSIVE"}  # fmt: skip
# Reader connections refuse writes outright.
QUERY_ONLY = "PRAGMA query_only = 1"
# The event-loop thread's connection never checkpoints (that would block the
# loop); the writer thread checkpoints for it when the WAL grows.
NO_AUTOCHECKPOINT = "PRAGMA wal_autocheckpoint = 0"
CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"
# SQLite's own autocheckpoint threshold, in frames (pages); the event-loop
# connection asks the writer thread for a checkpoint about this often.
AUTOCHECKPOINT_PAGES = 1000
# Primary result codes that mean "another connection holds the lock; run it
# again": SQLITE_BUSY (past busy_timeout) and SQLITE_LOCKED.
CONFLICT_CODES = frozenset({5, 6})
# SQLITE_IOERR: an I/O error while committing leaves the outcome unknown.
IOERR = 10

_INTEGER = re.compile(r"^-?[0-9]{1,18}$")
_BOOLEAN = ("ON", "OFF", "TRUE", "FALSE", "YES", "NO", "1", "0")

# The pragmas a caller may override, each with the values it may take.
# SQLite ignores an unknown pragma and most bad values without a word, so a
# typo would silently change nothing: both are refused instead. Pragmas
# alkstore depends on are not here: journal_mode must stay WAL (readers run
# beside the writer), busy_timeout is the ``busy_timeout`` option, and
# locking_mode=EXCLUSIVE would lock every other process out.
PRAGMA_OVERRIDES: dict[str, tuple[str, ...] | tuple[int, int]] = {
    "synchronous": ("OFF", "NORMAL", "FULL", "EXTRA", "0", "1", "2", "3"),
    "foreign_keys": _BOOLEAN,
    "temp_store": ("DEFAULT", "FILE", "MEMORY", "0", "1", "2"),
    "secure_delete": (*_BOOLEAN, "FAST"),
    "automatic_index": _BOOLEAN,
    "recursive_triggers": _BOOLEAN,
    "cell_size_check": _BOOLEAN,
    "trusted_schema": _BOOLEAN,
    "cache_size": (-(2**62), 2**62),
    "mmap_size": (0, 2**62),
    "wal_autocheckpoint": (0, 2**31 - 1),
    "journal_size_limit": (-1, 2**62),
    "max_page_count": (1, 2**32 - 2),
}


def busy_timeout(seconds: float) -> str:
    """How long a statement waits for a lock held by another connection."""
    return f"PRAGMA busy_timeout = {max(0, int(seconds * 1000))}"


def check_pragmas(overrides: object) -> dict[str, str]:
    """The caller's pragma overrides, checked against ``PRAGMA_OVERRIDES``.

    Pragma names and values cannot be bound as parameters, so only listed
    names and values of the listed shape get through."""
    if not isinstance(overrides, dict):
        raise InvalidArgument(f"pragmas must be a dict, got {brief(overrides)}")
    out: dict[str, str] = {}
    for key, value in overrides.items():
        if not isinstance(key, str) or key.lower() not in PRAGMA_OVERRIDES:
            raise InvalidArgument(
                f"pragma {brief(key)} cannot be set through alkstore; the ones that can: "
                + ", ".join(sorted(PRAGMA_OVERRIDES))
            )
        allowed = PRAGMA_OVERRIDES[key.lower()]
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise InvalidArgument(f"pragma {key} takes a str or an int, got {brief(value)}")
        text = str(value).strip().upper()
        if isinstance(allowed[0], int):
            lo, hi = allowed
            ok = bool(_INTEGER.match(text)) and lo <= int(text) <= hi
        else:
            ok = text in allowed
        if not ok:
            raise InvalidArgument(f"refusing pragma {key} = {brief(value)}: expected {allowed}")
        out[key.lower()] = text
    return out


def setup_statements(
    busy_timeout_s: float, overrides: dict[str, str], *, read_only: bool = False
) -> list[str]:
    """PRAGMAs for a new connection: our defaults, then the caller's overrides.

    ``read_only``: a connection of a read-only store, which must leave the
    file exactly as it found it: no ``journal_mode`` (switching to WAL writes
    the file's header), and ``query_only`` on top of the ``mode=ro`` open."""
    out = [busy_timeout(busy_timeout_s)]
    for key, value in {**PRAGMAS, **check_pragmas(overrides)}.items():
        if read_only and key == "journal_mode":
            continue
        out.append(f"PRAGMA {key} = {value}")
    if read_only:
        out.append(QUERY_ONLY)
    return out
