"""Local wake delivery: receivers, and the hub that routes wakes to them."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from ..protocol.machines.wake_router import WakeRouter
from .runtime import Runtime, Signal


class Mailbox:
    """One receiver's pending-wake flag. Wakes coalesce: many become one."""

    def __init__(
        self, runtime: Runtime, receiver_id: int, channel: str, also: tuple[str, ...] = ()
    ) -> None:
        self.id = receiver_id
        self.channel = channel
        # Every channel it hears (an internal receiver may hear several).
        self.channels = (channel, *also)
        self.pending = False
        # Set when the wake source reconnected: wakes may have been missed.
        self.reconnected = False
        self.closed = False
        self._runtime = runtime
        self._signal: Signal = runtime.signal()

    def post(self) -> None:
        self.pending = True
        self._signal.set()

    def close(self) -> None:
        self.closed = True
        self._signal.set()

    def post_reconnected(self) -> None:
        self.reconnected = True
        self.post()

    def take(self) -> bool:
        """Consume the pending wake, if any."""
        if not self.pending:
            return False
        self.pending = False
        if self._signal.is_set():
            self._signal = self._runtime.signal()
        return True

    async def wait(self, timeout: float | None) -> bool:
        """Wait until a wake is pending or the mailbox closes (or timeout)."""
        if self.pending or self.closed:
            return True
        if self._signal.is_set():
            self._signal = self._runtime.signal()
        return await self._runtime.wait_signal(self._signal, timeout)


class WakeHub:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._router = WakeRouter()
        self._boxes: dict[int, Mailbox] = {}
        self._ids = itertools.count(1)
        self.closed = False

    def open(self, channel: str, *also: str) -> Mailbox:
        """A mailbox for ``channel``'s wakes (and ``also``'s: one box that
        any of them wakes)."""
        box = Mailbox(self._runtime, next(self._ids), channel, also)
        if self.closed:
            box.close()
            return box
        self._boxes[box.id] = box
        for each in box.channels:
            self._router.add(each, box.id)
        return box

    def channels(self) -> set[str]:
        """The channels some open receiver listens on."""
        return self._router.channels()

    @property
    def empty(self) -> bool:
        """No receiver is open (a watcher then has nobody to wake)."""
        return not self._boxes

    def discard(self, box: Mailbox) -> None:
        for each in box.channels:
            self._router.remove(each, box.id)
        self._boxes.pop(box.id, None)

    def wake(self, channels: Iterable[str]) -> None:
        for receiver in self._router.targets(channels):
            self._boxes[receiver].post()

    def wake_reconnected(self) -> None:
        for box in self._boxes.values():
            box.post_reconnected()

    def close_all(self) -> None:
        self.closed = True
        for box in list(self._boxes.values()):
            box.close()
