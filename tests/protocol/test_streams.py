"""``Subscriber``: what an ``EventReceiver`` does next, without IO."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from alkstore.protocol.machines.subscriber import (
    AwaitWake,
    HandOut,
    Read,
    ReceiverState,
    Stop,
    Subscriber,
)
from alkstore.protocol.values.backoff import Pause
from alkstore.protocol.values.errors import Closed, InvalidArgument
from alkstore.protocol.values.types import StreamEvent

CREATED = datetime(2024, 1, 1, tzinfo=UTC)


def event(offset: int) -> StreamEvent:
    return StreamEvent(offset, "s", None, {"n": offset}, CREATED)


def open_at(offset: int = 0, batch: int = 2, backstop: float = 5.0) -> Subscriber:
    sub = Subscriber(batch, backstop)
    sub.entering()
    sub.opened()
    sub.start_at(offset)
    sub.receiving()
    return sub


def test_it_reads_after_the_saved_offset_and_hands_out_in_order() -> None:
    sub = open_at(10)
    assert sub.next_action(False) == Read(after=10, limit=2)
    assert sub.read([event(11), event(12)])
    assert sub.next_action(False) == HandOut(event(11))
    assert sub.offset == 11  # what save_offset saves: the last handed out
    assert sub.next_action(False) == HandOut(event(12))
    assert sub.next_action(False) == Read(after=12, limit=2)  # the next batch


def test_an_empty_read_waits_for_a_wake_or_the_backstop_then_reads() -> None:
    sub = open_at(backstop=5.0)
    sub.read([])
    assert sub.next_action(False) == AwaitWake(5.0)
    sub.waited()
    assert sub.next_action(False) == Read(after=0, limit=2)


def test_a_failed_read_pauses_with_backoff_then_reads_again() -> None:
    """Invariant: consecutive failed reads pause 50 ms doubling to 5 s; a
    read that answers (events or none) starts over, and so does each recv."""
    sub = open_at()
    pauses = []
    for _ in range(10):
        pauses.append(sub.read_failed())
        assert sub.next_action(False) == Pause(pauses[-1])
        sub.paused()
        assert isinstance(sub.next_action(False), Read)
    assert pauses[:3] == [0.05, 0.1, 0.2] and pauses[-1] == 5.0
    sub.read([])
    assert sub.read_failed() == 0.05
    sub.read_failed()
    sub.receiving()
    assert sub.read_failed() == 0.05


def test_closing_stops_delivery_even_with_events_read() -> None:
    sub = open_at()
    sub.read([event(1)])
    assert sub.next_action(source_closed=True) == Stop()  # the wake source went
    sub.close()
    assert sub.state is ReceiverState.CLOSED
    assert sub.next_action(False) == Stop()
    with pytest.raises(Closed, match="is closed"):
        sub.check_open(False)


def test_a_receiver_is_entered_once_and_used_only_inside() -> None:
    sub = Subscriber(1, 0.0)
    assert sub.next_action(False) == Stop()  # recv before entering: None
    with pytest.raises(Closed, match="outside its 'async with'"):
        sub.check_open(False)
    sub.entering()
    sub.opened()
    sub.check_open(False)
    with pytest.raises(Closed, match="entered once"):
        sub.entering()
    sub.close()
    with pytest.raises(Closed, match="entered once"):
        sub.entering()


def test_take_hands_out_only_what_was_read() -> None:
    sub = open_at()
    assert sub.take() is None
    sub.read([event(1)])
    assert sub.take() == event(1) and sub.offset == 1
    assert sub.take() is None


@pytest.mark.parametrize(("batch", "backstop"), [(0, 1.0), (1, -1.0), (1, float("nan"))])
def test_settings_are_checked(batch: int, backstop: float) -> None:
    with pytest.raises(InvalidArgument):
        Subscriber(batch, backstop)
