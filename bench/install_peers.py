"""Install the peer libraries for ``bench/suite.py`` into ``bench/.peers``.

    python bench/install_peers.py

A virtual environment of their own (their dependencies never meet
alkstore's), from PyPI, pinned in ``bench/peers.txt``, plus alkstore itself
(editable) so the same interpreter can run every workload.

honker has no wheel this machine's pip accepts: its only Linux wheel (0.5.0)
is tagged manylinux_2_38 while Debian 12 has glibc 2.36, and its sdist
builds Rust crates from crates.io, which is not reachable here. Its native
extension needs no more than glibc 2.34 (objdump -T); only the SQLite
library it bundles needs 2.38. So the wheel is installed under a
manylinux_2_34 tag and the bundled libsqlite3 is replaced by a link to the
system's (SQLite 3.40.1, the same library Python's sqlite3 and alkstore use
here, so the comparison is on one SQLite).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".peers"
HONKER_WHEEL = (
    "https://files.pythonhosted.org/packages/1d/d0/"
    "fe00b8f44e03c33aa6408c9defd902a47221fbd18045d155fbbac40b8736/"
    "honker-0.5.0-cp311-abi3-manylinux_2_38_x86_64.whl"
)
SYSTEM_SQLITE = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"


def python() -> Path:
    return VENV / "bin" / "python"


def run(*argv: str) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True)


def install_honker() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        original = Path(tmp) / HONKER_WHEEL.rsplit("/", 1)[1]
        urllib.request.urlretrieve(HONKER_WHEEL, original)
        retagged = Path(tmp) / original.name.replace("manylinux_2_38", "manylinux_2_34")
        shutil.copy(original, retagged)
        run(str(python()), "-m", "pip", "install", "-q", "--no-deps", str(retagged))
    site = subprocess.run(
        [str(python()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    for bundled in glob.glob(os.path.join(site, "honker.libs", "libsqlite3-*.so*")):
        os.remove(bundled)
        os.symlink(SYSTEM_SQLITE, bundled)
    run(str(python()), "-c", "import honker, sqlite3; print('honker ok')")


def main() -> None:
    if not python().exists():
        run(sys.executable, "-m", "venv", str(VENV))
    run(str(python()), "-m", "pip", "install", "-q", "-r", str(HERE / "peers.txt"))
    run(str(python()), "-m", "pip", "install", "-q", "-e", str(HERE.parent))
    install_honker()
    print(f"peers installed in {VENV}")


if __name__ == "__main__":
    main()
