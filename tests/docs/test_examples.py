"""Every ```python block of README.md and docs/*.md runs as written.

The rules (what a block is, ``<!-- continues -->``, test-file blocks, the
Postgres database) are in tests/docs/blocks.py. A program runs in-process
as ``__main__`` in a temporary directory of its own; the test files of a
page run under ``pytest`` in a subprocess, with the page's config blocks and
nothing of this repository's.
"""

from __future__ import annotations

import faulthandler
import os
import re
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.backends import PG_DSN

from .blocks import PYTHON_ALIASES, ROOT, Block, Program, all_blocks, file_blocks, pages, programs

BLOCKS = all_blocks()
PROGRAMS = programs(BLOCKS)
TEST_FILES = file_blocks(BLOCKS)
TEST_FILE_BLOCKS = [
    b for bs in TEST_FILES.values() for b in bs if (b.file_name or "").startswith("test_")
]
DOCS_DB_PREFIX = "alk_docs_"
PROGRAM_TIMEOUT = 120  # seconds; each program takes well under one


def test_the_collector_finds_every_python_block() -> None:
    """Counted independently of the parser: every ```python fence (indented
    or not) is a program's part or a test file, so none is left out, and a
    pattern change cannot silently collect nothing."""
    fences = sum(len(re.findall(r"^ *```python *$", p.read_text(), re.M)) for p in pages())
    collected = sum(len(p.parts) for p in PROGRAMS) + sum(
        1 for bs in TEST_FILES.values() for b in bs if b.lang == "python"
    )
    assert fences > 50
    assert collected == fences
    assert len({p.id for p in PROGRAMS}) == len(PROGRAMS), "two programs share a name"
    assert {p.page for p in BLOCKS if p.lang == "python"} >= {"README.md", "docs/testing.md"}


def test_no_python_hides_under_another_fence() -> None:
    hidden = [b.where for b in BLOCKS if b.lang in PYTHON_ALIASES]
    assert hidden == [], "fence Python as ```python (it then runs) or as ```text"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session")
def docs_database() -> Iterator[str]:
    """A database of this session's own for the programs that use Postgres
    (they create tables and use alkstore's default schema); dropped at the
    end, with those of dead sessions."""
    name = f"{DOCS_DB_PREFIX}{os.getpid()}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        for (stale,) in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'alk\\_docs\\_%'"
        ).fetchall():
            pid = stale.removeprefix(DOCS_DB_PREFIX)
            if stale == name or (pid.isdigit() and not _alive(int(pid))):
                conn.execute(f'DROP DATABASE IF EXISTS "{stale}" WITH (FORCE)')
        # FILE_COPY (PostgreSQL 15+): creating and dropping take milliseconds
        # instead of a WAL-logged copy and a checkpoint.
        fast = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0{fast}')
    try:
        yield make_conninfo(PG_DSN, dbname=name)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _empty(dsn: str) -> None:
    """Drop every schema a program made (alkstore's, the tables in public)."""
    assert conninfo_to_dict(dsn)["dbname"].startswith(DOCS_DB_PREFIX)
    with psycopg.connect(dsn, autocommit=True) as conn:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%'"
            " AND nspname <> 'information_schema'"
        ).fetchall()
        for (schema,) in schemas:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.execute("CREATE SCHEMA public")


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.id for p in PROGRAMS])
def test_program_runs(
    program: Program,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    script = tmp_path / "example.py"
    script.write_text(program.code)
    dsn = None
    if program.uses_postgres:
        dsn = request.getfixturevalue("docs_database")
        monkeypatch.setenv("ALKSTORE_DSN", dsn)
    monkeypatch.chdir(tmp_path)
    # A program that hangs ends the run with every thread's traceback
    # instead of holding CI until its own timeout.
    faulthandler.dump_traceback_later(PROGRAM_TIMEOUT, exit=True)
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        faulthandler.cancel_dump_traceback_later()
        if dsn is not None:
            _empty(dsn)


_RUNS: dict[str, str] = {}


def _pytest_run(page: str, tmp: pytest.TempPathFactory) -> str:
    """Write a page's file blocks into ``directory`` and run pytest there,
    as the reader would: ``pytest``, with the config the page shows."""
    if page in _RUNS:
        return _RUNS[page]
    directory = tmp.mktemp(f"page-{Path(page).stem}")
    for block in TEST_FILES[page]:
        assert block.file_name is not None
        target = directory / block.file_name
        assert not target.exists(), f"{block.where}: {block.file_name} shown twice"
        target.write_text(block.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    _RUNS[page] = done.stdout + done.stderr
    return _RUNS[page]


@pytest.mark.parametrize(
    "block",
    TEST_FILE_BLOCKS,
    ids=[f"{b.page.removeprefix('docs/')}:{b.file_name}" for b in TEST_FILE_BLOCKS],
)
def test_test_file_passes_under_plain_pytest(
    block: Block, tmp_path_factory: pytest.TempPathFactory
) -> None:
    output = _pytest_run(block.page, tmp_path_factory)
    outcomes = re.findall(rf"^(\w+) {re.escape(str(block.file_name))}::", output, re.M)
    assert outcomes and set(outcomes) == {"PASSED"}, output


def test_every_program_runs_in_one_folder_and_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """As a reader runs them: every program of README.md and docs/, in page
    order, in one folder and one Postgres database, then all of them a
    second time. Invariant: none depends on running first or alone (a file,
    a table, a stream's offsets or an outbox's rows left by another)."""
    dsn = request.getfixturevalue("docs_database")
    monkeypatch.chdir(tmp_path)
    failed: list[str] = []
    for round_ in (1, 2):
        for program in PROGRAMS:
            script = tmp_path / f"{program.id.replace('/', '_').replace(':', '_')}.py"
            script.write_text(program.code)
            with monkeypatch.context() as scoped:
                if program.uses_postgres:
                    scoped.setenv("ALKSTORE_DSN", dsn)
                else:
                    scoped.delenv("ALKSTORE_DSN", raising=False)
                faulthandler.dump_traceback_later(PROGRAM_TIMEOUT, exit=True)
                try:
                    runpy.run_path(str(script), run_name="__main__")
                except Exception as exc:  # every failure is listed, not only the first
                    failed.append(f"round {round_}: {program.id}: {exc!r}"[:300])
                finally:
                    faulthandler.cancel_dump_traceback_later()
    assert failed == [], "\n".join(failed)
