"""The asyncio driver: ``open_sqlite`` and ``open_postgres`` for asyncio
programs, and the engine options they take (the same classes as
``alkstore.io_trio``'s).

It shares every line of the facades, plans and runners with the trio driver;
only ``AsyncioRuntime`` (how asyncio waits, spawns and cancels) is its own,
and it is internal. The public names are ``__all__`` (see docs/api.md).
"""

from __future__ import annotations

from ..protocol.watcher import WatcherOptions
from ..runner.open_postgres import PostgresOptions
from ..runner.open_sqlite import SqliteOptions
from ..runner.openers import Openers
from ..runner.pg_listener import ListenerOptions
from .runtime import AsyncioRuntime

_openers = Openers(AsyncioRuntime, "asyncio")
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
