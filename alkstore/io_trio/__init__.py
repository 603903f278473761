"""The trio driver: ``open_sqlite`` and ``open_postgres`` for trio programs.

Everything above the runtime seam is shared with the asyncio driver; this
package supplies ``TrioRuntime`` (how trio waits, spawns and cancels).
"""

from __future__ import annotations

from ..runner.open_postgres import PostgresOptions
from ..runner.open_sqlite import SqliteOptions
from ..runner.openers import Openers
from .runtime import TrioRuntime

_openers = Openers(TrioRuntime, "trio")
open_sqlite = _openers.open_sqlite
open_postgres = _openers.open_postgres

__all__ = ["PostgresOptions", "SqliteOptions", "TrioRuntime", "open_postgres", "open_sqlite"]
