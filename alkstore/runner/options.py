"""The engine options both drivers export: the same classes in each, so a
program can build them before it picks a driver."""

from __future__ import annotations

from ..protocol.watcher import WatcherOptions
from .open_postgres import PostgresOptions
from .open_sqlite import SqliteOptions
from .pg_listener import ListenerOptions

__all__ = ["ListenerOptions", "PostgresOptions", "SqliteOptions", "WatcherOptions"]
