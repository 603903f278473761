"""Dependencies, results and workflows on the command line: ``job`` shows a
job's result, what it waits for and what waits for it, and its workflow
step; ``workflows`` and ``workflow ID`` show the runs; the queue counts
show waiting jobs. The real ``alkstore`` command, in a subprocess, on a
real SQLite file and the real Postgres server."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from alkstore import Store
from tests.graphs import enqueue_graphs

from .support import ENGINES, Db, by_name, cli, documented, drop, new_db

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Made:
    """What ``fill_graphs`` made: each workflow's id and its steps' job ids,
    and a chain of plain jobs (a <- b <- c) in queue ``reports``."""

    quote: int
    quote_jobs: dict[str, int]
    deploy: int
    deploy_jobs: dict[str, int]
    chain: tuple[int, int, int]


async def fill_graphs(store: Store) -> Made:
    """``tests/graphs.py``'s runs, with a two-line error (the table shows its first)."""
    g = await enqueue_graphs(store, tea_result={"price": 4},
                             build_error="compiler crashed\n  at line 2")  # fmt: skip
    return Made(g.quote.id, g.quote.job_ids, g.deploy.id, g.deploy.job_ids, g.chain)


def made_db(engine: str, tmp_path: Path) -> tuple[Db, Made]:
    db = new_db(engine, tmp_path)
    found: list[Made] = []

    async def main() -> None:
        async with db.open() as store:
            found.append(await fill_graphs(store))

    trio.run(main)
    return db, found[0]


@pytest.fixture(scope="module", params=ENGINES)
def graphs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Db, Made]]:
    """One database per engine, filled once, that the read-only tests share."""
    db, made = made_db(request.param, tmp_path_factory.mktemp("cli-graphs"))
    yield db, made
    drop(db)


def table_rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip()]


# -- workflows ------------------------------------------------------------------------


def test_workflows_lists_the_runs_newest_first_with_their_progress(
    graphs: tuple[Db, Made],
) -> None:
    db, made = graphs
    doc = cli("workflows", *db.args, "--json").doc
    assert [w["id"] for w in doc["workflows"]] == [made.deploy, made.quote]
    assert doc["next_before"] is None
    deploy, quote = doc["workflows"]
    assert (deploy["name"], deploy["steps"], deploy["status"]) == ("deploy", 3, "running")
    assert deploy["states"] == {"pending": 1, "cancelled": 1, "dead": 1}
    assert (quote["name"], quote["steps"]) == ("quote", 4)
    assert quote["states"] == {"waiting": 2, "pending": 1, "acked": 1}
    assert quote["created_at"].endswith("Z")
    table = cli("workflows", *db.args)
    assert table.code == 0, table.err
    rows = {row[0]: row for row in table_rows(table.out)[1:]}
    assert rows[str(made.quote)][1:2] == ["quote"] and "running" in rows[str(made.quote)]
    assert "2 waiting, 1 pending, 1 acked" in table.out
    assert "1 pending, 1 cancelled, 1 dead" in table.out


def test_workflows_pages_newest_first(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    first = cli("workflows", *db.args, "--limit", "1", "--json").doc
    assert [w["id"] for w in first["workflows"]] == [made.deploy]
    assert first["next_before"] == made.deploy
    rest = cli("workflows", *db.args, "--before", str(made.deploy), "--json").doc
    assert [w["id"] for w in rest["workflows"]] == [made.quote] and rest["next_before"] is None
    none = cli("workflows", *db.args, "--before", str(made.quote), "--json").doc
    assert none == {"workflows": [], "next_before": None}


def test_workflow_shows_each_step_level_by_level(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    doc = cli("workflow", str(made.quote), *db.args, "--json").doc["workflow"]
    assert (doc["id"], doc["name"], doc["status"]) == (made.quote, "quote", "running")
    assert (doc["finished"], doc["succeeded"]) == (False, False)
    steps = {s["name"]: s for s in doc["steps"]}
    assert [s["name"] for s in doc["steps"]] == ["tea", "cups", "total", "mail"]
    assert {n: s["job_id"] for n, s in steps.items()} == made.quote_jobs
    assert {n: s["state"] for n, s in steps.items()} == {
        "tea": "acked", "cups": "pending", "total": "waiting", "mail": "waiting",
    }  # fmt: skip
    assert steps["tea"]["result"] == {"price": 4} and steps["cups"]["result"] is None
    assert steps["total"]["after"] == ["tea", "cups"] and steps["mail"]["after"] == ["total"]
    assert steps["mail"]["queue"] == "mail" and steps["tea"]["queue"] == "tasks"

    table = cli("workflow", str(made.quote), *db.args)
    assert table.code == 0, table.err
    lines = table_rows(table.out)
    assert lines[0][:4] == ["workflow", str(made.quote), "'quote',", "created"]
    assert "running (2 waiting, 1 pending, 1 acked)" in table.out
    rows = {row[0]: row for row in lines[2:]}
    assert list(rows) == ["tea", "cups", "total", "mail"]
    tea, total = made.quote_jobs["tea"], made.quote_jobs["total"]
    assert rows["tea"] == ["tea", "acked", str(tea), "tasks", "0", '{"price":4}']
    assert rows["total"] == ["total", "waiting", str(total), "tasks", "1", "<-", "tea,", "cups",
                             "-"]  # fmt: skip
    assert rows["mail"][4:7] == ["2", "<-", "total"]


def test_workflow_shows_why_steps_failed(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    doc = cli("workflow", str(made.deploy), *db.args, "--json").doc["workflow"]
    steps = {s["name"]: s for s in doc["steps"]}
    build, ship = steps["build"], steps["ship"]
    assert (build["state"], build["reason"]) == ("dead", "failed")
    assert build["error"] == "compiler crashed\n  at line 2"
    assert ship["state"] == "cancelled"
    assert ship["error"] == f"dependency job {made.deploy_jobs['build']} died (failed)"
    assert steps["cleanup"]["state"] == "pending"  # on_dependency_failure="run"
    table = cli("workflow", str(made.deploy), *db.args)
    assert table.code == 0, table.err
    assert "failed: compiler crashed" in table.out and "at line 2" not in table.out
    assert f"dependency job {made.deploy_jobs['build']} died (failed)" in table.out


def test_a_finished_workflow_reads_succeeded_or_failed(engine: str, tmp_path: Path) -> None:
    db, made = made_db(engine, tmp_path)
    try:

        async def finish(store: Store) -> None:
            for queue in ("tasks", "tasks", "mail"):
                job = await store.queue(queue).claim_one("w")
                assert job is not None and await job.ack(result=job.id)
            run = await store.workflow_run(made.deploy)
            assert await run.cancel() == 1  # cleanup

        read(db, finish)
        quote = cli("workflow", str(made.quote), *db.args, "--json").doc["workflow"]
        assert (quote["status"], quote["finished"], quote["succeeded"]) == (
            "succeeded", True, True,
        )  # fmt: skip
        listed = {w["id"]: w["status"] for w in cli("workflows", *db.args, "--json").doc[
            "workflows"]}  # fmt: skip
        assert listed == {made.quote: "succeeded", made.deploy: "failed"}
    finally:
        drop(db)


def test_an_unknown_workflow_exits_1(graphs: tuple[Db, Made]) -> None:
    db, _ = graphs
    for args in (("workflow", "999999", "--json"), ("workflow", "999999")):
        out = cli(*args, *db.args)
        assert out.code == 1, out
        assert out.out == "" and "no workflow 999999" in out.err
    assert cli("workflow", "0", *db.args).code == 2  # not an id
    assert cli("workflows", *db.args, "--limit", "0").code == 2


# -- one job -----------------------------------------------------------------------------


def test_job_shows_dependencies_dependents_and_their_states(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    a, b, c = made.chain
    job = cli("job", str(b), *db.args, "--json").doc["job"]
    assert job["state"] == "waiting"
    assert job["dependencies"] == [{"id": a, "queue": "reports", "state": "pending"}]
    assert job["dependents"] == [{"id": c, "queue": "reports", "state": "waiting"}]
    assert (job["workflow_id"], job["step"], job["result"]) == (None, None, None)
    first = cli("job", str(a), *db.args, "--json").doc["job"]
    assert first["dependencies"] == [] and [d["id"] for d in first["dependents"]] == [b]
    table = cli("job", str(b), *db.args)
    assert table.code == 0, table.err
    lines = table_rows(table.out)
    assert ["state", "waiting"] in lines
    assert ["waits", "for", str(a), "(pending)"] in lines
    assert ["waited", "on", "by", str(c), "(waiting)"] in lines
    assert not any(line[:1] == ["workflow"] for line in lines)


def test_job_shows_its_result_and_workflow_step(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    tea, cups, total = (made.quote_jobs[s] for s in ("tea", "cups", "total"))
    job = cli("job", str(tea), *db.args, "--json").doc["job"]
    assert (job["state"], job["result"]) == ("acked", {"price": 4})
    assert (job["workflow_id"], job["step"]) == (made.quote, "tea")
    assert job["dependents"] == [{"id": total, "queue": "tasks", "state": "waiting"}]
    waiting = cli("job", str(total), *db.args, "--json").doc["job"]
    assert [(d["id"], d["state"]) for d in waiting["dependencies"]] == [
        (tea, "acked"), (cups, "pending"),
    ]  # fmt: skip
    table = table_rows(cli("job", str(tea), *db.args).out)
    assert ["result", '{"price":4}'] in table
    assert ["workflow", f"{made.quote},", "step", "'tea'"] in table
    assert ["waited", "on", "by", str(total), "(waiting)"] in table


def test_job_shows_why_a_failed_dependency_cancelled_it(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    build, ship = made.deploy_jobs["build"], made.deploy_jobs["ship"]
    job = cli("job", str(ship), *db.args, "--json").doc["job"]
    assert job["state"] == "cancelled"
    assert job["last_error"] == f"dependency job {build} died (failed)"
    assert job["dependencies"] == [{"id": build, "queue": "deploys", "state": "dead"}]


def test_a_dependency_whose_record_is_gone_reads_gone(engine: str, tmp_path: Path) -> None:
    db = new_db(engine, tmp_path)
    try:

        async def work(store: Store) -> tuple[int, int]:
            # A finished dependency's record goes with its retention once
            # no live dependent needs it; the dependent's own stays a week.
            q, later = store.queue("q"), store.queue("later")
            await q.set_retention(results=60)
            await later.set_retention(results=7 * 86_400)
            first = await q.enqueue(1)
            second = await later.enqueue(2, depends_on=[first])
            for queue in (q, later):
                job = await queue.claim_one("w")
                assert job is not None and await job.ack()
            return first, second

        first, second = read(db, work)
        assert cli("job", str(second), *db.args, "--json").doc["job"]["dependencies"] == [
            {"id": first, "queue": "q", "state": "acked"}
        ]
        forget(db, first)
        assert cli("job", str(second), *db.args, "--json").doc["job"]["dependencies"] == [
            {"id": first, "queue": None, "state": "gone"}
        ]
    finally:
        drop(db)


def test_job_looks_up_the_first_50_dependencies(engine: str, tmp_path: Path) -> None:
    db = new_db(engine, tmp_path)
    try:

        async def work(store: Store) -> tuple[list[int], int]:
            q = store.queue("parts")
            parts = await q.enqueue_batch(list(range(52)))
            return parts, await q.enqueue("merge", depends_on=parts)

        parts, merge = read(db, work)
        shown = cli("job", str(merge), *db.args, "--json").doc["job"]["dependencies"]
        assert [d["id"] for d in shown] == parts
        assert {(d["queue"], d["state"]) for d in shown[:50]} == {("parts", "pending")}
        assert [(d["queue"], d["state"]) for d in shown[50:]] == [(None, None), (None, None)]
        table = cli("job", str(merge), *db.args).out
        assert f"{parts[8]} (pending), {parts[9]} (pending) and 42 more" in table
    finally:
        drop(db)


def forget(db: Db, job_id: int) -> None:
    """Prune job ``job_id``'s record as its retention would: an hour later."""
    from alkstore import ManualClock, SystemClock

    async def prune() -> None:
        clock = ManualClock(SystemClock().now_us() + 3_600_000_000)
        async with db.open(clock=clock) as store:
            await store.prune()
            assert await store.get_job(job_id) is None

    trio.run(prune)


# -- queues ---------------------------------------------------------------------------


def test_queues_and_watch_count_waiting_jobs(graphs: tuple[Db, Made]) -> None:
    db, _ = graphs
    queues = by_name(cli("queues", *db.args, "--json").doc["queues"])
    assert {n: q["waiting"] for n, q in queues.items()} == {
        "deploys": 0, "mail": 1, "reports": 2, "tasks": 1,
    }  # fmt: skip
    assert list(queues["reports"])[:5] == ["name", "kind", "display_name", "ready", "scheduled"]
    assert list(queues["reports"])[5] == "waiting"
    table = table_rows(cli("queues", *db.args).out)
    assert table[0][:5] == ["queue", "ready", "scheduled", "waiting", "processing"]
    assert ["reports", "1", "0", "2", "0"] in [row[:5] for row in table]
    watched = cli("watch", *db.args, "--json", "--count", "1").doc
    assert by_name(watched["queues"])["reports"]["waiting"] == 2
    watch_table = table_rows(cli("watch", *db.args, "--count", "1").out)
    assert ["reports", "1", "0", "2", "0"] in [row[:5] for row in watch_table]


def test_jobs_lists_waiting_jobs(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    waiting = cli("jobs", "reports", *db.args, "--state", "waiting", "--json").doc["jobs"]
    assert [(j["id"], j["state"]) for j in waiting] == [(i, "waiting") for i in made.chain[1:]]
    every = cli("jobs", "reports", *db.args, "--json").doc["jobs"]
    assert [j["id"] for j in every] == list(made.chain)


def test_cancel_a_waiting_job_cancels_what_waits_for_it(engine: str, tmp_path: Path) -> None:
    db, made = made_db(engine, tmp_path)
    try:
        a, b, c = made.chain
        done = cli("cancel", str(b), *db.args, "--json").doc
        assert done == {"job": b, "queue": "reports", "cancelled": True}
        states = read(db, lambda s: trio_gather(s, (a, b, c)))
        assert states == ["pending", "cancelled", "cancelled"]
        again = cli("cancel", str(b), *db.args)
        assert again.code == 1 and "cancelled" in again.err
    finally:
        drop(db)


def test_the_documented_json_shapes_are_what_the_commands_print(graphs: tuple[Db, Made]) -> None:
    db, made = graphs
    listed = documented("`alkstore workflows [--limit N] [--before ID]`")
    printed = cli("workflows", *db.args, "--json").doc
    assert listed.keys() == printed.keys()
    assert listed["workflows"][0].keys() == printed["workflows"][0].keys()
    shown = documented("`alkstore workflow ID`")
    printed = cli("workflow", str(made.quote), *db.args, "--json").doc
    assert shown["workflow"].keys() == printed["workflow"].keys()
    assert shown["workflow"]["steps"][0].keys() == printed["workflow"]["steps"][0].keys()
    job = documented("`alkstore job ID [--traces]`")
    printed = cli("job", str(made.chain[1]), *db.args, "--json").doc
    assert job["job"].keys() == printed["job"].keys()
    assert job["job"]["dependencies"][0].keys() == printed["job"]["dependencies"][0].keys()


# -- helpers ----------------------------------------------------------------------------


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def read(db: Db, fn: Any) -> Any:
    async def main() -> Any:
        async with db.open() as store:
            return await fn(store)

    return trio.run(main)


async def trio_gather(store: Store, ids: tuple[int, ...]) -> list[str | None]:
    states = []
    for job_id in ids:
        info = await store.get_job(job_id)
        states.append(None if info is None else info.state)
    return states
