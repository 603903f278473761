"""Who decides at a choice point: a seeded RNG, or an exhaustive explorer."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


class Exhausted(Exception):
    """Every path of the exploration has been run."""


class Chooser:
    def choose(self, n: int, label: str) -> int:
        """Pick one of ``n`` options (0 to ``n - 1``) at the choice point ``label``."""
        raise NotImplementedError


class SeededChooser(Chooser):
    """Random choices from one seed: the same seed replays the same run."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self.taken: list[int] = []

    def choose(self, n: int, label: str) -> int:
        pick = 0 if n == 1 else self._rng.randrange(n)
        self.taken.append(pick)
        return pick


class ReplayChooser(Chooser):
    """Replays a list of choices (wrapped into range), then picks 0: used to
    shrink a failing run to a shorter, simpler one."""

    def __init__(self, choices: list[int], seed: int | None = None) -> None:
        self.choices = choices
        self.seed = seed
        self.taken: list[int] = []

    def choose(self, n: int, label: str) -> int:
        depth = len(self.taken)
        pick = self.choices[depth] % n if depth < len(self.choices) else 0
        self.taken.append(pick)
        return pick


@dataclass
class PathChooser(Chooser):
    """Replays a prefix of choices, then takes the first option every time,
    recording how many options each later point had (stateless DFS)."""

    prefix: list[int]
    taken: list[int] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)

    def choose(self, n: int, label: str) -> int:
        depth = len(self.taken)
        pick = self.prefix[depth] if depth < len(self.prefix) else 0
        if pick >= n:  # the run diverged from the recorded path: a bug in the explorer
            raise RuntimeError(f"nondeterministic run: choice {pick} of {n} at {label}")
        self.taken.append(pick)
        self.widths.append(n)
        return pick


def next_path(taken: list[int], widths: list[int]) -> list[int]:
    """The next path in depth-first order after ``taken``; raises ``Exhausted``."""
    for depth in range(len(taken) - 1, -1, -1):
        if taken[depth] + 1 < widths[depth]:
            return [*taken[:depth], taken[depth] + 1]
    raise Exhausted
