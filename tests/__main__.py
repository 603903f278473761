"""``python -m tests [PYTEST ARGS]``: the README's test command.

Gets the machine ready for the whole suite (``tests/machine.py``: Chromium
for the browser tests, a PostgreSQL server that answers), then runs
``pytest -n 2`` with any arguments given after it (``python -m tests
tests/contract -x`` runs a subset the same way). ``.ci/run`` runs this same
command, so what CI checks and what a new contributor runs cannot drift.
Plain ``pytest -n 2`` runs the same suite on a machine that is ready.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests import machine


def main(argv: list[str]) -> int:
    machine.chromium()
    with machine.postgres() as dsn:
        env = {**os.environ, "ALKSTORE_DSN": dsn}
        command = [sys.executable, "-m", "pytest", "-n", "2", *argv]
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
