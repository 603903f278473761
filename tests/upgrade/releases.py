"""Earlier releases' code, unpacked from this repository's history.

An upgrade test runs the code that made a database (an earlier schema
version) as a real process beside this code. Each entry is the last commit
whose code wrote that schema version: when a migration is added, add the
commit before it here, as ``tests/engines/test_migrations.py`` pins its text.
"""

from __future__ import annotations

import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from tests import machine

ROOT = Path(__file__).resolve().parents[2]

# schema version -> the last commit whose alkstore wrote it.
CODE_OF_SCHEMA = {
    3: "8d3231279eca26069216d39dc716c969d37fadd0",
    4: "a902ca655c7faa4252e0e4f82b212e925eb51cf3",
    5: "e62f336d1b4979ccb3dd8af26472bde95dac6f81",
    6: "0bf02fb4242b4940536e73e01045a9c6e4e636fd",
    7: "7bbbe974d4dc20e93f070d539d9f8764b83d2f31",
}


def unpack(version: int, into: Path) -> Path:
    """The ``alkstore`` package of schema ``version``'s code under ``into``, for
    ``PYTHONPATH``. Needs the repository's history (a clone, not an sdist);
    without it the test skips, or fails under ``CI=true``."""
    commit = CODE_OF_SCHEMA[version]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "alkstore"],
        capture_output=True, check=False, timeout=60,
    )  # fmt: skip
    if archive.returncode != 0:
        why = (
            f"schema version {version}'s code (commit {commit[:12]}) is not in this "
            "checkout's history: run in a git clone (`git fetch --unshallow` for a shallow one)"
        )
        if machine.ci():
            pytest.fail(f"CI=true: {why}", pytrace=False)
        pytest.skip(why)
    target = into / f"schema-{version}"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target
