"""A throwaway PostgreSQL cluster of the test's own, for tests that restart
the server or fill its connection slots.

Those tests must not do it to the shared server (``ALKSTORE_DSN``): the
rest of the suite runs against it at the same time (``pytest -n``), and its
tests would fail for a restart that is not theirs. The cluster is made with
the machine's own ``initdb`` (``ALKSTORE_PG_BINDIR``, else the newest
``/usr/lib/postgresql/*/bin``), listens on 127.0.0.1 on a free port with
trust auth, and is stopped and deleted when the block ends. PostgreSQL
refuses to run as root, so as root its programs run as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg


def _bindir() -> Path:
    configured = os.environ.get("ALKSTORE_PG_BINDIR")
    if configured:
        return Path(configured)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3])
    )
    if not found:
        raise AssertionError(
            "no PostgreSQL server programs (initdb) found: install the server, "
            "or set ALKSTORE_PG_BINDIR"
        )
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Cluster:
    bindir: Path
    datadir: Path
    port: int
    as_postgres: tuple[str, ...]

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str, timeout: float = 120) -> None:
        subprocess.run(
            [*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.datadir),
             "-l", str(self.datadir / "server.log"), "-w", *args],
            check=True, capture_output=True, timeout=timeout,
        )  # fmt: skip

    def restart(self) -> float:
        """Restart the server (fast shutdown); the time.time() it answered again."""
        self.ctl("restart", "-m", "fast")
        wait_for_server(self.dsn)
        return time.time()


def wait_for_server(dsn: str, timeout: float = 60.0) -> None:
    """Return once the server at ``dsn`` answers a query."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def private_cluster(
    *, max_connections: int = 30, shared_buffers: str = "16MB"
) -> Iterator[Cluster]:
    """A new cluster, running for the block, then stopped and deleted."""
    bindir = _bindir()
    root = os.geteuid() == 0
    as_postgres: tuple[str, ...] = ("runuser", "-u", "postgres", "--") if root else ()
    datadir = Path(tempfile.mkdtemp(prefix="alkstore-pg-"))
    if root:
        shutil.chown(datadir, "postgres", "postgres")
    cluster = Cluster(bindir, datadir, _free_port(), as_postgres)
    try:
        subprocess.run(
            [*as_postgres, str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres",
             "--auth=trust", "--no-sync", "-E", "UTF8"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        settings = (
            f"port = {cluster.port}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{datadir}'\nmax_connections = {max_connections}\n"
            f"fsync = off\nshared_buffers = {shared_buffers}\n"
        )
        with open(datadir / "postgresql.conf", "a") as conf:
            conf.write(settings)
        cluster.ctl("start")
        wait_for_server(cluster.dsn)
        yield cluster
    finally:
        with suppress(subprocess.CalledProcessError):  # never started, or already down
            cluster.ctl("stop", "-m", "immediate", timeout=60)
        shutil.rmtree(datadir, ignore_errors=True)
