"""The dashboard is an optional extra: alkstore imports without it, and the
dashboard says which extra it needs. That the wheel carries its templates
and static files is checked with the rest of the wheel (tests/release)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .support import child_env


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=60)  # fmt: skip


@pytest.mark.parametrize("blocked", ["starlette", "jinja2", "python_multipart"])
def test_without_the_extra_alkstore_imports_and_the_dashboard_names_it(blocked: str) -> None:
    run = python(
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "import alkstore, alkstore.io_trio, alkstore.cli\n"
        "try:\n"
        "    import alkstore.dashboard\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert run.returncode == 0, run.stderr
    shown = {"python_multipart": "python-multipart"}.get(blocked, blocked)
    assert run.stdout.strip() == (
        "alkstore.dashboard needs the 'dashboard' extra: pip install 'alkstore[dashboard]' "
        f"(missing: {shown})"
    )
