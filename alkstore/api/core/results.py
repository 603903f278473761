"""Awaiting a job's result: woken by its finish, in any process
(``Queue.result``, ``WorkflowRun.result``)."""

from __future__ import annotations

from typing import Any, TypeVar

from ...protocol.plans import dependencies
from ...protocol.values.errors import ResultTimeout
from ...protocol.values.names import done_channel
from ...protocol.values.timeconv import US_PER_S, Duration, duration_us
from ...runner.runtime import Runtime
from . import ops
from .handle import StoreCore
from .wakes import WakeReceiver

T = TypeVar("T")


class Deadline:
    """When a wait for a finish gives up: ``timeout`` from now on the
    runtime's monotonic clock (None: never)."""

    __slots__ = ("_at", "_limit_s", "_runtime")

    def __init__(self, runtime: Runtime, timeout: Duration | None) -> None:
        self._runtime = runtime
        self._limit_s = None if timeout is None else duration_us(timeout, "timeout") / US_PER_S
        self._at = None if self._limit_s is None else runtime.monotonic() + self._limit_s

    def next_wait(self, what: str) -> float:
        """How long the next wait may last (the backstop at most);
        ``ResultTimeout`` naming ``what`` once the deadline passed."""
        if self._at is None:
            return ops.RESULT_BACKSTOP_S
        left = self._at - self._runtime.monotonic()
        if left <= 0:
            raise ResultTimeout(what, self._limit_s or 0.0)
        return min(ops.RESULT_BACKSTOP_S, left)


async def until_finished(
    core: StoreCore,
    wakes: WakeReceiver,
    job_id: int,
    deadline: Deadline,
    what: str,
    queue: str | None = None,
) -> dependencies.JobEnd:
    """Job ``job_id``'s end once it finished, woken by ``wakes`` (subscribed
    to its queue's done channel before the first read, so a finish in
    between still wakes). A live job is marked kept first, so that its
    finish is recorded and wakes; ``queue``: the job must be of it."""
    marked = False
    while True:
        end = await core.run(dependencies.job_end(core.dialect, job_id))
        if queue is not None:
            ops.check_result_queue(job_id, end, queue)
        if end.finished:
            return end
        if end.where == "live" and not marked:
            # Then look again: it may have finished before the mark.
            marked = True
            await core.run(dependencies.await_job(core.dialect, job_id))
            continue
        await wakes.recv_timeout(deadline.next_wait(what))


async def await_result(
    core: StoreCore,
    queue: str,
    job_id: int,
    timeout: Duration | None,
    as_type: type[T] | None,
) -> Any:
    """Job ``job_id``'s result (``ops.finished_value``) once it finished,
    waiting meanwhile for the done wakes of ``queue`` (its queue: another
    queue's job is refused), for up to ``timeout``."""
    deadline = Deadline(core.runtime, timeout)
    async with core.subscribe(done_channel(queue)) as wakes:
        end = await until_finished(core, wakes, job_id, deadline, f"job {job_id}", queue)
    return ops.finished_value(job_id, end, as_type)
