"""``Stream`` and ``EventReceiver``: a durable log with explicit offsets."""

from __future__ import annotations

import logging
from collections import deque
from types import TracebackType
from typing import TYPE_CHECKING

from ..protocol import codec, streams
from ..protocol.backoff import ErrorBackoff
from ..protocol.errors import Closed, DatabaseError
from ..protocol.names import check_identifier, check_key, stream_channel
from ..protocol.queues import check_limit
from ..protocol.timeconv import US_PER_S
from ..protocol.types import StreamEvent
from ..runner.timeouts import check_timeout
from .queue import INLINE_MAX
from .wakes import WakeReceiver

if TYPE_CHECKING:
    from .store import Store

log = logging.getLogger("alkstore.stream")


class Stream:
    """A named, append-only log. Offsets start at 1 and are dense per stream."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name

    def __repr__(self) -> str:
        return f"Stream({self.name!r})"

    async def publish(self, payload: codec.JSON) -> int:
        return await self._publish(None, payload)

    async def publish_with_key(self, key: str, payload: codec.JSON) -> int:
        return await self._publish(check_key(key), payload)

    async def _publish(self, key: str | None, payload: codec.JSON) -> int:
        store = self.store
        text = codec.encode(payload)
        plan = streams.publish(store.dialect, self.name, key, text, store.origin, store.now_us())
        return await store.run(plan)

    async def read_since(self, offset: int, limit: int = 100) -> list[StreamEvent]:
        """Events with offsets above ``offset``, ascending, at most ``limit``."""
        offset, limit = streams.check_offset(offset), check_limit(limit)
        plan = streams.read_since(self.store.dialect, self.name, offset, limit)
        return await self.store.run(plan, bulk=limit > INLINE_MAX)

    async def read_from_consumer(self, consumer: str, limit: int = 100) -> list[StreamEvent]:
        """Events after ``consumer``'s saved offset (does not move it)."""
        consumer = check_identifier(consumer, "consumer")
        limit = check_limit(limit)
        plan = streams.read_from_consumer(self.store.dialect, self.name, consumer, limit)
        return await self.store.run(plan, bulk=limit > INLINE_MAX)

    async def save_offset(self, consumer: str, offset: int) -> None:
        """Checkpoint ``consumer`` at ``offset``; never moves an offset back."""
        consumer = check_identifier(consumer, "consumer")
        offset = streams.check_offset(offset)
        await self.store.run(streams.save_offset(self.store.dialect, self.name, consumer, offset))

    async def get_offset(self, consumer: str) -> int:
        consumer = check_identifier(consumer, "consumer")
        plan = streams.get_offset(self.store.dialect, self.name, consumer)
        return await self.store.run(plan)

    async def trim_to(self, offset: int) -> int:
        """Drop events below ``offset`` (retention); returns how many were dropped."""
        offset = streams.check_offset(offset)
        plan = streams.trim_to(self.store.dialect, self.name, offset)
        return await self.store.run(plan, bulk=True)

    def subscribe(
        self, consumer: str, *, batch: int = 100, backstop: float = 5.0
    ) -> EventReceiver:
        return EventReceiver(self, check_identifier(consumer, "consumer"), batch, backstop)


class EventReceiver:
    """Delivers a stream's events from a consumer's saved offset onwards.

    ``offset`` is the offset of the last event handed out. Nothing is saved
    unless you call ``save_offset()``: after a crash, delivery resumes from
    the last checkpoint (at-least-once).
    """

    def __init__(self, stream: Stream, consumer: str, batch: int, backstop: float) -> None:
        self.stream = stream
        self.consumer = consumer
        self._batch = check_limit(batch, "batch")
        self._backstop = check_timeout(backstop)
        self._wakes = stream.store.subscribe_channel(stream_channel(stream.name))
        self._buffer: deque[StreamEvent] = deque()
        self._fetched = 0
        self.offset = 0
        self._state = "new"

    async def __aenter__(self) -> EventReceiver:
        if self._state != "new":
            raise Closed("an EventReceiver can be entered once")
        await self._wakes.__aenter__()
        self._state = "open"
        try:
            self.offset = self._fetched = await self.stream.get_offset(self.consumer)
        except BaseException:
            self.close()
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._state = "closed"
        self._wakes.close()

    @property
    def closed(self) -> bool:
        return self._state != "open" or self._wakes.closed

    def _check_open(self) -> None:
        if self._state == "new":
            raise Closed("EventReceiver used outside its 'async with' block")
        if self.closed:
            raise Closed("event receiver is closed")

    def _hand_out(self) -> StreamEvent:
        event = self._buffer.popleft()
        self.offset = event.offset
        return event

    async def _fill(self) -> bool:
        self._wakes.try_recv()  # consume first: a wake from now on means news
        events = await self.stream.read_since(self._fetched, self._batch)
        if events:
            self._buffer.extend(events)
            self._fetched = events[-1].offset
        return bool(events)

    async def recv(self) -> StreamEvent | None:
        """The next event, waiting for one to be published; ``None`` once closed.

        Rides out a database that fails for a while (a dropped connection, a
        restart): the read is retried with backoff, and a warning logged,
        until it succeeds or the receiver closes."""
        retry = ErrorBackoff()
        while not self.closed:
            if self._buffer:
                return self._hand_out()
            try:
                found = await self._fill()
            except Closed:
                if self._state != "open" or self._wakes.closed:
                    return None
                raise
            except DatabaseError:
                pause = retry.failed() / US_PER_S
                log.warning("stream %s, consumer %s: read failed; retrying in %.2f s",
                            self.stream.name, self.consumer, pause, exc_info=True)  # fmt: skip
                await self.stream.store.runtime.sleep(pause)
                continue
            retry.succeeded()
            if found:
                continue
            try:
                await self._wakes.recv_timeout(self._backstop)
            except Closed:
                # Closed while waiting (receiver or store): that is the
                # ``None`` outcome, not an error.
                if self._state != "open" or self._wakes.closed:
                    return None
                raise
        return None

    async def recv_timeout(self, seconds: float) -> StreamEvent | None:
        """The next event within ``seconds`` or ``None``; raises ``Closed`` when closed."""
        timeout = check_timeout(seconds)
        self._check_open()
        if self._buffer or await self._fill():
            return self._hand_out()
        await self._wakes.recv_timeout(timeout)
        self._check_open()
        if await self._fill():
            return self._hand_out()
        return None

    def try_recv(self) -> StreamEvent | None:
        """An event already fetched, or ``None`` right now (no IO); raises
        ``Closed`` when closed. ``recv`` fetches in batches of ``batch``."""
        self._check_open()
        return self._hand_out() if self._buffer else None

    async def read_since(self, offset: int, limit: int = 100) -> list[StreamEvent]:
        self._check_open()
        return await self.stream.read_since(offset, limit)

    async def save_offset(self) -> None:
        """Checkpoint at ``offset`` (the last event handed out)."""
        self._check_open()
        await self.stream.save_offset(self.consumer, self.offset)

    def __aiter__(self) -> EventReceiver:
        return self

    async def __anext__(self) -> StreamEvent:
        event = await self.recv()
        if event is None:
            raise StopAsyncIteration
        return event


__all__ = ["EventReceiver", "Stream", "WakeReceiver"]
