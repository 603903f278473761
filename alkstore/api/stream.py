"""``Stream`` and ``EventReceiver``: a durable log with explicit offsets."""

from __future__ import annotations

import logging
from types import TracebackType

from ..protocol.machines import subscriber
from ..protocol.plan import Plan
from ..protocol.plans import streams
from ..protocol.values import codec
from ..protocol.values.backoff import Pause
from ..protocol.values.errors import Closed, DatabaseError
from ..protocol.values.ints import check_int
from ..protocol.values.names import check_identifier, stream_channel
from ..protocol.values.timeconv import Duration, duration_us
from ..protocol.values.types import StreamEvent, StreamInfo
from ..runner.timeouts import check_timeout
from .core import ops
from .core.handle import StoreCore

log = logging.getLogger("alkstore.stream")


class Stream:
    """A named, append-only log. Offsets start at 1 and are dense per stream."""

    def __init__(self, core: StoreCore, name: str) -> None:
        self._core = core
        self.name = name

    def __repr__(self) -> str:
        return f"Stream({self.name!r})"

    async def publish(self, payload: codec.JSON) -> int:
        """Append ``payload`` (JSON) and return its offset; receivers are woken once it commits.
        Raises ``CodecError`` for a payload that is not JSON."""
        return await self._published(ops.publish(self._core, self.name, None, payload))

    async def publish_with_key(self, key: str, payload: codec.JSON) -> int:
        """Like ``publish``, with a non-empty ``key`` stored beside the event (``InvalidName`` if
        empty)."""
        return await self._published(ops.publish_keyed(self._core, self.name, key, payload))

    async def _published(self, plan: Plan[int]) -> int:
        core = self._core
        return await core.telemetry.publish(self.name, core.run(plan))

    async def read_since(self, offset: int, limit: int = 100) -> list[StreamEvent]:
        """Events with offsets above ``offset``, ascending, at most ``limit``."""
        return await self._core.run(*ops.read_since(self._core, self.name, offset, limit))

    async def list_events(
        self, *, before: int | None = None, limit: int = 100
    ) -> list[StreamEvent]:
        """Up to ``limit`` events held, newest first, with offsets below
        ``before`` (None: from the newest): pass the last offset of a page as
        the next ``before`` (keyset paging: a page costs its size, however
        deep). For looking at a stream; consumers read with ``read_since``."""
        return await self._core.run(*ops.list_events(self._core, self.name, before, limit))

    async def read_from_consumer(self, consumer: str, limit: int = 100) -> list[StreamEvent]:
        """Events after ``consumer``'s saved offset (does not move it)."""
        plan = ops.read_from_consumer(self._core, self.name, consumer, limit)
        return await self._core.run(*plan)

    async def save_offset(self, consumer: str, offset: int) -> None:
        """Checkpoint ``consumer`` at ``offset``; never moves an offset back."""
        await self._core.run(ops.save_offset(self._core, self.name, consumer, offset))

    async def get_offset(self, consumer: str) -> int:
        """``consumer``'s saved offset; 0 if it never saved one."""
        return await self._core.run(ops.get_offset(self._core, self.name, consumer))

    async def head_offset(self) -> int:
        """The offset of the last event published and committed (0 if none);
        a consumer's lag is ``head_offset() - get_offset(consumer)``. Trimming
        does not lower it."""
        return await self._core.run(ops.head_offset(self._core, self.name))

    async def info(self) -> StreamInfo:
        """This stream as ``Store.list_streams`` shows it: head offset,
        events held, the oldest one, retention settings, and each consumer
        with its saved offset and lag (all zeros and empty for a stream
        never used)."""
        return await self._core.run(*ops.stream_info(self._core, self.name))

    async def trim_to(self, offset: int) -> int:
        """Drop events below ``offset`` (retention); returns how many were dropped."""
        offset = streams.check_offset(offset)
        plan = streams.trim_to(self._core.dialect, self.name, offset)
        return await self._core.run(plan, bulk=True)

    async def set_retention(self, *, max_age: Duration | None, max_events: int | None) -> None:
        """Keep this stream's events at most ``max_age`` (seconds or a
        ``timedelta``; ``None``: any age) and only the newest ``max_events``
        (``None``: any number), for every process. An event goes when either
        limit says so, never past a protected consumer (``protect``);
        housekeeping does the pruning, and offsets are never given out again
        (``head_offset`` stays). Both ``None``: kept until trimmed (the
        default). Raises ``InvalidArgument`` for a non-positive age or a
        negative count."""
        age_us = None if max_age is None else duration_us(max_age, "max_age", allow_zero=False)
        count = None if max_events is None else check_int(max_events, "max_events", lo=0)
        core = self._core
        await core.run(streams.set_retention(core.dialect, self.name, age_us, count))

    async def protect(self, consumer: str) -> None:
        """Hold ``consumer``'s unread events back from retention: no event
        above its saved offset is pruned (all of them, if it never saved)
        until ``unprotect``. ``trim_to`` still drops what it is told to."""
        consumer = check_identifier(consumer, "consumer")
        await self._core.run(streams.protect(self._core.dialect, self.name, consumer))

    async def unprotect(self, consumer: str) -> bool:
        """Let retention prune ``consumer``'s unread events again; ``False``
        if it was not protected."""
        consumer = check_identifier(consumer, "consumer")
        return await self._core.run(streams.unprotect(self._core.dialect, self.name, consumer))

    def subscribe(
        self, consumer: str, *, batch: int = 100, backstop: float = 5.0
    ) -> EventReceiver:
        """A receiver delivering events after ``consumer``'s saved offset, read ``batch`` at a time
        and woken by publishes, looking anyway every ``backstop`` seconds. Use as ``async with``."""
        return EventReceiver(self, check_identifier(consumer, "consumer"), batch, backstop)


class EventReceiver:
    """Delivers a stream's events from a consumer's saved offset onwards.

    ``offset`` is the offset of the last event handed out. Nothing is saved
    unless you call ``save_offset()``: after a crash, delivery resumes from
    the last checkpoint (at-least-once).

    What to do next (hand out, read, wait, retry) is ``subscriber.Subscriber``'s
    decision; this class performs it.
    """

    def __init__(self, stream: Stream, consumer: str, batch: int, backstop: float) -> None:
        self.stream = stream
        self.consumer = consumer
        self._sub = subscriber.Subscriber(batch, backstop)
        self._wakes = stream._core.subscribe(stream_channel(stream.name))

    @property
    def offset(self) -> int:
        """The offset of the last event handed out (what ``save_offset`` saves)."""
        return self._sub.offset

    @offset.setter
    def offset(self, value: int) -> None:
        self._sub.offset = value

    async def __aenter__(self) -> EventReceiver:
        self._sub.entering()
        await self._wakes.__aenter__()
        self._sub.opened()
        try:
            self._sub.start_at(await self.stream.get_offset(self.consumer))
        except BaseException:
            self.close()
            raise
        self.stream._core.telemetry.subscribed(self, self.stream.name, self.consumer)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop receiving: ``recv`` returns ``None`` from now on. Saves nothing."""
        self._sub.close()
        self._wakes.close()
        self.stream._core.telemetry.unsubscribed(self)

    @property
    def closed(self) -> bool:
        """True once closed (by ``close``, the block's end, or the store closing)."""
        return self._sub.is_closed(self._wakes.closed)

    async def _fill(self, read: subscriber.Read) -> bool:
        self._wakes.try_recv()  # consume first: a wake from now on means news
        stream = self.stream
        reading = stream.read_since(read.after, read.limit)
        events = await stream._core.telemetry.receive(stream.name, self.consumer, reading)
        return self._sub.read(events)

    async def recv(self) -> StreamEvent | None:
        """The next event, waiting for one to be published; ``None`` once closed.

        Rides out a database that fails for a while (a dropped connection, a
        restart): the read is retried with backoff, and a warning logged,
        until it succeeds or the receiver closes."""
        sub = self._sub
        sub.receiving()
        while True:
            action = sub.next_action(self._wakes.closed)
            if isinstance(action, subscriber.HandOut):
                return action.event
            if isinstance(action, subscriber.Stop):
                return None
            if isinstance(action, Pause):
                await self.stream._core.runtime.sleep(action.seconds)
                sub.paused()
                continue
            try:
                if isinstance(action, subscriber.Read):
                    await self._fill(action)
                else:
                    await self._wakes.recv_timeout(action.seconds)
                    sub.waited()
            except Closed:
                # Closed meanwhile (receiver or store): that is the ``None``
                # outcome, not an error.
                if self.closed:
                    return None
                raise
            except DatabaseError:
                if not isinstance(action, subscriber.Read):
                    raise
                pause = sub.read_failed()
                log.warning("stream %s, consumer %s: read failed; retrying in %.2f s",
                            self.stream.name, self.consumer, pause, exc_info=True)  # fmt: skip

    async def recv_timeout(self, seconds: float) -> StreamEvent | None:
        """The next event within ``seconds`` or ``None``; raises ``Closed`` when closed."""
        timeout = check_timeout(seconds)
        sub = self._sub
        sub.check_open(self._wakes.closed)
        event = sub.take()
        if event is None and await self._fill(sub.read_request()):
            event = sub.take()
        if event is not None:
            return event
        await self._wakes.recv_timeout(timeout)
        sub.check_open(self._wakes.closed)
        if await self._fill(sub.read_request()):
            return sub.take()
        return None

    def try_recv(self) -> StreamEvent | None:
        """An event already fetched, or ``None`` right now (no IO); raises
        ``Closed`` when closed. ``recv`` fetches in batches of ``batch``."""
        self._sub.check_open(self._wakes.closed)
        return self._sub.take()

    async def read_since(self, offset: int, limit: int = 100) -> list[StreamEvent]:
        """``Stream.read_since`` on this receiver's stream; raises ``Closed`` when closed."""
        self._sub.check_open(self._wakes.closed)
        return await self.stream.read_since(offset, limit)

    async def save_offset(self) -> None:
        """Checkpoint at ``offset`` (the last event handed out)."""
        self._sub.check_open(self._wakes.closed)
        await self.stream.save_offset(self.consumer, self.offset)

    def __aiter__(self) -> EventReceiver:
        return self

    async def __anext__(self) -> StreamEvent:
        event = await self.recv()
        if event is None:
            raise StopAsyncIteration
        return event


__all__ = ["EventReceiver", "Stream"]
