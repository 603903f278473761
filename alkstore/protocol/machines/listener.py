"""The Postgres listener's decisions: when to (re)connect, what to LISTEN
on, when the connection may be used and when everyone must re-check.

One connection per store carries every channel's LISTEN. ``ListenerLink``
takes it through its life: connect; LISTEN on every registered channel (one
registered meanwhile included) before anyone may use the connection; then
publish it, and, when it replaces a lost one, wake every receiver:
notifications may have been missed while it was down. A lost connection is
replaced at once; a failed attempt (to connect or to LISTEN) is tried again
after a pause that doubles per failure in a row (``ErrorBackoff``), and the
first success starts over.

Pure: ``alkstore/runner/postgres/listener.py`` connects, sends and sleeps.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from ..values.backoff import Backoff, ErrorBackoff, Pause, exact
from ..values.timeconv import MAX_DURATION_US, US_PER_S


class LinkState(enum.Enum):
    DOWN = "down"  # no connection
    LISTENING = "listening"  # connected, LISTENing on every channel before use
    UP = "up"  # in use: reading notifications


@dataclass(frozen=True, slots=True)
class Connect:
    """Open a new listening connection."""


@dataclass(frozen=True, slots=True)
class Listen:
    """Send ``LISTEN`` for this channel on the new connection."""

    channel: str


@dataclass(frozen=True, slots=True)
class Publish:
    """The connection listens on every channel: hand it out. ``reconnected``:
    it replaces a lost one, so wake every receiver to re-check."""

    reconnected: bool


@dataclass(frozen=True, slots=True)
class Read:
    """Read notifications until the connection drops."""


ListenerAction = Connect | Pause | Listen | Publish | Read


# -- liveness while reading ---------------------------------------------------
# A TCP keepalive proves only the next hop, which a proxy or pooler answers
# for, so the reader proves the whole path itself: a connection quiet for the
# probe interval is sent a probe, and a probe (or a receiver's LISTEN) that
# is not answered by its deadline means the path is dead.
@dataclass(frozen=True, slots=True)
class Probe:
    """Nothing is awaited and the connection was quiet: send a probe."""


@dataclass(frozen=True, slots=True)
class Lost:
    """An answer is overdue: treat the connection as lost and replace it."""


def quiet_wait(now: float, answer_due: float | None, probe_interval: float) -> float:
    """How long the reader may wait for the socket before it must act: until
    the awaited answer is due, or (nothing awaited) one probe interval."""
    return probe_interval if answer_due is None else answer_due - now


def after_silence(still_awaited: bool, awaiting: bool) -> Probe | Lost | None:
    """The wait ran out with nothing to read. ``still_awaited``: the answer
    awaited when the wait began has not come; ``awaiting``: some answer is
    awaited now. None: nothing to do but wait again (a command went out
    meanwhile, and its own deadline counts)."""
    if still_awaited:
        return Lost()
    return None if awaiting else Probe()


def reconnect_backoff(base: float, cap: float) -> Backoff:
    """The pauses after failed attempts: ``base`` seconds, doubling to ``cap``."""

    def us(seconds: float) -> int:
        # At least 1 us: a zero pause would retry in a hot loop.
        return max(1, min(MAX_DURATION_US, round(seconds * US_PER_S)))

    return exact(us(base), us(cap))


class ListenerLink:
    def __init__(self, backoff: Backoff) -> None:
        self.state = LinkState.DOWN
        self._failures = ErrorBackoff(backoff)
        self._pause_us: int | None = None
        self._listened: set[str] = set()
        # Published once already: a later connection is a reconnect.
        self._was_up = False

    def next_action(self, channels: Iterable[str]) -> ListenerAction:
        """What to do now, ``channels`` being those registered right now."""
        if self.state is LinkState.UP:
            return Read()
        if self.state is LinkState.DOWN:
            if self._pause_us is not None:
                return Pause(self._pause_us / US_PER_S)
            return Connect()
        for channel in channels:
            if channel not in self._listened:
                return Listen(channel)
        self.state = LinkState.UP
        self._failures.succeeded()
        reconnected, self._was_up = self._was_up, True
        return Publish(reconnected)

    def connected(self) -> None:
        self.state = LinkState.LISTENING
        self._listened = set()

    def listened(self, channel: str) -> None:
        self._listened.add(channel)

    def failed(self) -> None:
        """Connecting, or a LISTEN on the new connection, failed: pause."""
        self.state = LinkState.DOWN
        self._pause_us = self._failures.failed()

    def paused(self) -> None:
        self._pause_us = None

    def lost(self) -> None:
        """The connection in use dropped: replace it at once."""
        self.state = LinkState.DOWN
        self._pause_us = None
