"""alkstore as it ships: one version everywhere, a changelog entry for it, an
sdist and a wheel that ``twine check`` accepts, and a wheel that installs
into a clean virtual environment outside the checkout and runs.

docs/releasing.md is the procedure these tests hold a release to.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import alkstore

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


def run(argv: list[str], *, cwd: Path, timeout: float = 600) -> str:
    # Nothing of the checkout may leak in: no PYTHONPATH, a cwd outside it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_version_is_one_and_the_changelog_has_its_entry() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION
    assert alkstore.__version__ == VERSION
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.M)
    assert headings[0] == ("Unreleased", ""), "the changelog opens with [Unreleased]"
    released = [(name, date) for name, date in headings[1:]]
    assert released and released[0][0] == VERSION, (
        f"the newest released entry of CHANGELOG.md is {released[:1]}, not {VERSION}"
    )
    assert all(date for _, date in released), "every released entry has its date"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """``python -m build``: the sdist, and the wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out)
    yield out


@pytest.mark.slow
def test_build_makes_an_sdist_and_a_wheel_that_twine_accepts(dist: Path) -> None:
    sdists = sorted(dist.glob("*.tar.gz"))
    wheels = sorted(dist.glob("*.whl"))
    assert [p.name for p in sdists] == [f"alkstore-{VERSION}.tar.gz"]
    assert [p.name for p in wheels] == [f"alkstore-{VERSION}-py3-none-any.whl"]
    out = run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sdists + wheels)],
              cwd=dist)  # fmt: skip
    assert out.count("PASSED") == 2, out


@pytest.mark.slow
def test_the_wheel_carries_the_package_data_and_nothing_of_the_checkout(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "alkstore/py.typed" in names
    package = ROOT / "alkstore" / "dashboard"
    shipped = [p.relative_to(ROOT).as_posix() for p in package.rglob("*")
               if p.is_file() and p.suffix in (".html", ".css", ".js", ".svg")]  # fmt: skip
    assert len(shipped) > 20
    assert sorted(set(shipped) - names) == []
    assert not any(n.split("/")[0] in ("tests", "bench", "docs", "examples") for n in names)
    metadata = zipfile.ZipFile(wheel).read(f"alkstore-{VERSION}.dist-info/METADATA").decode()
    assert f"Version: {VERSION}" in metadata
    assert "Requires-Python: >=3.11" in metadata
    assert "Provides-Extra: dashboard" in metadata


@pytest.mark.slow
def test_the_wheel_installs_into_a_clean_venv_and_runs(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python, command = venv / "bin" / "python", venv / "bin" / "alkstore"
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(wheel)], cwd=tmp_path)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = run([str(python), "-c", "import alkstore as a; print(a.__file__, a.__version__)"],
                cwd=elsewhere)  # fmt: skip
    path, version = where.split()
    assert Path(path).is_relative_to(venv) and version == VERSION
    demo = run([str(python), "-m", "alkstore", "demo"], cwd=elsewhere)
    assert "demo OK" in demo
    usage = run([str(command), "--help"], cwd=elsewhere)
    assert "Usage: alkstore" in usage and "worker" in usage
