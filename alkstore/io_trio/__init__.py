"""The trio driver: ``open_sqlite`` and ``open_postgres`` for trio programs,
and the engine options they take.

Everything above the runtime seam is shared with the asyncio driver; this
package supplies ``TrioRuntime`` (how trio waits, spawns and cancels), which
is internal. The public names are ``__all__`` (see docs/api.md).
"""

from __future__ import annotations

from ..open.openers import Openers
from ..runner import options as _options
from ..runner.options import ListenerOptions as ListenerOptions
from ..runner.options import PostgresOptions as PostgresOptions
from ..runner.options import SqliteOptions as SqliteOptions
from ..runner.options import WatcherOptions as WatcherOptions
from .runtime import TrioRuntime

_openers = Openers(TrioRuntime, "trio")
open_sqlite = _openers.open_sqlite
open_postgres = _openers.open_postgres

__all__ = ["open_postgres", "open_sqlite"]
__all__ += _options.__all__
