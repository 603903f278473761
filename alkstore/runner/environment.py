"""The environment variables alkstore reads, one set for the library, the
command line, the dashboard and the recipes (docs/operations.md#environment).

- ``ALKSTORE_DSN``: the PostgreSQL connection string. ``open_postgres()``
  without a ``dsn`` uses it (then the local test server); every command
  without ``--db``/``--dsn`` uses it.
- ``ALKSTORE_DB``: the SQLite file of a command given neither ``--db`` nor
  ``--dsn`` and no ``ALKSTORE_DSN``, and of the recipes.
- ``ALKSTORE_SCHEMA``: the Postgres schema of a command given no
  ``--schema``, and of the recipes.

``ALKSTORE_PG_DSN``, the library's name for the DSN before 0.1.0, still
works where ``ALKSTORE_DSN`` is not set, with a ``FutureWarning`` saying so
(the category Python shows by default: whoever set the variable, operator or
developer, sees it).
"""

from __future__ import annotations

import os
import warnings
from typing import Final

DSN: Final = "ALKSTORE_DSN"
DB: Final = "ALKSTORE_DB"
SCHEMA: Final = "ALKSTORE_SCHEMA"
# Old name -> the name that replaced it.
RENAMED: Final = {"ALKSTORE_PG_DSN": DSN}


def _read(name: str) -> str | None:
    value = os.environ.get(name) or None
    if value is not None:
        return value
    for old, new in RENAMED.items():
        if new == name and (value := os.environ.get(old) or None) is not None:
            warnings.warn(
                f"${old} is deprecated: set ${new} instead", FutureWarning, stacklevel=3
            )
            return value
    return None


def dsn() -> str | None:
    """``$ALKSTORE_DSN`` (or the deprecated ``$ALKSTORE_PG_DSN``), None when unset or empty."""
    return _read(DSN)


def db() -> str | None:
    """``$ALKSTORE_DB``, None when unset or empty."""
    return _read(DB)


def schema() -> str | None:
    """``$ALKSTORE_SCHEMA``, None when unset or empty."""
    return _read(SCHEMA)
