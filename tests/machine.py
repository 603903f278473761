"""What the test suite needs from the machine, and how it gets it.

Two things live outside Python's packages: a Chromium for the dashboard's
browser tests and a PostgreSQL server for the Postgres backends. ``python
-m tests`` (the README's test command, which ``.ci/run`` runs too) calls
:func:`chromium` and :func:`postgres` before it starts pytest, so a fresh
machine with nothing but Python and its package manager passes the suite:

- Chromium comes from the system's packages (``apt-get install chromium``,
  as root or through password-less ``sudo``); Playwright's own browser
  download is never used. Where none can be had, the browser tests skip
  with one line saying how to get one, except under ``CI=true``, where
  they fail (``tests/dashboard/test_browser.py``).
- PostgreSQL: the server at ``$ALKSTORE_DSN`` when one is set (never
  touched: a server that does not answer fails the run); otherwise the
  default ``postgresql://postgres@127.0.0.1:5432/test``, started with
  ``pg_ctlcluster`` when it is installed but down; otherwise a throwaway
  cluster of the run's own made with ``initdb`` (the server's packages
  installed first when they are missing and can be), stopped and deleted
  when the run ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_CHROMIUM = "/usr/bin/chromium"


def ci() -> bool:
    """Running under CI (``CI`` set to a true value): what is missing fails."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def chromium_path() -> str:
    """The Chromium the browser tests drive: ``$ALKSTORE_CHROMIUM``, else Debian's."""
    return os.environ.get("ALKSTORE_CHROMIUM") or DEFAULT_CHROMIUM


def chromium_missing() -> str | None:
    """None when the browser tests have a browser; else one line saying how to get one."""
    path = chromium_path()
    if os.access(path, os.X_OK):
        return None
    return (
        f"no Chromium at {path}: `python -m tests` installs it as root "
        "(apt-get install chromium), or set ALKSTORE_CHROMIUM to a Chromium binary"
    )


def say(line: str) -> None:
    print(f"tests: {line}", file=sys.stderr, flush=True)


def _privileged() -> tuple[str, ...] | None:
    """The prefix that runs a command as root here: none needed, sudo, or None."""
    if os.geteuid() == 0:
        return ()
    if (
        shutil.which("sudo")
        and subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0
    ):
        return ("sudo", "-n")
    return None


def _apt_install(*packages: str) -> bool:
    """Install Debian packages; False when this machine cannot (no apt, no root)."""
    prefix = _privileged()
    if prefix is None or not shutil.which("apt-get"):
        return False
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    say(f"installing {' '.join(packages)} from the system's packages")
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        done = subprocess.run([*prefix, *argv], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            say(f"{' '.join(argv[:2])} failed: {done.stderr.strip().splitlines()[-1:]}")
            return False
    return True


def chromium() -> None:
    """Make Chromium available to the browser tests when it can be."""
    if chromium_missing() is None:
        return
    if os.environ.get("ALKSTORE_CHROMIUM"):
        return  # asked for a browser of the user's own: never install another
    # The full package brings a font (fonts-liberation): without one, text
    # renders invisible in the screenshots.
    _apt_install("chromium")
    missing = chromium_missing()
    if missing is not None:
        say(f"the browser tests will {'fail' if ci() else 'skip'}: {missing}")


def answers(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def _wait(dsn: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not answers(dsn):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def _start_system_clusters() -> None:
    """Start the machine's own clusters (Debian's ``pg_ctlcluster``), if any."""
    prefix = _privileged()
    if prefix is None or not shutil.which("pg_ctlcluster"):
        return
    for conf in sorted(glob.glob("/etc/postgresql/*/*/postgresql.conf")):
        version, name = Path(conf).parts[-3:-1]
        say(f"starting PostgreSQL {version}/{name}")
        subprocess.run(
            [*prefix, "pg_ctlcluster", "--skip-systemctl-redirect", version, name, "start"],
            capture_output=True, check=False,
        )  # fmt: skip


def _server_programs() -> bool:
    return bool(os.environ.get("ALKSTORE_PG_BINDIR")) or bool(
        glob.glob("/usr/lib/postgresql/*/bin/initdb")
    )


@contextmanager
def postgres() -> Iterator[str]:
    """A DSN whose server answers, for the length of the block."""
    configured = os.environ.get("ALKSTORE_DSN")
    dsn = configured or DEFAULT_DSN
    if answers(dsn):
        yield dsn
        return
    if configured:
        raise SystemExit(
            f"tests: PostgreSQL at $ALKSTORE_DSN ({configured}) does not answer; "
            "start it, or unset ALKSTORE_DSN to let the tests start one"
        )
    _start_system_clusters()
    if _wait(dsn, 30):
        yield dsn
        return
    if not _server_programs() and not _apt_install("postgresql"):
        raise SystemExit(
            f"tests: no PostgreSQL answers at {dsn} and none can be installed here: "
            "install PostgreSQL's server, or set ALKSTORE_DSN to a server of yours"
        )
    # A new Debian cluster answers on the default port but wants a password
    # and has no `test` database: a throwaway cluster with trust auth is the
    # one that certainly works.
    from tests.postgres.private_cluster import private_cluster

    say("starting a throwaway PostgreSQL cluster for this run")
    with private_cluster(max_connections=200, shared_buffers="128MB") as cluster:
        yield cluster.dsn
