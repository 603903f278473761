"""The identity of a store's SQLite file, and noticing when it changes.

An open SQLite connection keeps writing to the file it opened, even after
that file was deleted or replaced: commits go on succeeding into an inode
nobody will ever read again, while other processes open a fresh, empty
database at the same path. So a store records the file's identity (device
and inode) when it opens, and compares after every commit and read and on
every watcher look. Once it changed, the store is lost: every operation
fails with ``DatabaseError`` and the wake receivers close.
"""

from __future__ import annotations

import os
from urllib.parse import quote, unquote, urlsplit

from ...protocol.values.errors import DatabaseError


def file_path(target: str) -> str | None:
    """The file behind a SQLite open target, or None for a memory database."""
    if target.startswith("file:"):
        parts = urlsplit(target)
        if "mode=memory" in parts.query or not parts.path:
            return None
        return os.path.abspath(unquote(parts.path))
    if target in ("", ":memory:"):
        return None
    return os.path.abspath(target)


def read_only_uri(target: str) -> str:
    """The URI that opens ``target`` (a path or a ``file:`` URI) read-only:
    SQLite's ``mode=ro``, which never creates the file and refuses every
    write to it."""
    if target.startswith("file:"):
        base, _, query = target.partition("?")
        params = [p for p in query.split("&") if p and not p.startswith("mode=")]
        return f"{base}?{'&'.join([*params, 'mode=ro'])}"
    return f"file:{quote(os.path.abspath(target))}?mode=ro"


class DatabaseFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self._identity = self._stat()
        self.lost: str | None = None
        if self._identity is None:
            self.lost = f"SQLite database file {path!r} does not exist"

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def check(self) -> None:
        """Raise ``DatabaseError`` if the file is no longer the one opened."""
        if self.lost is None:
            identity = self._stat()
            if identity != self._identity:
                how = "deleted" if identity is None else "replaced by another file"
                self.lost = (
                    f"SQLite database file {self.path!r} was {how} while the store was open; "
                    "work since then went to the old file and is lost: reopen the store"
                )
        if self.lost is not None:
            raise DatabaseError(self.lost)
