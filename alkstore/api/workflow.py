"""``Workflow``: named steps with dependencies between them, enqueued whole
in one transaction; ``WorkflowRun``: an enqueued workflow, read back,
awaited and cancelled by step name (docs/workflows.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, Unpack

from ..protocol.plan import Plan
from ..protocol.plans import dependencies
from ..protocol.plans import workflows as plans
from ..protocol.plans.workflows import NewStep, StepStatus, WorkflowStatus
from ..protocol.values import codec
from ..protocol.values.errors import InvalidArgument
from ..protocol.values.names import check_identifier, done_channel
from ..protocol.values.timeconv import Duration
from ..protocol.values.types import EnqueueOptions, NewJob
from .core import ops
from .core.handle import StoreCore
from .core.results import Deadline, await_result, until_finished

T = TypeVar("T")


class Step:
    """One step of a ``Workflow``: made by ``Workflow.step``, named to
    other steps' ``after``."""

    __slots__ = ("_job", "after", "name", "on_failure")

    def __init__(self, name: str, job: NewJob, after: tuple[str, ...], on_failure: int) -> None:
        self.name = name
        self._job = job
        self.after = after
        self.on_failure = on_failure

    def __repr__(self) -> str:
        return f"Step({self.name!r})"


class WorkflowSteps:
    """The steps of a workflow being built, for the async ``Workflow`` and
    the blocking ``alkstore.sync`` one alike. No IO."""

    def __init__(self, ctx: ops.OpContext, name: str) -> None:
        self._ctx = ctx
        self.name = check_identifier(name, "workflow name")
        self._steps: dict[str, Step] = {}

    @property
    def steps(self) -> list[Step]:
        """The steps added so far, in the order they were added."""
        return list(self._steps.values())

    def step(
        self,
        name: str,
        queue: str | ops.QueueHandle,
        payload: codec.JSON = None,
        *,
        after: Iterable[Step | str] = (),
        **options: Unpack[EnqueueOptions],
    ) -> Step:
        """Add step ``name``: a job of ``queue`` (a name, or a ``Queue``
        whose defaults apply) with ``payload`` and ``Queue.enqueue``'s
        options (``depends_on`` excepted: that is ``after``;
        ``on_dependency_failure`` applies to ``after``). Raises
        ``InvalidArgument`` for a name already used or a step of ``after``
        not defined before."""
        name = plans.check_step_name(name)
        if name in self._steps:
            raise InvalidArgument(f"workflow {self.name!r} already has a step {name!r}")
        if options.get("depends_on") is not None:
            raise InvalidArgument("a step waits for other steps with after=[...], not depends_on")
        if isinstance(after, str | Step):
            after = [after]
        after = list(after)
        for s in after:
            if isinstance(s, Step) and self._steps.get(s.name) is not s:
                raise InvalidArgument(
                    f"step {name!r} waits for {s!r}, a step of another workflow (name the "
                    "steps of this one)"
                )
        names = tuple(dict.fromkeys(s.name if isinstance(s, Step) else s for s in after))
        for dep in names:
            if dep not in self._steps:
                raise InvalidArgument(
                    f"step {name!r} waits for {dep!r}, which is not a step defined before it"
                )
        queue_name, defaults = ops.queue_target(queue)
        job = ops.new_job(queue_name, payload, self._ctx.now_us(), defaults, **options)
        step = Step(name, job, names, job.on_dependency_failure)
        self._steps[name] = step
        return step

    def plan(self) -> Plan[tuple[int, dict[str, int]]]:
        """The plan that enqueues every step in one transaction (all or
        none): the workflow's id, and each step's job id."""
        ctx = self._ctx
        steps = [NewStep(s.name, s._job, s.after, s.on_failure) for s in self._steps.values()]
        return plans.enqueue_workflow(ctx.dialect, self.name, steps, ctx.origin, ctx.now_us())


class Workflow(WorkflowSteps):
    """A graph of named steps to enqueue together. No IO until ``enqueue``.

    ``step(name, queue, payload, after=[...])`` adds a step: a job in
    ``queue`` that waits for every step of ``after`` (steps of this workflow,
    defined before it, so the graph has no cycle) to finish. Chain, group,
    chord and any other shape are steps and their ``after``."""

    def __init__(self, core: StoreCore, name: str) -> None:
        super().__init__(core, name)
        self._core = core

    def __repr__(self) -> str:
        return f"Workflow({self.name!r}, {len(self._steps)} steps)"

    async def enqueue(self) -> WorkflowRun:
        """Enqueue every step in one transaction (all or none); the run."""
        core = self._core
        workflow_id, ids = await core.run(self.plan(), bulk=len(self._steps) > ops.INLINE_MAX)
        return WorkflowRun(core, workflow_id, self.name, ids)


def cancelled_since(before: WorkflowStatus, after: WorkflowStatus) -> int:
    """How many steps unfinished in ``before`` are cancelled in ``after``."""
    return sum(
        1 for name, s in before.steps.items()
        if not s.finished and after.steps[name].state == "cancelled"
    )  # fmt: skip


class WorkflowRun:
    """An enqueued workflow: its ``id``, and each step's job id
    (``job_ids``). Reads see the store now; nothing is cached."""

    def __init__(
        self, core: StoreCore, workflow_id: int, name: str, job_ids: dict[str, int]
    ) -> None:
        self._core = core
        self.id = workflow_id
        self.name = name
        self.job_ids = dict(job_ids)

    def __repr__(self) -> str:
        return f"WorkflowRun({self.id}, {self.name!r})"

    async def status(self) -> WorkflowStatus:
        """Every step where it stands (one snapshot)."""
        core = self._core
        status = await core.run(plans.workflow_status(core.dialect, self.id))
        if status is None:
            raise InvalidArgument(f"no workflow {self.id} (or it was pruned)")
        return status

    async def results(self) -> dict[str, codec.JSON]:
        """The results of the steps that finished acked, by step name."""
        status = await self.status()
        return {s.name: s.result for s in status.steps.values() if s.state == "acked"}

    async def result(
        self, step: str, *, timeout: Duration | None = None, as_type: type[T] | None = None
    ) -> Any:
        """Step ``step``'s result, once it finished: ``Queue.result`` for its job."""
        if step not in self.job_ids:
            raise InvalidArgument(f"workflow {self.id} has no step {step!r}")
        core = self._core
        job_id = self.job_ids[step]
        end = await core.run(dependencies.job_end(core.dialect, job_id))
        if end.queue is None:
            return None  # its record was pruned
        return await await_result(core, end.queue, job_id, timeout, as_type)

    async def wait(self, *, timeout: Duration | None = None) -> WorkflowStatus:
        """Wait until no step is waiting, pending or processing (woken by
        each step's finish, in any process); the status then. Failed
        steps do not raise: look at the status's states. ``ResultTimeout``
        past ``timeout``."""
        # Waits on the newest unfinished step, one cheap read per wake, and
        # looks at the rest only once that one finished: never a read of
        # every step per wake, which a workflow of 10,000 steps would feel.
        core = self._core
        deadline = Deadline(core.runtime, timeout)
        while open_ := await core.run(plans.open_steps(core.dialect, self.id)):
            target = open_[-1]
            end = await core.run(dependencies.job_end(core.dialect, target))
            if end.queue is None:
                continue  # it finished since
            async with core.subscribe(done_channel(end.queue)) as wakes:
                await until_finished(core, wakes, target, deadline, f"workflow {self.id}")
        return await self.status()

    async def cancel(self) -> int:
        """Cancel every step still waiting, pending or processing (what
        waits for them is cancelled with them); how many steps this
        cancelled, those cancelled along with another included."""
        core = self._core
        before = await self.status()
        for s in before.steps.values():
            if not s.finished and s.queue is not None:
                await core.run(ops.cancel(core, s.queue, s.job_id))
        return cancelled_since(before, await self.status())


__all__ = ["Step", "StepStatus", "Workflow", "WorkflowRun", "WorkflowStatus"]
