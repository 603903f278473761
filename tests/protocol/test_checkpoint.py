"""The checkpoint cadence: commits in, "ask for a checkpoint now" out."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from alkstore.protocol.machines.checkpoint import (
    FIRST_AFTER,
    MAX_COMMITS,
    MIN_COMMITS,
    CheckpointCadence,
)


def asks(cadence: CheckpointCadence, commits: int) -> list[int]:
    """The commit numbers (from 1) after which the cadence asked."""
    return [n for n in range(1, commits + 1) if cadence.committed()]


def test_the_first_ask_comes_after_a_fixed_number_of_commits() -> None:
    every = FIRST_AFTER
    assert asks(CheckpointCadence(1000), 3 * every) == [every, 2 * every, 3 * every]


def test_it_learns_the_frames_a_commit_writes() -> None:
    cadence = CheckpointCadence(1000)
    asks(cadence, FIRST_AFTER)
    cadence.checkpointed(frames=7 * FIRST_AFTER, commits=FIRST_AFTER)  # 7 frames a commit
    assert asks(cadence, 400) == [142, 284]  # 1000 / 7 commits apart


def test_a_target_of_zero_never_asks() -> None:
    assert asks(CheckpointCadence(0), 10_000) == []


@given(
    target=st.integers(1, 100_000),
    reports=st.lists(st.tuples(st.integers(-1, 10**7), st.integers(-5, 10**6)), max_size=20),
)
def test_the_gap_between_asks_stays_within_its_bounds(
    target: int, reports: list[tuple[int, int]]
) -> None:
    """Invariant: whatever checkpoints report, asks come every MIN_COMMITS..MAX_COMMITS commits."""
    cadence = CheckpointCadence(target)
    for frames, commits in reports:
        cadence.checkpointed(frames, commits)
        assert MIN_COMMITS <= cadence.every <= MAX_COMMITS
    gap = cadence.every
    assert asks(cadence, 2 * gap) == [gap, 2 * gap]


@given(per_commit=st.integers(1, 50), target=st.integers(500, 20_000))
def test_asks_come_when_the_log_holds_about_the_target(per_commit: int, target: int) -> None:
    """Invariant: after a report, the frames written between asks are the
    target's within one commit."""
    cadence = CheckpointCadence(target)
    cadence.checkpointed(frames=per_commit * 100, commits=100)
    frames = cadence.every * per_commit
    if MIN_COMMITS < cadence.every < MAX_COMMITS:
        assert target - per_commit < frames <= target
