"""The asyncio driver: ``open_sqlite`` and ``open_postgres`` for asyncio programs.

It shares every line of the facades, plans and runners with the trio driver;
only ``AsyncioRuntime`` (how asyncio waits, spawns and cancels) is its own.
"""

from __future__ import annotations

from ..runner.open_postgres import PostgresOptions
from ..runner.open_sqlite import SqliteOptions
from ..runner.openers import Openers
from .runtime import AsyncioRuntime

_openers = Openers(AsyncioRuntime, "asyncio")
open_sqlite = _openers.open_sqlite
open_postgres = _openers.open_postgres

__all__ = ["AsyncioRuntime", "PostgresOptions", "SqliteOptions", "open_postgres", "open_sqlite"]
