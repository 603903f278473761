"""The blocking workflow facades of ``alkstore.sync``: build and enqueue a
workflow from synchronous code, and read, await (by polling: a blocking
store has no wake delivery) and cancel it. The same plans as the async
``Workflow`` and ``WorkflowRun``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..protocol.plans import dependencies
from ..protocol.plans import workflows as plans
from ..protocol.plans.workflows import WorkflowStatus
from ..protocol.values import codec
from ..protocol.values.errors import InvalidArgument, ResultTimeout
from ..protocol.values.timeconv import US_PER_S, Duration, duration_us
from .core import ops
from .workflow import WorkflowSteps, cancelled_since

T = TypeVar("T")
Run = Callable[..., Any]

# A blocking wait looks again after 5 ms, then twice as long each time, at
# most every 200 ms.
_FIRST_LOOK_S = 0.005
_LAST_LOOK_S = 0.2


def poll(look: Callable[[], T | None], timeout: Duration | None, what: str) -> T:
    """``look()`` until it gives something other than None, sleeping
    between looks; ``ResultTimeout`` past ``timeout``."""
    limit_s = None if timeout is None else duration_us(timeout, "timeout") / US_PER_S
    deadline = None if limit_s is None else time.monotonic() + limit_s
    pause = _FIRST_LOOK_S
    while True:
        got = look()
        if got is not None:
            return got
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ResultTimeout(what, limit_s or 0.0)
            pause = min(pause, left)
        time.sleep(pause)
        pause = min(pause * 2, _LAST_LOOK_S)


class _Finished:
    """A finished job's value (possibly None), told apart from "not yet"."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def result(
    run: Run, ctx: ops.OpContext, queue: str, job_id: int,
    timeout: Duration | None, as_type: type[T] | None,
) -> Any:  # fmt: skip
    """``Queue.result`` for a blocking store."""
    marked = False

    def look() -> _Finished | None:
        nonlocal marked
        end = run(dependencies.job_end(ctx.dialect, job_id))
        ops.check_result_queue(job_id, end, queue)
        if end.where == "live" and not marked:
            # Its finish must be recorded (as the async wait's is), or a
            # cancel without history would read as a result of None.
            marked = True
            run(dependencies.await_job(ctx.dialect, job_id))
            end = run(dependencies.job_end(ctx.dialect, job_id))
        return _Finished(ops.finished_value(job_id, end, as_type)) if end.finished else None

    return poll(look, timeout, f"job {job_id}").value


class Workflow(WorkflowSteps):
    """``alkstore.Workflow``, blocking: ``enqueue()`` runs on the calling thread."""

    def __init__(self, run: Run, ctx: ops.OpContext, name: str) -> None:
        super().__init__(ctx, name)
        self._run_plan = run

    def __repr__(self) -> str:
        return f"<alkstore.sync.Workflow {self.name!r}, {len(self._steps)} steps>"

    def enqueue(self) -> WorkflowRun:
        """Enqueue every step in one transaction (all or none); the run."""
        workflow_id, ids = self._run_plan(self.plan(), len(self._steps) > ops.INLINE_MAX)
        return WorkflowRun(self._run_plan, self._ctx, workflow_id, self.name, ids)


class WorkflowRun:
    """``alkstore.WorkflowRun``, blocking (``wait`` and ``result`` poll)."""

    def __init__(
        self, run: Run, ctx: ops.OpContext, workflow_id: int, name: str, job_ids: dict[str, int]
    ) -> None:
        self._run_plan = run
        self._ctx = ctx
        self.id = workflow_id
        self.name = name
        self.job_ids = dict(job_ids)

    def __repr__(self) -> str:
        return f"<alkstore.sync.WorkflowRun {self.id} {self.name!r}>"

    def status(self) -> WorkflowStatus:
        status = self._run_plan(plans.workflow_status(self._ctx.dialect, self.id))
        if status is None:
            raise InvalidArgument(f"no workflow {self.id} (or it was pruned)")
        return status  # type: ignore[no-any-return]

    def results(self) -> dict[str, codec.JSON]:
        return {s.name: s.result for s in self.status().steps.values() if s.state == "acked"}

    def result(
        self, step: str, *, timeout: Duration | None = None, as_type: type[T] | None = None
    ) -> Any:
        if step not in self.job_ids:
            raise InvalidArgument(f"workflow {self.id} has no step {step!r}")
        job_id = self.job_ids[step]
        queue = self._run_plan(dependencies.job_end(self._ctx.dialect, job_id)).queue
        if queue is None:
            return None  # its record was pruned
        return result(self._run_plan, self._ctx, queue, job_id, timeout, as_type)

    def wait(self, *, timeout: Duration | None = None) -> WorkflowStatus:
        # Each look reads which steps are still open (index probes), not
        # every step's record: the status is read once, at the end.
        def look() -> bool | None:
            return None if self._run_plan(plans.open_steps(self._ctx.dialect, self.id)) else True

        poll(look, timeout, f"workflow {self.id}")
        return self.status()

    def cancel(self) -> int:
        before = self.status()
        for s in before.steps.values():
            if not s.finished and s.queue is not None:
                self._run_plan(ops.cancel(self._ctx, s.queue, s.job_id))
        return cancelled_since(before, self.status())


def workflow_run(run: Run, ctx: ops.OpContext, workflow_id: int) -> WorkflowRun:
    status: WorkflowStatus | None = run(plans.workflow_status(ctx.dialect, workflow_id))
    if status is None:
        raise InvalidArgument(f"no workflow {workflow_id} (or it was pruned)")
    return WorkflowRun(run, ctx, status.id, status.name,
                       {s.name: s.job_id for s in status.steps.values()})  # fmt: skip


__all__ = ["Workflow", "WorkflowRun", "poll", "result", "workflow_run"]
