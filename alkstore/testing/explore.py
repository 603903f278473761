"""Exhaustive small-scope checking: every interleaving, not a sample.

Stateless depth-first search over the simulation's choice points: each run
replays a prefix of choices and takes the first option afterwards, recording
each point's width; the next run bumps the deepest choice that has options
left. Every schedule, crash point and clock jump the configuration allows is
run exactly once, each from a fresh database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .choices import Exhausted, PathChooser, next_path
from .config import Config
from .invariants import SimulationFailure
from .sim_backend import SimBackend
from .stepping import Simulation


@dataclass(frozen=True)
class Exploration:
    """What ``explore`` ran: how many ``interleavings``, ``steps`` in all, and the deepest path
    (``max_depth`` choice points)."""
    interleavings: int
    steps: int
    max_depth: int


def explore(
    config: Config,
    *,
    limit: int = 1_000_000,
    dialect: Any = None,
    backend: SimBackend | None = None,
) -> Exploration:
    """Run every interleaving of ``config``; raise ``SimulationFailure`` on the
    first that breaks an invariant (its choices are in the message)."""
    path: list[int] = []
    runs = steps = depth = 0
    while runs < limit:
        chooser = PathChooser(path)
        try:
            steps += Simulation(config, chooser, dialect=dialect, backend=backend).run()
        except SimulationFailure as failure:
            raise SimulationFailure(
                f"{failure}\nchoices: {chooser.taken}", failure.trace, None
            ) from None
        runs += 1
        depth = max(depth, len(chooser.taken))
        try:
            path = next_path(chooser.taken, chooser.widths)
        except Exhausted:
            return Exploration(runs, steps, depth)
    raise RuntimeError(f"more than {limit} interleavings: make the configuration smaller")
