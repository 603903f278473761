"""This release's code playing the next one: ``actor.py`` with a claim
generation one higher, as a release that adds a rule every claim must obey
will have (``tests/upgrade/test_claim_generations.py``). Opening a store for
writing records the higher generation, as that release's migration will."""

from __future__ import annotations

import runpy
from pathlib import Path

import alkstore.protocol.values.generation as generation

generation.CLAIM_GENERATION += 1
runpy.run_path(str(Path(__file__).with_name("actor.py")), run_name="__main__")
