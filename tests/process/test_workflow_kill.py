"""Workers killed (SIGKILL) in the middle of a workflow, on each engine: the
workflow still completes with every step's result, a fan-in runs only once
every dependency finished and sees all their results, and no step waiting
for a failed one ever runs.

The workers are ``tests/process/helper.py workflow-worker`` processes; each
is killed and reaped by the end of the test, whatever happens.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

import pytest
import trio

from alkstore import Store
from tests.backends import BACKENDS, Backend, selected_backends

from .helper import read_log, workflow_step
from .test_cross_process import ROOT, STARTUP, helper_argv, helper_env

pytestmark = pytest.mark.slow

SQUARES = 24
VT = 1.0  # a killed worker's claims lapse within a second


@pytest.fixture(params=selected_backends(driver="trio"))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


async def enqueue_workflow(store: Store) -> Any:
    wf = store.workflow("killed")
    squares = [wf.step(f"sq{i}", "wf", {"n": i}) for i in range(SQUARES)]
    wf.step("total", "wf", {"sum": True}, after=squares)
    doomed = wf.step("doomed", "wf", {"fail": True}, max_attempts=1)
    wf.step("after_doomed", "wf", {"n": 100}, after=[doomed, squares[0]])
    wf.step("tolerant", "wf", {"n": 3}, after=[doomed], on_dependency_failure="run")
    return await wf.enqueue()


async def test_killed_workers_lose_no_step_and_run_none_early(
    backend: Backend, location: str, tmp_path: Any
) -> None:
    log = str(tmp_path / "steps.log")
    procs: list[trio.Process] = []

    async def start() -> trio.Process:
        proc = await trio.lowlevel.open_process(
            helper_argv("workflow-worker", backend.id, location, "wf", log, str(VT)),
            cwd=ROOT, env=helper_env(), stdin=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(proc)
        return proc

    def started_by(proc: trio.Process) -> list[list[str]]:
        return [e for e in read_log(log) if e[0] == "start" and e[2] == str(proc.pid)]

    killed_mid_step = 0
    async with backend.open(location, clock=None) as store:
        run = await enqueue_workflow(store)
        try:
            live = [await start(), await start()]
            with trio.fail_after(STARTUP * 2):
                for _ in range(4):
                    # Kill the oldest once it is running steps, mid-step.
                    victim = live.pop(0)
                    while not started_by(victim):
                        assert victim.returncode is None, "a worker process died on its own"
                        await trio.sleep(0.05)
                    await trio.sleep(0.3)
                    done = {e[1] for e in read_log(log) if e[0] == "done"}
                    killed_mid_step += any(e[1] not in done for e in started_by(victim))
                    os.kill(victim.pid, signal.SIGKILL)
                    await victim.wait()
                    assert victim.returncode == -signal.SIGKILL
                    live.append(await start())
            # The rest is this process's: its worker takes over once the
            # killed workers' claims lapse.
            async with trio.open_nursery() as nursery:
                for proc in live:
                    proc.kill()
                q = store.queue("wf", visibility_timeout=VT)
                nursery.start_soon(lambda: q.work(workflow_step(log), concurrency=4,
                                                  poll_interval=0.5))  # fmt: skip
                status = await run.wait(timeout=120)
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                for proc in procs:
                    if proc.returncode is None:
                        proc.kill()
                    await proc.wait()

    assert killed_mid_step >= 1, "no kill landed while a step was running"
    steps = status.steps
    for i in range(SQUARES):
        assert steps[f"sq{i}"].state == "acked" and steps[f"sq{i}"].result == i * i
    assert steps["total"].state == "acked"
    assert steps["total"].result == {"total": sum(i * i for i in range(SQUARES)), "count": SQUARES}
    assert steps["doomed"].state == "dead"
    assert steps["after_doomed"].state == "cancelled"
    assert steps["tolerant"].state == "acked" and steps["tolerant"].result == 9
    entries = read_log(log)
    # No fan-in ran before each of its dependencies had finished with a result.
    assert not [e for e in entries if e[0] == "early"]
    # The step waiting for the failed one never ran, in any process.
    assert str(steps["after_doomed"].job_id) not in {e[1] for e in entries if e[0] == "start"}
    # Each step ran to its end at least once; the killed ones again elsewhere.
    finished = {e[1] for e in entries if e[0] == "done"}
    for name, step in steps.items():
        if name not in ("doomed", "after_doomed"):
            assert str(step.job_id) in finished, name
