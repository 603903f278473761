"""Seeded runs of the simulation, and shrinking a failing run.

``run_seed`` runs one seed; ``shrink`` replays a failure's choices with
parts dropped or zeroed while the same invariant still breaks, down to the
smallest interleaving it finds.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .choices import SeededChooser
from .config import Config
from .invariants import SimulationFailure
from .sim_backend import SimBackend
from .stepping import Simulation


def run_seed(config: Config, seed: int, *, shrink_failures: bool = False, **kw: Any) -> int:
    """One seeded run; raises ``SimulationFailure`` with the seed and trace.

    With ``shrink_failures`` a failure is first shrunk (see ``shrink``) and
    reported with the smallest interleaving that breaks the same invariant,
    beside the seed that replays the original run.
    """
    try:
        return Simulation(config, SeededChooser(seed), **kw).run()
    except SimulationFailure as failure:
        if not shrink_failures or failure.choices is None:
            raise
        try:
            _, smallest = shrink(
                config, failure.choices, dialect=kw.get("dialect"), backend=kw.get("backend")
            )
        except ValueError:
            # The choices did not fail again (a run that does not replay
            # exactly, see sim_postgres): report the original failure.
            raise failure from None
        raise SimulationFailure(
            failure.violation, failure.trace, seed, failure.choices, smallest.trace
        ) from None


def seeds(start: int = 0) -> Iterator[int]:
    n = start
    while True:
        yield n
        n += 1


def shrink(
    config: Config,
    choices: list[int],
    *,
    dialect: Any = None,
    backend: SimBackend | None = None,
    budget: int = 300,
) -> tuple[list[int], SimulationFailure]:
    """Greedily simplify a failing run's choices (drop or zero them) while
    the same invariant still breaks; returns the smallest failing run found."""
    from .choices import ReplayChooser

    def attempt(candidate: list[int]) -> SimulationFailure | None:
        try:
            Simulation(config, ReplayChooser(candidate), dialect=dialect, backend=backend).run()
        except SimulationFailure as failure:
            return failure
        return None

    def size(failure: SimulationFailure) -> tuple[int, int]:
        # Fewer faults first (a crash or clock jump the failure does not
        # need is the noisiest line of a trace), then fewer steps.
        faults = sum(1 for line in failure.trace if _is_fault(line))
        return faults, len(failure.trace)

    best = attempt(choices)
    if best is None:
        raise ValueError("the given choices do not fail")
    key = _violation_kind(best.violation)
    current = list(choices)
    runs = 0
    changed = True
    while changed and runs < budget:
        changed = False
        for i in range(len(current) - 1, -1, -1):
            head, tail = current[:i], current[i + 1 :]
            candidates = [head + tail, [*head, 0, *tail]]
            if current[i] > 1:
                candidates.append([*head, current[i] - 1, *tail])
            for candidate in candidates:
                if candidate == current or runs >= budget:
                    continue
                runs += 1
                failure = attempt(candidate)
                if (
                    failure is not None
                    and _violation_kind(failure.violation) == key
                    and size(failure) < size(best)
                ):
                    current, best, changed = candidate, failure, True
                    break
            if changed:
                break
    return current, best


def _violation_kind(message: str) -> str:
    """The invariant a violation broke, without its ids, actors and times:
    shrinking must keep breaking the same one."""
    return re.sub(r"[\w-]+#\d+|\[[^\]]*\]|\d+", "_", message)


def _is_fault(line: str) -> bool:
    return line.startswith("CLOCK ") or line.endswith(("CRASH", "CONNECTION DROPPED"))
