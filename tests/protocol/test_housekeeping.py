"""protocol/housekeeping.py and the pure decisions of a pass: when the
background loop prunes, where a stream's retention cuts, and how the lock
token floor rises.

Invariants: passes come on average every interval, each wait within 25% of
it; after a failure the retry comes sooner, never later than an interval; a
stream's cut honours either limit and never goes below 0; the token floor
only rises, to the highest token ever pruned.
"""

from __future__ import annotations

import pytest

from alkstore.protocol.machines.housekeeping import HousekeepingLoop
from alkstore.protocol.plans.housekeeping import PRUNE_BATCH, full
from alkstore.protocol.plans.locks import raised_floor, token_floor
from alkstore.protocol.plans.streams import Retained, retention_cut
from alkstore.protocol.values.errors import CodecError, InvalidArgument


def test_waits_spread_within_a_quarter_of_the_interval() -> None:
    loop = HousekeepingLoop(10.0)
    waits = [loop.next_wait(draw / 100) for draw in range(100)]
    assert min(waits) == 7.5 and max(waits) < 12.5
    assert sum(waits) / len(waits) == pytest.approx(10.0, abs=0.1)


def test_a_failed_pass_is_retried_sooner_and_growing_up_to_the_interval() -> None:
    loop = HousekeepingLoop(10.0)
    assert loop.failed() == 1.0 and loop.first_failure
    assert [loop.failed() for _ in range(5)] == [2.0, 4.0, 8.0, 10.0, 10.0]
    assert not loop.first_failure
    loop.next_wait(0.5)  # a pass went through: start over
    assert loop.failed() == 1.0 and loop.first_failure
    short = HousekeepingLoop(0.05)  # never later than the interval
    assert short.failed() == 0.05


@pytest.mark.parametrize("interval", [0, -1, float("nan"), "10", None])
def test_bad_intervals_are_refused(interval: object) -> None:
    with pytest.raises(InvalidArgument):
        HousekeepingLoop(interval)  # type: ignore[arg-type]


def test_a_batch_is_full_at_its_limit() -> None:
    assert full(PRUNE_BATCH) and not full(PRUNE_BATCH - 1) and not full(0)


def stream(last: int, age: int | None = None, count: int | None = None) -> Retained:
    return Retained("s", last, age, count)


def test_the_cut_takes_whichever_limit_drops_more() -> None:
    assert retention_cut(stream(10, count=3), None) == 7
    assert retention_cut(stream(10, count=0), None) == 10
    assert retention_cut(stream(2, count=5), None) == 0  # fewer events than the limit
    assert retention_cut(stream(10, age=5), 4) == 3  # everything before the first young one
    assert retention_cut(stream(10, age=5), None) == 10  # none is young: all go
    assert retention_cut(stream(10, age=5), 1) == 0
    assert retention_cut(stream(10, age=5, count=8), 4) == 3
    assert retention_cut(stream(10, age=5, count=2), 4) == 8
    assert retention_cut(stream(10), None) == 0  # no retention: nothing


def test_the_token_floor_only_rises_to_the_highest_token_pruned() -> None:
    assert raised_floor(0, [3, 7, 5]) == 7
    assert raised_floor(7, [2, 7]) is None
    assert raised_floor(7, []) is None
    assert token_floor(None) == 0
    assert token_floor(("42",)) == 42
    for bad in [("x",), ("-1",), (42,), ("1" * 19,), ("4", "2")]:
        with pytest.raises(CodecError):
            token_floor(bad)
