"""``WakeReceiver``: the listening side of notify/listen."""

from __future__ import annotations

from types import TracebackType
from typing import Protocol

from ...protocol.machines.lifecycle import Lifecycle
from ...protocol.values.errors import Closed
from ...protocol.values.names import LISTENER_RECONNECTED
from ...protocol.values.types import Wake
from ...runner.hub import Mailbox, WakeHub
from ...runner.timeouts import check_timeout


class WakeSource(Protocol):
    """Where a receiver's channel is subscribed (Postgres LISTEN; no-op on SQLite)."""

    async def listen(self, channel: str) -> None: ...
    async def unlisten(self, channel: str) -> None: ...


class WakeReceiver:
    """Receives wakes for one channel. Use as ``async with store.listen(ch) as wakes``.

    Wakes coalesce: several notifies before a ``recv`` may arrive as one.
    """

    def __init__(
        self,
        hub: WakeHub,
        channel: str,
        source: WakeSource,
        store: Lifecycle | None = None,
        *,
        also: tuple[str, ...] = (),
    ) -> None:
        self._hub = hub
        self._source = source
        self._store = store if store is not None else Lifecycle("store")
        self.channel = channel
        # More channels whose wakes it receives too (internal receivers only).
        self._also = also
        self._box: Mailbox | None = None
        self._exited = False
        self._listening = False

    async def __aenter__(self) -> WakeReceiver:
        if self._box is not None or self._exited:
            raise Closed("a WakeReceiver can be entered once")
        self._store.check()
        self._box = self._hub.open(self.channel, *self._also)
        try:
            # On Postgres this LISTENs before returning, so no notify that
            # commits after entering is missed.
            for channel in (self.channel, *self._also):
                await self._source.listen(channel)
                self._listening = True
        except BaseException:
            self.close()
            if self._listening:
                await self._unlisten()
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
        if self._listening:
            await self._unlisten()

    async def _unlisten(self) -> None:
        self._listening = False
        for channel in (self.channel, *self._also):
            await self._source.unlisten(channel)

    def close(self) -> None:
        """Stop receiving: ``recv`` returns ``None``, ``try_recv`` raises ``Closed``."""
        self._exited = True
        if self._box is not None:
            self._hub.discard(self._box)
            self._box.close()

    @property
    def closed(self) -> bool:
        """True once closed, or before the ``async with`` block is entered."""
        return self._box is None or self._box.closed

    def _mailbox(self) -> Mailbox:
        if self._box is None:
            raise Closed("WakeReceiver used outside its 'async with' block")
        return self._box

    async def recv(self) -> Wake | None:
        """The next wake, waiting as long as it takes; ``None`` once closed."""
        box = self._mailbox() if not self._exited else None
        while box is not None and not box.closed:
            if box.take():
                return self._wake(box)
            await box.wait(None)
        return None

    def try_recv(self) -> Wake | None:
        """A pending wake or ``None`` right now; raises ``Closed`` when closed."""
        box = self._mailbox()
        if box.closed:
            raise Closed("wake receiver is closed")
        return self._wake(box) if box.take() else None

    async def recv_timeout(self, seconds: float) -> Wake | None:
        """A wake within ``seconds`` or ``None``; raises ``Closed`` when closed."""
        timeout = check_timeout(seconds)
        box = self._mailbox()
        if box.closed:
            raise Closed("wake receiver is closed")
        if not box.take():
            await box.wait(timeout)
            if box.closed:
                raise Closed("wake receiver is closed")
            if not box.take():
                return None
        return self._wake(box)

    def _wake(self, box: Mailbox) -> Wake:
        if box.reconnected:
            box.reconnected = False
            return Wake(LISTENER_RECONNECTED)
        return Wake(self.channel)

    def __aiter__(self) -> WakeReceiver:
        return self

    async def __anext__(self) -> Wake:
        wake = await self.recv()
        if wake is None:
            raise StopAsyncIteration
        return wake
