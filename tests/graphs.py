"""Dependency graphs in known states, for the tests of the commands and
pages that show them (tests/cli/test_workflows.py, tests/dashboard/test_workflows.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alkstore import Store, WorkflowRun


@dataclass(frozen=True)
class Graphs:
    quote: WorkflowRun
    deploy: WorkflowRun
    chain: tuple[int, int, int]


async def enqueue_graphs(store: Store, *, tea_result: Any, build_error: str) -> Graphs:
    """Two workflow runs and a chain of plain jobs: ``quote`` under way (tea
    acked with ``tea_result``; cups pending; total and mail waiting),
    ``deploy`` with a dead step (build failed with ``build_error``: ship
    cancelled, cleanup released by its ``run`` policy), and a <- b <- c in
    queue ``reports``, a pending and the rest waiting."""
    wf = store.workflow("quote")
    tea = wf.step("tea", "tasks", {"item": "tea"})
    cups = wf.step("cups", "tasks", {"item": "cups"})
    total = wf.step("total", "tasks", {"do": "total"}, after=[tea, cups])
    wf.step("mail", "mail", {"do": "mail"}, after=[total])
    quote = await wf.enqueue()
    job = await store.queue("tasks").claim_one("w")
    assert job is not None and job.id == quote.job_ids["tea"]
    assert await job.ack(result=tea_result)

    wf = store.workflow("deploy")
    build = wf.step("build", "deploys", "build", max_attempts=1)
    wf.step("ship", "deploys", "ship", after=[build])
    wf.step("cleanup", "deploys", "cleanup", after=[build], on_dependency_failure="run")
    deploy = await wf.enqueue()
    job = await store.queue("deploys").claim_one("w")
    assert job is not None and job.id == deploy.job_ids["build"]
    assert await job.fail(build_error)

    reports = store.queue("reports")
    a = await reports.enqueue({"step": "extract"})
    b = await reports.enqueue({"step": "render"}, depends_on=[a])
    c = await reports.enqueue({"step": "send"}, depends_on=[b])
    return Graphs(quote, deploy, (a, b, c))
