"""Testing with alkstore: virtual time for your handlers, and the simulation
machinery that checks alkstore's own claim/ack/lock semantics.

- ``open_simulated()``: a store with the real API on an in-process engine
  whose clock is the event loop's, so under a virtual clock (trio's
  ``MockClock``, or asyncio on ``run_virtual``/``virtual_event_loop``)
  delays, timeouts, TTLs and backoff pass instantly and reproducibly.
  The asyncio helpers need ``pip install 'alkstore[testing]'``.
- ``Simulation``/``run_seed``/``explore``/``shrink``: many virtual actors
  interleaved statement by statement from a seed (or exhaustively), with
  crashes and clock jumps, invariants checked after every step, on SQLite
  (``SqliteSimBackend``, the default) or a live PostgreSQL server
  (``PostgresSimBackend``).

The public names are ``__all__`` (see docs/api.md); the submodules are
internal.
"""

from .choices import PathChooser, ReplayChooser, SeededChooser
from .config import Config
from .explore import Exploration, explore
from .invariants import SimulationFailure
from .shrinking import run_seed, shrink
from .sim_backend import SimBackend
from .sim_postgres import PostgresSimBackend
from .sim_sqlite import SqliteSimBackend
from .stepping import Simulation
from .store import LoopClock, open_simulated
from .virtual_time import run_virtual, virtual_event_loop

__all__ = [
    "Config",
    "Exploration",
    "LoopClock",
    "PathChooser",
    "PostgresSimBackend",
    "ReplayChooser",
    "SeededChooser",
    "SimBackend",
    "Simulation",
    "SimulationFailure",
    "SqliteSimBackend",
    "explore",
    "open_simulated",
    "run_seed",
    "run_virtual",
    "shrink",
    "virtual_event_loop",
]
