"""Two code generations on one database: a release that adds a claim rule
(played by this code with its claim generation one higher, ``newer.py``)
opens a store while processes of this release still run on it.

What docs/upgrading.md promises, on both engines:

- from the moment the newer code has opened the store, this release's
  claims take nothing and raise ``ClaimRulesChanged`` (a ``SchemaMismatch``);
- a worker of this release stops claiming, finishes what it runs, logs a
  line naming both generations, and ``work()`` raises;
- a producer of this release goes on enqueueing, and the newer code works
  every job either enqueued: none is lost;
- the newer generation stays recorded when this release opens the store again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from . import releases
from .test_rolling_upgrade import (
    PATIENCE,
    Actors,
    claim_generation_of,
    live_ids,
    log,
    open_new,
    wait_until,
)

pytestmark = pytest.mark.slow

NEWER = Path(__file__).with_name("newer.py")
THIS = releases.ROOT


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def location(engine: str, tmp_path: Path) -> str:
    from tests.backends import BACKENDS

    return BACKENDS[f"{engine}-trio"].new_location(tmp_path)


class Generations(Actors):
    """``Actors`` that can also start ``newer.py``: this code, one generation on."""

    def newer(self, *args: str) -> list[str]:
        return [sys.executable, str(NEWER), self.engine, self.location, *args]


@pytest.fixture
def actors(engine: str, location: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    group = Generations(engine, location, tmp_path)
    try:
        yield group
    finally:
        group.kill_all()


def start_newer(actors: Generations, *args: str):  # type: ignore[no-untyped-def]
    import subprocess

    process = subprocess.Popen(
        actors.newer(*args), env=actors.env(THIS), cwd=actors.workdir,
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    actors.running.append(process)
    return process


def test_this_release_stops_claiming_once_a_newer_one_opened_the_store(
    engine: str, location: str, actors: Generations, tmp_path: Path
) -> None:
    filled = actors.run(THIS, "fill", "3000")
    assert filled.returncode == 0, filled.stderr
    fill_ids = set(map(int, filled.stdout.split()))

    old_out, producer_out, new_out = (tmp_path / f"{n}.log" for n in ("old", "producer", "new"))
    old = actors.start(THIS, "run", "old", str(old_out))
    producer = actors.start(THIS, "produce", "producer", str(producer_out))
    wait_until("this release works jobs", lambda: len(log(old_out)[1]) >= 100, old, producer)

    new = start_newer(actors, "run", "new", str(new_out))
    # The old worker's last claims were made before the newer code opened
    # the store; then it stops claiming, finishes its handlers and raises.
    assert old.wait(timeout=PATIENCE) == 1
    assert old.stderr is not None
    errors = old.stderr.read()
    this = claim_generation_of(THIS)
    next_ = this + 1
    assert f"ClaimRulesChanged: the store's claim rules are generation {next_}, newer than " \
           f"this alkstore's ({this})" in errors  # fmt: skip
    assert f"stops claiming: the store's claim generation is {next_}, this alkstore's {this}" \
        in errors
    stopped_with = len(log(old_out)[1])

    # Its producer goes on, and the newer code works everything.
    enqueued_before = len(log(producer_out)[0])
    wait_until("the producer of this release enqueues on",
               lambda: len(log(producer_out)[0]) >= enqueued_before + 100,
               producer, new)  # fmt: skip
    refused = actors.run(THIS, "claim")
    assert refused.returncode == 3, (refused.stdout, refused.stderr)
    assert refused.stderr.startswith("ClaimRulesChanged: "), refused.stderr
    wait_until("the newer code has worked the backlog",
               lambda: fill_ids <= log(old_out)[1] | log(new_out)[1], producer, new)  # fmt: skip
    assert len(log(old_out)[1]) == stopped_with
    # Nothing the newer code enqueued (after it had opened the store) was
    # claimed under the old rules.
    assert log(new_out)[0] and not log(new_out)[0] & log(old_out)[1]

    for process in (producer, new):
        assert process.stdin is not None
        process.stdin.close()
    for process in (producer, new):
        assert process.wait(timeout=PATIENCE) == 0, process.stderr.read()  # type: ignore[union-attr]
    (old_enqueued, old_done), (produced, _), (new_enqueued, new_done) = (
        log(old_out), log(producer_out), log(new_out)
    )
    with open_new(engine, location) as store:  # this release, opening the store again
        left = live_ids(store, "q")
    everything = fill_ids | old_enqueued | produced | new_enqueued
    assert everything - (old_done | new_done | left) == set()  # none lost
    # Opening it again did not lower the generation: claims stay refused.
    assert actors.run(THIS, "claim").returncode == 3


def test_an_idle_worker_of_this_release_stops_at_its_next_look(
    engine: str, location: str, actors: Generations, tmp_path: Path
) -> None:
    """A worker with nothing to do finds out when it next looks (woken by
    the newer code's first enqueue), and runs none of the newer code's jobs."""
    filled = actors.run(THIS, "fill", "10")
    assert filled.returncode == 0, filled.stderr
    old_out, new_out = tmp_path / "old.log", tmp_path / "new.log"
    old = actors.start(THIS, "work", "old", str(old_out))
    wait_until("this release works its jobs", lambda: len(log(old_out)[1]) >= 10, old)
    again = actors.run(THIS, "fill", "1")  # this release opening it again: changes nothing
    assert again.returncode == 0
    wait_until("this release works that job too", lambda: len(log(old_out)[1]) >= 11, old)
    newer = start_newer(actors, "produce", "new", str(new_out))
    assert old.wait(timeout=PATIENCE) == 1
    assert "ClaimRulesChanged" in old.stderr.read()  # type: ignore[union-attr]
    assert newer.stdin is not None
    newer.stdin.close()
    assert newer.wait(timeout=PATIENCE) == 0
    assert log(new_out)[0] and not log(new_out)[0] & log(old_out)[1]


def test_the_worker_command_exits_3_naming_both_generations(
    engine: str, location: str, actors: Generations, tmp_path: Path
) -> None:
    import subprocess

    (tmp_path / "tasks.py").write_text(
        "from alkstore import Job\n\n\nasync def handle(job: Job) -> None:\n    pass\n\n\n"
        'handlers = {"q": handle}\n'
    )
    where = ["--db", location] if engine == "sqlite" else ["--schema", location]
    filled = actors.run(THIS, "fill", "10")
    assert filled.returncode == 0, filled.stderr
    env = actors.env(THIS)  # ALKSTORE_DSN among them, read by the command too
    env["PYTHONPATH"] = f"{THIS}:{tmp_path}"
    command = subprocess.Popen(
        [sys.executable, "-m", "alkstore", "worker", "tasks:handlers", *where],
        cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    actors.running.append(command)
    newer = start_newer(actors, "produce", "new", str(tmp_path / "new.log"))
    assert command.wait(timeout=PATIENCE) == 3
    errors = command.stderr.read()  # type: ignore[union-attr]
    this = claim_generation_of(THIS)
    next_ = this + 1
    assert f"stops claiming: the store's claim generation is {next_}, this alkstore's {this}" \
        in errors
    assert "ClaimRulesChanged" in errors
    assert newer.stdin is not None
    newer.stdin.close()
    assert newer.wait(timeout=PATIENCE) == 0
