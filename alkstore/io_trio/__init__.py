"""The trio driver: ``open_sqlite`` and ``open_postgres`` for trio programs,
and the engine options they take.

Everything above the runtime seam is shared with the asyncio driver; this
package supplies ``TrioRuntime`` (how trio waits, spawns and cancels), which
is internal. The public names are ``__all__`` (see docs/api.md).
"""

from __future__ import annotations

from ..protocol.watcher import WatcherOptions
from ..runner.open_postgres import PostgresOptions
from ..runner.open_sqlite import SqliteOptions
from ..runner.openers import Openers
from ..runner.pg_listener import ListenerOptions
from .runtime import TrioRuntime

_openers = Openers(TrioRuntime, "trio")
open_sqlite = _openers.open_sqlite
open_postgres = _openers.open_postgres

__all__ = [
    "ListenerOptions",
    "PostgresOptions",
    "SqliteOptions",
    "WatcherOptions",
    "open_postgres",
    "open_sqlite",
]
