"""``ListenerLink``: the Postgres listener's connect / LISTEN / reconnect
decisions, without a connection."""

from __future__ import annotations

from alkstore.protocol.machines.listener import (
    Connect,
    LinkState,
    Listen,
    ListenerLink,
    Lost,
    Probe,
    Publish,
    Read,
    after_silence,
    quiet_wait,
    reconnect_backoff,
)
from alkstore.protocol.values.backoff import Pause


def link() -> ListenerLink:
    return ListenerLink(reconnect_backoff(0.05, 5.0))


def up(lk: ListenerLink, channels: list[str]) -> Publish:
    """Connect and LISTEN on ``channels``; the Publish that ends it."""
    assert lk.next_action(channels) == Connect()
    lk.connected()
    for channel in channels:
        assert lk.next_action(channels) == Listen(channel)
        lk.listened(channel)
    action = lk.next_action(channels)
    assert isinstance(action, Publish)
    return action


def test_the_first_connection_listens_on_every_channel_then_is_published() -> None:
    lk = link()
    assert up(lk, ["a", "b"]) == Publish(reconnected=False)  # nobody missed anything
    assert lk.state is LinkState.UP
    assert lk.next_action(["a", "b"]) == Read()


def test_a_channel_registered_while_listening_is_listened_on_before_publishing() -> None:
    """Invariant: the connection is handed out only once it LISTENs on every
    channel registered by then: a receiver entering meanwhile relies on it."""
    lk = link()
    lk.next_action(["a"])
    lk.connected()
    assert lk.next_action(["a"]) == Listen("a")
    lk.listened("a")
    assert lk.next_action(["a", "late"]) == Listen("late")
    lk.listened("late")
    assert lk.next_action(["a", "late"]) == Publish(reconnected=False)


def test_a_lost_connection_is_replaced_at_once_and_everyone_is_woken() -> None:
    lk = link()
    up(lk, ["a"])
    lk.lost()
    assert lk.next_action(["a"]) == Connect()  # no pause after a working connection
    assert up(lk, ["a"]) == Publish(reconnected=True)


def test_failed_attempts_pause_doubling_to_the_cap_and_a_success_resets() -> None:
    lk = link()
    pauses = []
    for _ in range(10):
        assert lk.next_action([]) == Connect()
        lk.failed()
        action = lk.next_action([])
        assert isinstance(action, Pause)
        pauses.append(action.seconds)
        lk.paused()
    assert pauses[:4] == [0.05, 0.1, 0.2, 0.4] and pauses[-1] == 5.0
    up(lk, [])
    lk.lost()
    lk.next_action([])
    lk.failed()  # the first failure after a success: the base pause again
    assert lk.next_action([]) == Pause(0.05)


def test_a_failed_listen_drops_the_connection_and_pauses() -> None:
    lk = link()
    lk.next_action(["a"])
    lk.connected()
    assert lk.next_action(["a"]) == Listen("a")
    lk.failed()
    assert lk.state is LinkState.DOWN and lk.next_action(["a"]) == Pause(0.05)
    lk.paused()
    assert up(lk, ["a"]) == Publish(reconnected=False)  # never published before


def test_a_pause_is_never_zero() -> None:
    backoff = reconnect_backoff(1e-9, 1e-9)
    assert backoff.delay_us(1, 0.0) == 1


def test_a_quiet_connection_waits_one_probe_interval_and_then_is_probed() -> None:
    """Invariant: with nothing awaited the reader waits one probe interval,
    then probes; it never declares a connection lost for quiet alone."""
    assert quiet_wait(100.0, None, 5.0) == 5.0
    assert after_silence(still_awaited=False, awaiting=False) == Probe()


def test_an_overdue_answer_means_the_connection_is_lost() -> None:
    """Invariant: an awaited answer (a probe or a LISTEN) bounds the wait by
    its deadline, and one still missing when the wait ends loses the connection."""
    assert quiet_wait(100.0, 103.5, 5.0) == 3.5
    assert quiet_wait(100.0, 99.0, 5.0) <= 0  # overdue already: act at once
    assert after_silence(still_awaited=True, awaiting=True) == Lost()


def test_a_command_sent_during_the_wait_is_waited_for_not_probed_over() -> None:
    """Invariant: when another answer became awaited during the wait, the
    reader neither probes on top of it nor gives up: it waits for its deadline."""
    assert after_silence(still_awaited=False, awaiting=True) is None
