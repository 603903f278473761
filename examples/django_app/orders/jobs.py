"""The process's alkstore store: opened on Django's database at first use,
shared by every request thread (a sync store is safe to share), closed at exit."""

import atexit
import os
import threading
from contextlib import AbstractContextManager, ExitStack

from django.conf import settings

import alkstore.sync

_lock = threading.Lock()
_stack = ExitStack()
_store: alkstore.sync.Store | None = None


def store() -> alkstore.sync.Store:
    global _store
    with _lock:
        if _store is None:
            _store = _stack.enter_context(_open())
            atexit.register(_stack.close)
        return _store


def _open() -> AbstractContextManager[alkstore.sync.Store]:
    if settings.DSN is not None:
        schema = os.environ.get("ALKSTORE_SCHEMA") or "alkstore"
        options = alkstore.sync.PostgresOptions(schema=schema)
        return alkstore.sync.open_postgres(settings.DSN, options=options)
    return alkstore.sync.open_sqlite(settings.DATABASES["default"]["NAME"])
