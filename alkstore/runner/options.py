"""The engine options both drivers export: the same classes in each, so a
program can build them before it picks a driver."""

from __future__ import annotations

from ..protocol.machines.watcher import WatcherOptions
from .postgres.listener import ListenerOptions
from .postgres.opening import PostgresOptions
from .sqlite.opening import SqliteOptions

__all__ = ["ListenerOptions", "PostgresOptions", "SqliteOptions", "WatcherOptions"]
