"""Linux inotify and timerfd through ctypes: a file descriptor that turns
readable when another process writes the database, so the watcher sleeps
instead of polling, and timers that are file descriptors too.

The watcher waits on these instead of the event loop's timeouts: a trio
timeout that expires is delivered as a cancellation, about 230 us of CPU on
the reference machine, against about 20 us for a descriptor turning
readable, and the watcher of a busy store waits hundreds of times a second.
An epoll set holds the inotify descriptor and a timer; the watcher waits for
it to turn readable (an event, or the timer).

``open_inotify`` returns ``None`` wherever inotify is unavailable; the
watcher then polls with an adaptive cadence.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys

IN_MODIFY = 0x00000002
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
CLOCK_MONOTONIC = 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class Inotify:
    def __init__(self, fd: int, libc: ctypes.CDLL) -> None:
        self.fd = fd
        self._libc = libc
        self._paths: list[bytes] = []
        self._wds: list[int] = []

    def watch(self, path: str) -> bool:
        """Watch ``path`` for writes (kept for ``resume``); False if refused."""
        encoded = os.fsencode(path)
        wd = self._libc.inotify_add_watch(self.fd, encoded, IN_MODIFY)
        if wd < 0:
            return False
        self._paths.append(encoded)
        self._wds.append(wd)
        return True

    @property
    def paused(self) -> bool:
        return bool(self._paths) and not self._wds

    def pause(self) -> None:
        """Drop the watches (``resume`` sets them again). A watch costs every
        write to the file an event in the kernel, the writer's own included
        (0.4 to 0.8 us a write measured here, and a commit writes a frame a
        page), while a resting watcher reads none of them."""
        for wd in self._wds:
            self._libc.inotify_rm_watch(self.fd, wd)
        self._wds.clear()
        self.drain()  # the removals' own events (IN_IGNORED), and what came before

    def resume(self) -> bool:
        """Watch the paused paths again; False if none could be. Writes made
        while paused raised no event: the caller looks before it waits."""
        self._wds = [
            wd
            for path in self._paths
            if (wd := self._libc.inotify_add_watch(self.fd, path, IN_MODIFY)) >= 0
        ]
        return bool(self._wds)

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


class Timer:
    """A one-shot timer whose descriptor turns readable when it fires."""

    def __init__(self, libc: ctypes.CDLL) -> None:
        self._libc = libc
        fd = libc.timerfd_create(CLOCK_MONOTONIC, IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")
        self.fd = fd

    def arm(self, seconds: float) -> None:
        """Fire once, ``seconds`` from now (at once for 0 or less)."""
        ns = max(1, int(seconds * 1e9))  # 0 would disarm it
        spec = _Itimerspec(_Timespec(0, 0), _Timespec(ns // 1_000_000_000, ns % 1_000_000_000))
        self._libc.timerfd_settime(self.fd, 0, ctypes.byref(spec), None)

    def drain(self) -> bool:
        try:
            return bool(os.read(self.fd, 8))
        except BlockingIOError:
            return False

    def close(self) -> None:
        os.close(self.fd)


class Waiter:
    """File events or a timeout, as one descriptor to wait on."""

    def __init__(self, notifier: Inotify) -> None:
        self.notifier = notifier
        self.timer = Timer(notifier._libc)
        self._poll = select.epoll()
        self._poll.register(notifier.fd, select.EPOLLIN)
        self._poll.register(self.timer.fd, select.EPOLLIN)
        self.fd = self._poll.fileno()

    def settle(self) -> bool:
        """After a wait: clear what fired; True when file events came."""
        self._poll.poll(0)
        self.timer.drain()
        return self.notifier.drain()

    def close(self) -> None:
        self._poll.close()
        self.timer.close()
        self.notifier.close()


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
