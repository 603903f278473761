"""Linux inotify through ctypes: a file descriptor that turns readable when
another process writes the database, so the watcher sleeps instead of polling.

Returns ``None`` wherever inotify is unavailable; the watcher then polls with
an adaptive cadence.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

IN_MODIFY = 0x00000002
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000


class Inotify:
    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd = fd
        self._libc = libc

    def watch(self, path: str) -> bool:
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), IN_MODIFY)
        return bool(wd >= 0)

    def drain(self) -> bool:
        """Consume pending events; True when there were any."""
        got = False
        while True:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                return got
            if not data:
                return got
            got = True

    def close(self) -> None:
        os.close(self.fd)


def open_inotify() -> Inotify | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6", use_errno=True)
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    return Inotify(fd, libc)
