"""A rolling deploy on one database: the previous release's code made the
store and is still running when this code opens it, migrates it, and works
beside it; then the old code tries to open the migrated store.

docs/upgrading.md states what these tests check, on both engines:

- the store is migrated on open, in one transaction, with every job kept
  (ready, scheduled and dead ones alike);
- an old process already running keeps enqueueing through the migration
  and after it, and keeps working too unless the migration raised the claim
  generation (schema 6 did: old code would ack a job others wait for
  without settling them), in which case it finishes what it holds and
  stops claiming; no job either process enqueued is lost;
- old code opening a newer store is refused with ``SchemaMismatch`` and
  changes nothing (no downgrade).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

import alkstore.sync
from tests.backends import BACKENDS, PG_DSN

from . import releases

pytestmark = pytest.mark.slow

ACTOR = Path(__file__).with_name("actor.py")
ROOT = releases.ROOT
# The two schema versions before this code's: the newest (the deploy most
# users make; schema 8 keeps the claim generation, so old workers work on)
# and the one before it (from schema 6 the claim generation rises, so its
# path is the one where old workers stop).
PREVIOUS_VERSIONS = sorted(releases.CODE_OF_SCHEMA)[-2:]
FILL = 2000
PATIENCE = 90.0  # s: for progress that takes a second or two on a quiet machine


@pytest.fixture(scope="module", params=PREVIOUS_VERSIONS, ids=lambda v: f"from-schema-{v}")
def previous(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture(scope="module")
def old_code(previous: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return releases.unpack(previous, tmp_path_factory.mktemp("releases"))


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(engine: str, tmp_path: Path) -> str:
    return BACKENDS[f"{engine}-trio"].new_location(tmp_path)


class Actors:
    """``actor.py`` processes of given code on one database; all killed at the end."""

    def __init__(self, engine: str, location: str, workdir: Path) -> None:
        self.engine = engine
        self.location = location
        self.workdir = workdir
        self.running: list[subprocess.Popen[str]] = []

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, str(ACTOR), self.engine, self.location, *args]

    def env(self, code: Path) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(code), "ALKSTORE_DSN": PG_DSN}

    def run(self, code: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*args), env=self.env(code), cwd=self.workdir,
                              capture_output=True, text=True, timeout=PATIENCE)  # fmt: skip

    def start(self, code: Path, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(self.argv(*args), env=self.env(code), cwd=self.workdir,
                                   stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)  # fmt: skip
        self.running.append(process)
        return process

    def kill_all(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            for pipe in (process.stdin, process.stderr):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def actors(engine: str, location: str, tmp_path: Path) -> Iterator[Actors]:
    group = Actors(engine, location, tmp_path)
    try:
        yield group
    finally:
        group.kill_all()


def schema_version(engine: str, location: str) -> tuple[int, int]:
    """(the version the store is at, the version this code reads), as
    ``alkstore migrate --check --json`` says them (it only looks)."""
    where = ["--db", location] if engine == "sqlite" else ["--dsn", PG_DSN, "--schema", location]
    checked = subprocess.run(
        [sys.executable, "-m", "alkstore", "migrate", "--check", "--json", *where],
        capture_output=True, text=True, timeout=PATIENCE,
        env={**os.environ, "PYTHONPATH": str(releases.ROOT)},
    )  # fmt: skip
    assert checked.returncode in (0, 1), checked.stderr  # 1: a migration is due
    doc = json.loads(checked.stdout)
    return int(doc["version"]), int(doc["expected"])


def log(path: Path) -> tuple[set[int], set[int]]:
    """The job ids an actor's OUT file says it enqueued, and those it finished."""
    enqueued: set[int] = set()
    finished: set[int] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            kind, _, number = line.partition(" ")
            if number.isdigit():
                (enqueued if kind == "E" else finished).add(int(number))
    return enqueued, finished


def wait_until(what: str, check: Callable[[], bool], *watched: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not check():
        for process in watched:
            if process.poll() is not None:
                errors = process.stderr.read() if process.stderr is not None else ""
                raise AssertionError(f"an actor exited ({process.returncode}):\n{errors}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def open_new(engine: str, location: str) -> AbstractContextManager[alkstore.sync.Store]:
    """A blocking store of this release's code on the test's database."""
    if engine == "sqlite":
        return alkstore.sync.open_sqlite(location)
    options = alkstore.sync.PostgresOptions(schema=location)
    return alkstore.sync.open_postgres(PG_DSN, options=options)


def claim_generation_of(code: Path) -> int:
    """The claim generation of the release whose package is at ``code``."""
    got = subprocess.run(
        [sys.executable, "-c", "from alkstore.protocol.values.generation import "
         "CLAIM_GENERATION; print(CLAIM_GENERATION)"],
        env={**os.environ, "PYTHONPATH": str(code)}, cwd=code, capture_output=True, text=True,
        timeout=PATIENCE, check=True,
    )  # fmt: skip
    return int(got.stdout)


def live_ids(store: alkstore.sync.Store, queue: str) -> set[int]:
    ids: set[int] = set()
    after = None
    while page := store.queue(queue).list_jobs(limit=500, after=after):
        ids |= {job.id for job in page if job.state in ("pending", "processing")}
        after = page[-1].id
    return ids


def test_a_running_old_release_and_this_one_share_a_migrated_store(
    engine: str, location: str, actors: Actors, previous: int, old_code: Path, tmp_path: Path
) -> None:
    filled = actors.run(old_code, "fill", str(FILL))
    assert filled.returncode == 0, filled.stderr
    fill_ids = set(map(int, filled.stdout.split()))
    assert len(fill_ids) == FILL
    found, current = schema_version(engine, location)
    assert found == previous < current

    old_out, new_out = tmp_path / "old.log", tmp_path / "new.log"
    old = actors.start(old_code, "run", "old", str(old_out))
    wait_until("the old release works jobs", lambda: len(log(old_out)[1]) >= 100, old)

    new = actors.start(releases.ROOT, "run", "new", str(new_out))
    old_generation, this_generation = claim_generation_of(old_code), claim_generation_of(ROOT)
    if old_generation == this_generation:
        wait_until("this release migrated the store and works jobs",
                   lambda: len(log(new_out)[1]) >= 100, old, new)  # fmt: skip
        assert schema_version(engine, location) == (current, current)
        at_migration = len(log(old_out)[1])
        wait_until("the old release works on after the migration",
                   lambda: len(log(old_out)[1]) >= at_migration + 100, old, new)  # fmt: skip
        still_running = [old, new]
    else:
        # The migration raised the claim generation: the old release's
        # worker finishes what it holds, names both generations and exits.
        assert old.wait(timeout=PATIENCE) == 1
        errors = old.stderr.read()  # type: ignore[union-attr]
        assert (f"stops claiming: the store's claim generation is {this_generation}, "
                f"this alkstore's {old_generation}") in errors  # fmt: skip
        wait_until("this release migrated the store and works jobs",
                   lambda: len(log(new_out)[1]) >= 100, new)  # fmt: skip
        assert schema_version(engine, location) == (current, current)
        still_running = [new]
    wait_until("every job of the old release's backlog is done",
               lambda: fill_ids <= log(old_out)[1] | log(new_out)[1], *still_running)  # fmt: skip

    for process in still_running:  # the end of their input: drain and exit
        assert process.stdin is not None
        process.stdin.close()
    for process in still_running:
        assert process.wait(timeout=PATIENCE) == 0, process.stderr.read()  # type: ignore[union-attr]
    (old_enqueued, old_finished), (new_enqueued, new_finished) = log(old_out), log(new_out)
    assert old_enqueued and new_enqueued

    with open_new(engine, location) as store:
        left = live_ids(store, "q")
        enqueued = fill_ids | old_enqueued | new_enqueued
        # No job lost: each one enqueued by either release was finished or is still live.
        assert enqueued - (old_finished | new_finished | left) == set()
        assert store.queue("q").stats().processing == 0  # drained: claims handed back
        assert store.queue("later").stats().scheduled == 20
        dead = store.queue("poison").dead_letters(limit=10)
        assert sorted(job.last_error or "" for job in dead) == [f"poison {i}" for i in range(5)]
        # Each dead letter's death is in its attempt history: the migration
        # filled it in for those the old code buried (schema 7).
        for letter in dead:
            info = store.get_job(letter.id)
            assert info is not None and info.attempt_history
            death = info.attempt_history[-1]
            assert death.died and death.error == letter.last_error


def test_old_code_refuses_a_newer_store_and_changes_nothing(
    engine: str, location: str, actors: Actors, previous: int, old_code: Path
) -> None:
    filled = actors.run(releases.ROOT, "fill", "50")
    assert filled.returncode == 0, filled.stderr
    with open_new(engine, location) as store:
        before = [store.queue(name).stats() for name in ("q", "later", "poison")]

    opened = actors.run(old_code, "open")
    assert opened.returncode == 3, (opened.stdout, opened.stderr)
    assert opened.stderr.startswith("SchemaMismatch: "), opened.stderr
    current, _ = schema_version(engine, location)
    assert f"schema version {current}, newer than this alkstore ({previous})" in opened.stderr

    assert schema_version(engine, location) == (current, current)
    with open_new(engine, location) as store:
        assert [store.queue(name).stats() for name in ("q", "later", "poison")] == before
