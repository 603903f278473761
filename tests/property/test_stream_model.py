"""Streams on a real store agree with the reference model, step by step.

A Hypothesis state machine publishes (with and without a key) to three
streams, reads from random offsets with random limits, reads from and saves
consumer offsets (lower ones included, which must not move them back), trims,
and runs transactions that publish several events and save an offset, then
commit or roll back, while the clock moves; it sets retention (max age,
max events), protects and unprotects consumers, and prunes. Every answer
(offsets issued, events read with their offsets, stream names, keys,
payloads and creation times, trim and prune counts, saved offsets) must
equal ``StreamModel``'s, and after every step each stream's full contents,
every saved offset and the head offset must too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from alkstore.api.stream import Stream
from alkstore.protocol.values.errors import InvalidArgument, InvalidName
from alkstore.protocol.values.types import StreamEvent
from tests.backends import BACKENDS, Backend, selected_backends
from tests.model import ModelError, StreamModel

from ._harness import US, StoreMachine, machine_settings, run_machine

STREAMS = ("orders", "audit", "clicks")
KEYS = ("k1", "k2", "k3")
CONSUMERS = ("c1", "c2")
EVERYTHING = 10_000  # a limit above any stream's length in an example

stream_names = st.sampled_from(STREAMS)
consumers = st.sampled_from(CONSUMERS)
maybe_keys = st.one_of(st.none(), st.sampled_from(KEYS))
limits = st.one_of(st.integers(1, 4), st.just(100))
payloads = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.text(max_size=6),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
# One publish inside a transaction: (stream, key or None, payload).
tx_publishes = st.lists(st.tuples(stream_names, maybe_keys, payloads), min_size=1, max_size=4)


class _Rollback(Exception):
    """Raised inside ``store.transaction()`` to roll it back."""


class StreamMachine(StoreMachine):
    def __init__(self, backend: Backend) -> None:
        super().__init__(backend)
        self.model = StreamModel()
        self.streams: dict[str, Stream] = {name: self.store.stream(name) for name in STREAMS}

    def _offsets(self, data: st.DataObject, stream: str) -> int:
        """An offset around the stream's range: 0, below, at or past the last one."""
        return data.draw(st.integers(0, self.model.last_offset(stream) + 2))

    def _publish(self, stream: str, key: str | None, payload: Any) -> None:
        s = self.streams[stream]
        if key is None:
            got = self.call(s.publish, payload)
        else:
            got = self.call(s.publish_with_key, key, payload)
        want = self.model.publish(stream, payload, now_us=self.now, key=key)
        assert got == want

    @rule(stream=stream_names, payload=payloads)
    def publish(self, stream: str, payload: Any) -> None:
        """publish returns the stream's next offset (dense, never reused)."""
        self._publish(stream, None, payload)

    @rule(stream=stream_names, key=st.sampled_from(KEYS), payload=payloads)
    def publish_with_key(self, stream: str, key: str, payload: Any) -> None:
        """publish_with_key returns the next offset and stores the key."""
        self._publish(stream, key, payload)

    @rule(stream=stream_names, limit=limits, data=st.data())
    def read_since(self, stream: str, limit: int, data: st.DataObject) -> None:
        """read_since(offset, limit) gives the model's events above offset, ascending."""
        offset = self._offsets(data, stream)
        got = self.call(self.streams[stream].read_since, offset, limit)
        assert got == self.model.read_since(stream, offset, limit)

    @rule(stream=stream_names, consumer=consumers, limit=limits)
    def read_from_consumer(self, stream: str, consumer: str, limit: int) -> None:
        """read_from_consumer reads after the saved offset and does not move it."""
        got = self.call(self.streams[stream].read_from_consumer, consumer, limit)
        assert got == self.model.read_from_consumer(stream, consumer, limit)
        assert self.call(self.streams[stream].get_offset, consumer) == self.model.get_offset(
            stream, consumer
        )

    @rule(stream=stream_names, consumer=consumers, data=st.data())
    def save_offset(self, stream: str, consumer: str, data: st.DataObject) -> None:
        """save_offset keeps the maximum: a lower offset never moves it back."""
        offset = self._offsets(data, stream)
        before = self.model.get_offset(stream, consumer)
        self.call(self.streams[stream].save_offset, consumer, offset)
        self.model.save_offset(stream, consumer, offset)
        got = self.call(self.streams[stream].get_offset, consumer)
        assert got == self.model.get_offset(stream, consumer) == max(before, offset)

    @rule(stream=stream_names, consumer=consumers)
    def get_offset(self, stream: str, consumer: str) -> None:
        """get_offset is the saved offset, 0 when never saved."""
        got = self.call(self.streams[stream].get_offset, consumer)
        assert got == self.model.get_offset(stream, consumer)

    @rule(stream=stream_names, data=st.data())
    def trim_to(self, stream: str, data: st.DataObject) -> None:
        """trim_to drops the events below offset and reports how many went."""
        offset = self._offsets(data, stream)
        got = self.call(self.streams[stream].trim_to, offset)
        assert got == self.model.trim_to(stream, offset)

    @rule(
        publishes=tx_publishes,
        save=st.one_of(st.none(), st.tuples(stream_names, consumers, st.integers(0, 12))),
        commit=st.booleans(),
    )
    def transaction(
        self,
        publishes: list[tuple[str, str | None, Any]],
        save: tuple[str, str, int] | None,
        commit: bool,
    ) -> None:
        """A transaction's publishes get the model's offsets; a commit keeps them
        and the saved offset, a rollback leaves no event, offset or checkpoint."""

        async def body() -> list[int]:
            issued: list[int] = []
            try:
                async with self.store.transaction() as tx:
                    for stream, key, payload in publishes:
                        if key is None:
                            issued.append(await tx.publish(stream, payload))
                        else:
                            issued.append(await tx.publish_with_key(stream, key, payload))
                    if save is not None:
                        await tx.save_offset(*save)
                    if not commit:
                        raise _Rollback
            except _Rollback:
                pass
            return issued

        got = self.call(body)
        trial = self.model.snapshot()
        want = [trial.publish(s, p, now_us=self.now, key=k) for s, k, p in publishes]
        if save is not None:
            trial.save_offset(*save)
        assert got == want
        if commit:
            self.model = trial

    @rule(stream=stream_names, consumer=consumers, which=st.integers(0, 4))
    def invalid_argument(self, stream: str, consumer: str, which: int) -> None:
        """A negative offset, a zero limit or an empty key is refused; nothing changes."""
        s = self.streams[stream]
        calls: list[tuple[Any, tuple[Any, ...], type[Exception]]] = [
            (s.read_since, (-1, 10), InvalidArgument),
            (s.read_since, (0, 0), InvalidArgument),
            (s.save_offset, (consumer, -1), InvalidArgument),
            (s.trim_to, (-1,), InvalidArgument),
            (s.publish_with_key, ("", {"x": 1}), InvalidName),
        ]
        fn, args, error = calls[which]
        with pytest.raises(error):
            self.call(fn, *args)
        model_calls: list[Any] = [
            lambda: self.model.read_since(stream, -1, 10),
            lambda: self.model.read_since(stream, 0, 0),
            lambda: self.model.save_offset(stream, consumer, -1),
            lambda: self.model.trim_to(stream, -1),
            lambda: self.model.publish(stream, {"x": 1}, now_us=self.now, key=""),
        ]
        with pytest.raises(ModelError):
            model_calls[which]()

    @rule(
        stream=stream_names,
        age=st.one_of(st.none(), st.integers(1, 30 * US)),
        count=st.one_of(st.none(), st.integers(0, 4)),
    )
    def set_retention(self, stream: str, age: int | None, count: int | None) -> None:
        """A stream's retention is stored; nothing goes until a prune."""
        s = self.streams[stream]
        self.call(lambda: s.set_retention(
            max_age=None if age is None else timedelta(microseconds=age), max_events=count
        ))  # fmt: skip
        self.model.set_retention(stream, age, count)

    @rule(stream=stream_names, consumer=consumers, protect=st.booleans())
    def protect(self, stream: str, consumer: str, protect: bool) -> None:
        """protect holds a consumer's unread events; unprotect says whether it did."""
        s = self.streams[stream]
        if protect:
            self.call(s.protect, consumer)
            self.model.protect(stream, consumer)
        else:
            assert self.call(s.unprotect, consumer) == self.model.unprotect(stream, consumer)

    @rule()
    def prune(self) -> None:
        """A prune drops what the model's retention drops, and only that."""
        assert self.call(self.store.prune).events == self.model.prune(self.now)

    @invariant()
    def contents_agree(self) -> None:
        """Every stream's kept events, head offset and every saved offset equal the model's."""
        for name, s in self.streams.items():
            events: list[StreamEvent] = self.call(s.read_since, 0, EVERYTHING)
            assert events == self.model.read_since(name, 0, EVERYTHING)
            assert self.call(s.head_offset) == self.model.last_offset(name)
            for consumer in CONSUMERS:
                assert self.call(s.get_offset, consumer) == self.model.get_offset(name, consumer)


@pytest.mark.parametrize("backend_id", selected_backends())
def test_streams_match_model(backend_id: str) -> None:
    backend = BACKENDS[backend_id]
    run_machine(
        lambda: StreamMachine(backend),
        machine_settings(backend, max_examples=60, steps=30),
    )
