"""Transaction control and connection set-up statements for SQLite.

Kept here, not in the drivers, so that every SQL string of the engine lives
in the engine module.
"""

from __future__ import annotations

import re

from ...protocol.errors import InvalidArgument
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
# Reader connections refuse writes outright.
QUERY_ONLY = "PRAGMA query_only = 1"
# Primary result codes that mean "another connection holds the lock; run it
# again": SQLITE_BUSY (past busy_timeout) and SQLITE_LOCKED.
CONFLICT_CODES = frozenset({5, 6})

_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE = re.compile(r"^-?[A-Za-z0-9_]+$")


def busy_timeout(seconds: float) -> str:
    """How long a statement waits for a lock held by another connection."""
    return f"PRAGMA busy_timeout = {max(0, int(seconds * 1000))}"


def setup_statements(busy_timeout_s: float, overrides: dict[str, str]) -> list[str]:
    """PRAGMAs for a new connection: our defaults, then the caller's overrides.

    Pragma names and values cannot be bound as parameters, so they are
    checked against a strict pattern instead.
    """
    out = [busy_timeout(busy_timeout_s)]
    for key, value in {**PRAGMAS, **overrides}.items():
        text = str(value)
        if not _WORD.match(key) or not _VALUE.match(text):
            raise InvalidArgument(f"refusing pragma {key!r} = {value!r}")
        out.append(f"PRAGMA {key} = {text}")
    return out
