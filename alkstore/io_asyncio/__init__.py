"""The asyncio driver: ``open_sqlite`` and ``open_postgres`` for asyncio
programs, and the engine options they take (the same classes as
``alkstore.io_trio``'s).

It shares every line of the facades, plans and runners with the trio driver;
only ``AsyncioRuntime`` (how asyncio waits, spawns and cancels) is its own,
and it is internal. The public names are ``__all__`` (see docs/api.md).
"""

from __future__ import annotations

from ..open.openers import Openers
from ..runner import options as _options
from ..runner.options import ListenerOptions as ListenerOptions
from ..runner.options import PostgresOptions as PostgresOptions
from ..runner.options import SqliteOptions as SqliteOptions
from ..runner.options import WatcherOptions as WatcherOptions
from .runtime import AsyncioRuntime

_openers = Openers(AsyncioRuntime, "asyncio")
open_sqlite = _openers.open_sqlite
open_postgres = _openers.open_postgres

__all__ = ["open_postgres", "open_sqlite"]
__all__ += _options.__all__
