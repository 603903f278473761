"""Workflows: a graph of named steps, each a job, enqueued in one
transaction and read back by step name (docs/workflows.md).

A step's dependencies are steps defined before it, so the graph is acyclic
by construction, and every step is enqueued with the rest or not at all: a
step with no dependency as a live job, the others as waiting jobs, their
edges, and the workflow's row naming each step's job. Every step is kept
(its finish is recorded, with its result, for its queue's results
retention), so the workflow can be read whole while it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..dialect import STATE_PROCESSING, Dialect
from ..plan import Plan, fetch_all, fetch_inserted_id, fetch_one, reads
from ..rows import _int, _opt_str, _str, result_value
from ..values import codec
from ..values.errors import InvalidArgument
from ..values.names import check_identifier, queue_channel
from ..values.timeconv import to_datetime
from ..values.types import NewJob
from .chunks import chunks
from .dependencies import allocate_ids


@dataclass(frozen=True, slots=True)
class NewStep:
    """A step about to be enqueued: its name, its job, and the names of the
    steps it waits for (all defined before it)."""

    name: str
    job: NewJob
    after: tuple[str, ...]
    on_failure: int


def check_step_name(name: object) -> str:
    return check_identifier(name, "step name")


def check_graph(steps: Sequence[NewStep]) -> None:
    """Names unique, and every dependency a step defined before the one
    that names it (so no cycle): ``InvalidArgument`` otherwise."""
    if not steps:
        raise InvalidArgument("a workflow needs at least one step")
    seen: set[str] = set()
    for step in steps:
        if step.name in seen:
            raise InvalidArgument(f"two steps are named {step.name!r}")
        for dep in step.after:
            if dep not in seen:
                raise InvalidArgument(
                    f"step {step.name!r} waits for {dep!r}, which is not a step defined before it"
                )
        seen.add(step.name)


def enqueue_workflow(
    d: Dialect, name: str, steps: Sequence[NewStep], origin: str, now_us: int
) -> Plan[tuple[int, dict[str, int]]]:
    """The workflow's id and each step's job id."""
    check_graph(steps)
    workflow_id = yield from fetch_inserted_id(d.create_workflow(name, now_us))
    ids: dict[str, int] = {}
    roots = [s for s in steps if not s.after]
    for root_chunk in chunks(roots):
        rows = yield from fetch_all(d.enqueue_many([s.job for s in root_chunk], now_us))
        for step, row_id in zip(root_chunk, sorted(_int(r[0], "id") for r in rows), strict=True):
            ids[step.name] = row_id
    for id_chunk in chunks([ids[s.name] for s in roots]):
        yield from fetch_all(d.keep_jobs(id_chunk))
    waiting = [s for s in steps if s.after]
    groups: dict[tuple[int, int], list[NewStep]] = {}
    for step in waiting:
        groups.setdefault((len(step.after), step.on_failure), []).append(step)
    for (remaining, on_failure), group in groups.items():
        for step_chunk in chunks(group):
            new_ids = yield from allocate_ids(d, len(step_chunk))
            for step, job_id in zip(step_chunk, new_ids, strict=True):
                ids[step.name] = job_id
            jobs = [s.job for s in step_chunk]
            yield d.enqueue_waiting(jobs, new_ids, remaining, on_failure, now_us)
    edges = [(ids[dep], ids[s.name], False) for s in waiting for dep in s.after]
    for edge_chunk in chunks(edges):
        yield d.add_dependencies(edge_chunk)
    for named in chunks([(s.name, ids[s.name], i) for i, s in enumerate(steps)]):
        yield d.add_workflow_steps(workflow_id, named)
    for queue in dict.fromkeys(s.job.queue for s in roots):
        yield d.notify(queue_channel(queue), origin, now_us)
    return workflow_id, ids


@dataclass(frozen=True, slots=True)
class StepStatus:
    """One step of a workflow as it stands: its job, its ``state``
    (``waiting``, ``pending``, ``processing``, ``acked``, ``cancelled``,
    ``dead``, or ``gone`` once its record was pruned), its ``result`` (an
    acked step's), ``error`` (a dead step's last error, or why a step was
    cancelled), ``reason`` (a dead step's), and the steps it waits for."""

    name: str
    job_id: int
    state: str
    queue: str | None = None
    result: codec.JSON = None
    error: str | None = None
    reason: str | None = None
    after: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        """Not waiting, pending or processing: it will not change again."""
        return self.state not in ("waiting", "pending", "processing")


@dataclass(frozen=True, slots=True)
class WorkflowStatus:
    """A workflow's steps by name, in the order they were defined."""

    id: int
    name: str
    created_at: datetime
    steps: dict[str, StepStatus]

    @property
    def finished(self) -> bool:
        """No step is waiting, pending or processing."""
        return all(s.finished for s in self.steps.values())

    @property
    def succeeded(self) -> bool:
        """Every step acked (a step whose record was pruned counts as acked)."""
        return all(s.state in ("acked", "gone") for s in self.steps.values())

    def by_state(self) -> dict[str, list[str]]:
        """The step names in each state."""
        out: dict[str, list[str]] = {}
        for s in self.steps.values():
            out.setdefault(s.state, []).append(s.name)
        return out

    @property
    def queues(self) -> tuple[str, ...]:
        """The queues its steps' jobs are in (as far as still recorded)."""
        return tuple(dict.fromkeys(s.queue for s in self.steps.values() if s.queue))


@reads
def workflow_status(d: Dialect, workflow_id: int) -> Plan[WorkflowStatus | None]:
    """The workflow and each step where it stands (one snapshot); None when
    there is no such workflow."""
    row = yield from fetch_one(d.workflow(workflow_id))
    if row is None:
        return None
    rows = yield from fetch_all(d.workflow_steps(workflow_id))
    edges = yield from fetch_all(d.workflow_edges(workflow_id))
    names = {_int(r[1], "job_id"): _str(r[0], "step") for r in rows}
    after: dict[int, list[str]] = {}
    for dep_id, job_id in edges:
        dep = names.get(_int(dep_id, "dep_id"))
        if dep is not None:
            after.setdefault(_int(job_id, "job_id"), []).append(dep)
    steps: dict[str, StepStatus] = {}
    for r in rows:
        name, job_id = _str(r[0], "step"), _int(r[1], "job_id")
        where, detail = _opt_str(r[2], "where"), r[3]
        if where == "live":
            # Read as text on both engines (the column it shares with outcomes).
            state = "processing" if str(detail) == str(STATE_PROCESSING) else "pending"
        elif where == "waiting":
            state = "waiting"
        elif where == "history":
            state = _str(detail, "outcome")
        elif where == "dead":
            state = "dead"
        else:
            state = "gone"
        steps[name] = StepStatus(
            name, job_id, state, _opt_str(r[6], "queue"),
            result=result_value(_opt_str(r[4], "result")) if state == "acked" else None,
            error=_opt_str(r[5], "error"),
            reason=_opt_str(detail, "reason") if state == "dead" else None,
            after=tuple(after.get(job_id, ())),
        )  # fmt: skip
    return WorkflowStatus(
        _int(row[0], "id"), _str(row[1], "name"), to_datetime(_int(row[2], "created_at")), steps
    )


@reads
def open_steps(d: Dialect, workflow_id: int) -> Plan[list[int]]:
    """The job ids of the workflow's steps still live or waiting, in id
    order (the last one defined last)."""
    rows = yield from fetch_all(d.workflow_open_steps(workflow_id))
    return [_int(r[0], "job_id") for r in rows]


@dataclass(frozen=True, slots=True)
class WorkflowSummary:
    """One workflow run as ``Store.list_workflows`` lists it: its id, name,
    creation time and number of steps."""

    id: int
    name: str
    created_at: datetime
    steps: int


@reads
def list_workflows(d: Dialect, before: int | None, limit: int) -> Plan[list[WorkflowSummary]]:
    """Workflows with ids below ``before`` (None: the newest), newest first."""
    rows = yield from fetch_all(d.workflow_page(2**63 - 1 if before is None else before, limit))
    return [
        WorkflowSummary(_int(r[0], "id"), _str(r[1], "name"),
                        to_datetime(_int(r[2], "created_at")), _int(r[3], "steps"))
        for r in rows
    ]  # fmt: skip
