"""Which receivers a wake reaches: channels to subscribers, in this process."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class WakeRouter:
    """Channel -> receiver ids. Receivers are identified by opaque ints."""

    _by_channel: dict[str, set[int]] = field(default_factory=dict)

    def add(self, channel: str, receiver: int) -> None:
        self._by_channel.setdefault(channel, set()).add(receiver)

    def remove(self, channel: str, receiver: int) -> None:
        ids = self._by_channel.get(channel)
        if ids is None:
            return
        ids.discard(receiver)
        if not ids:
            del self._by_channel[channel]

    def targets(self, channels: Iterable[str]) -> set[int]:
        out: set[int] = set()
        for channel in channels:
            out |= self._by_channel.get(channel, set())
        return out

    def channels(self) -> set[str]:
        return set(self._by_channel)
