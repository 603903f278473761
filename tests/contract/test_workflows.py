"""Rules: workflows (contract extension, every backend; docs/workflows.md).

- A workflow's steps (a job each, with the steps it waits for, all defined
  before it) are enqueued in one transaction, or none: ``Workflow.enqueue``
  or, in a caller's transaction, ``tx.enqueue_workflow``.
- ``WorkflowRun.status()`` gives each step's state, ``results()`` the acked
  steps' results by name, ``result(step)`` waits for one, ``wait()`` for
  all; ``cancel()`` cancels every unfinished step (and what waits for it).
- Names are unique within a workflow; a step may only wait for steps
  defined before it (no cycle can be built).
"""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidArgument, InvalidName, Job, JobCancelled, ManualClock, Store

from . import aio
from .helpers import SOON


async def work_until(
    store: Store, clock: ManualClock, queues: list[str], body: Any, fail: str = ""
) -> Any:
    """``body()`` while a worker on each of ``queues`` runs: a step whose
    payload says so returns its dependencies' results and its own name; a
    payload equal to ``fail`` raises. The store's clock moves with real time
    meanwhile, as a real one would: a worker that finds a due job held
    locked by another transaction (Postgres's ``SKIP LOCKED``) looks again
    a few milliseconds later, by its clock."""

    async def handler(job: Job) -> Any:
        if job.payload == fail:
            raise RuntimeError("step failed")
        deps = await job.dependency_results()
        return {"me": job.payload, "deps": sorted(str(v) for v in deps.values())}

    async def worker(name: str, task_status: Any = None) -> None:
        q = store.queue(name, max_attempts=1)
        await q.work(handler, concurrency=4, poll_interval=60.0, task_status=task_status)

    async def ticking() -> None:
        while True:
            await aio.sleep(0.002)
            clock.advance(0.002)

    async with aio.open_task_group() as group:
        group.start_soon(ticking)
        for name in queues:
            await group.start(worker, name)
        async with aio.fail_after(SOON * 2):
            value = await body()
        group.cancel()
    return value


@pytest.mark.producer
async def test_a_workflow_is_enqueued_whole_and_waits_step_by_step(store: Store) -> None:
    wf = store.workflow("pipeline")
    a = wf.step("fetch", "io", "fetch")
    b = wf.step("parse", "cpu", "parse", after=[a])
    wf.step("store", "io", "store", after=[b])
    run = await wf.enqueue()
    assert set(run.job_ids) == {"fetch", "parse", "store"}
    status = await run.status()
    assert status.name == "pipeline" and not status.finished
    assert status.by_state() == {"pending": ["fetch"], "waiting": ["parse", "store"]}
    assert status.steps["store"].after == ("parse",) and status.steps["fetch"].after == ()
    info = await store.get_job(run.job_ids["parse"])
    assert info is not None and info.workflow_id == run.id and info.step == "parse"
    again = await store.workflow_run(run.id)
    assert again.job_ids == run.job_ids


async def test_a_chord_runs_its_group_then_its_callback(store: Store, clock: ManualClock) -> None:
    wf = store.workflow("chord")
    group = [wf.step(f"part-{i}", "parts", f"part-{i}") for i in range(5)]
    wf.step("join", "join", "join", after=group)
    run = await wf.enqueue()

    async def body() -> Any:
        status = await run.wait()
        assert status.finished and status.succeeded
        return await run.results()

    results = await work_until(store, clock, ["parts", "join"], body)
    parts = sorted(str(results[f"part-{i}"]) for i in range(5))
    assert results["join"] == {"me": "join", "deps": parts}
    assert await run.result("part-3") == {"me": "part-3", "deps": []}


async def test_a_failing_branch_cancels_what_waits_for_it(
    store: Store, clock: ManualClock
) -> None:
    wf = store.workflow("branches")
    root = wf.step("root", "q", "root")
    bad = wf.step("bad", "q", "bad", after=[root], max_attempts=1)
    wf.step("after-bad", "q", "after-bad", after=[bad])
    good = wf.step("good", "q", "good", after=[root])
    wf.step("after-good", "q", "after-good", after=[good])
    run = await wf.enqueue()

    async def body() -> Any:
        return await run.wait()

    status = await work_until(store, clock, ["q"], body, fail="bad")
    assert status.finished and not status.succeeded
    states = {name: s.state for name, s in status.steps.items()}
    assert states == {"root": "acked", "bad": "dead", "after-bad": "cancelled",
                      "good": "acked", "after-good": "acked"}  # fmt: skip
    why = f"dependency job {run.job_ids['bad']} died (max_attempts)"
    assert status.steps["after-bad"].error == why
    with pytest.raises(JobCancelled):
        await run.result("after-bad")


@pytest.mark.producer
async def test_a_workflow_enqueued_in_a_transaction_commits_with_it(store: Store) -> None:
    wf = store.workflow("tx")
    first = wf.step("one", "q", 1)
    wf.step("two", "q", 2, after=[first])
    with pytest.raises(RuntimeError):
        async with store.transaction() as tx:
            await tx.enqueue_workflow(wf)
            raise RuntimeError("roll back")
    stats = await store.queue("q").stats()
    assert (stats.ready, stats.waiting) == (0, 0)
    assert await store.list_workflows() == []
    async with store.transaction() as tx:
        workflow_id, ids = await tx.enqueue_workflow(wf)
    run = await store.workflow_run(workflow_id)
    assert run.job_ids == ids
    (listed,) = await store.list_workflows()
    assert (listed.id, listed.name, listed.steps) == (workflow_id, "tx", 2)


async def test_cancel_stops_a_workflow_whole(store: Store) -> None:
    wf = store.workflow("stop")
    a = wf.step("a", "q", "a", delay=3600)
    b = wf.step("b", "q", "b", after=[a])
    wf.step("c", "q", "c", after=[b])
    run = await wf.enqueue()
    assert await run.cancel() == 3  # a by hand, b and c along with it
    status = await run.status()
    assert status.finished and status.by_state() == {"cancelled": ["a", "b", "c"]}


@pytest.mark.producer
async def test_a_bad_graph_is_refused_before_anything_is_written(store: Store) -> None:
    wf = store.workflow("bad")
    a = wf.step("a", "q", 1)
    with pytest.raises(InvalidArgument, match="already has a step"):
        wf.step("a", "q", 2)
    with pytest.raises(InvalidArgument, match="not a step defined before"):
        wf.step("b", "q", 2, after=["nope"])
    with pytest.raises(InvalidArgument, match="after="):
        wf.step("c", "q", 2, depends_on=[1])
    other = store.workflow("other")
    with pytest.raises(InvalidArgument, match="another workflow"):
        other.step("x", "q", 1, after=[a])
    other.step("a", "q", 1)
    with pytest.raises(InvalidArgument, match="another workflow"):
        other.step("y", "q", 1, after=[a])  # even one named as one of this workflow's
    with pytest.raises(InvalidName):
        store.workflow("")
    with pytest.raises(InvalidArgument):
        await store.workflow_run(12345)
    assert (await store.queue("q").stats()).ready == 0


@pytest.mark.producer
async def test_steps_read_back_in_the_order_they_were_defined(store: Store) -> None:
    # Ids are handed out by kind (roots first, then waiting steps grouped by
    # how many they wait for): the order read back is the definition's.
    wf = store.workflow("ordered")
    a = wf.step("a", "q")
    b = wf.step("b", "q")
    wf.step("x", "q", after=[a])
    y = wf.step("y", "q", after=[a, b])
    wf.step("z", "q", after=[y])
    wf.step("late-root", "q")
    run = await wf.enqueue()
    assert list((await run.status()).steps) == ["a", "b", "x", "y", "z", "late-root"]
    assert run.job_ids["z"] < run.job_ids["y"]  # the case the order must not follow
