"""The dashboard is an optional extra: alkstore imports without it, the
dashboard says which extra it needs, and the wheel carries its templates
and static files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .support import ROOT, child_env


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


@pytest.mark.slow
def test_the_wheel_carries_the_templates_and_static_files(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path),
         str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("alkstore-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "alkstore" / "dashboard"
    shipped = [p.relative_to(ROOT).as_posix() for p in package.rglob("*")
               if p.is_file() and p.suffix in (".html", ".css", ".js", ".svg")]  # fmt: skip
    assert len(shipped) > 20
    assert sorted(set(shipped) - names) == []
