"""Without ``instrument``, alkstore imports no OpenTelemetry module: not
when OpenTelemetry cannot be imported at all (the extra not installed), and
not when it is installed either. Every mechanism runs in a process of its
own (``zero_imports.py``), on every backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import BACKENDS, Backend, selected_backends

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def run(backend: Backend, location: str, *flags: str) -> dict[str, object]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "tests.otel.zero_imports", backend.engine, backend.driver,
         location, *flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


# Not the ``backend`` fixture: this test itself runs no event loop.
@pytest.mark.parametrize("name", selected_backends())
@pytest.mark.parametrize("refused", [True, False], ids=["otel-unimportable", "otel-installed"])
def test_an_uninstrumented_store_imports_no_opentelemetry(
    name: str, refused: bool, tmp_path: Path
) -> None:
    backend = BACKENDS[name]
    result = run(backend, backend.new_location(tmp_path), *(["--refuse"] if refused else []))
    assert result["loaded"] == []
    if refused:
        # Asking for it is the one way in, and says what to install.
        assert "pip install 'alkstore[otel]'" in str(result["import alkstore.otel"])
    else:
        assert result["import alkstore.otel"] == "imported"
