"""Awaiting a job's result: woken by its finish, in any process
(``Queue.result``, ``WorkflowRun.result``)."""

from __future__ import annotations

from typing import Any, TypeVar

from ...protocol.plans import dependencies
from ...protocol.values.errors import ResultTimeout
from ...protocol.values.names import done_channel
from ...protocol.values.timeconv import US_PER_S, Duration, duration_us
from . import ops
from .handle import StoreCore

T = TypeVar("T")


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
    limit_s = None if timeout is None else duration_us(timeout, "timeout") / US_PER_S
    runtime = core.runtime
    deadline = None if limit_s is None else runtime.monotonic() + limit_s
    marked = False
    async with core.subscribe(done_channel(queue)) as wakes:
        while True:
            end = await core.run(dependencies.job_end(core.dialect, job_id))
            ops.check_result_queue(job_id, end, queue)
            if end.finished:
                return ops.finished_value(job_id, end, as_type)
            if end.where == "live" and not marked:
                # Its finish must be recorded and wake us: then look again
                # (it may have finished before the mark).
                marked = True
                await core.run(dependencies.await_job(core.dialect, job_id))
                continue
            wait = ops.RESULT_BACKSTOP_S
            if deadline is not None:
                left = deadline - runtime.monotonic()
                if left <= 0:
                    raise ResultTimeout(f"job {job_id}", limit_s or 0.0)
                wait = min(wait, left)
            await wakes.recv_timeout(wait)
