"""The scheduler: cron and interval schedules that enqueue into ordinary queues."""

from __future__ import annotations

import logging
from typing import Any

from ..api.core.handle import StoreCore
from ..protocol.machines import scheduler
from ..protocol.plans import schedule as plans
from ..protocol.values.errors import AlkstoreError
from ..protocol.values.names import check_name
from ..protocol.values.types import QueueOptions

_DEFAULT_ATTEMPTS = QueueOptions().max_attempts
log = logging.getLogger("alkstore.scheduler")


async def unschedule(core: StoreCore, name: str) -> bool:
    return await core.run(plans.unregister(core.dialect, check_name(name, "schedule")))


async def tick(core: StoreCore) -> int:
    total = 0
    while True:
        fired, rows = await core.run(
            plans.tick_rows(core.dialect, core.now_us(), core.origin, _DEFAULT_ATTEMPTS)
        )
        total += len(fired)
        if rows < plans.TICK_BATCH:
            return total


async def run_now(core: StoreCore, name: str) -> int | None:
    name = check_name(name, "schedule")
    return await core.run(
        plans.run_now(core.dialect, name, core.now_us(), core.origin, _DEFAULT_ATTEMPTS)
    )


async def run_scheduler(
    core: StoreCore, *, max_sleep: float = 60.0, retry_after: float = 1.0, task_status: Any = None
) -> None:
    """Tick whenever a schedule falls due, until cancelled.

    Safe to run in every process: the database decides which tick enqueues
    each fire time. Schedules added by other processes are noticed within
    ``max_sleep`` seconds.
    """
    runtime = core.runtime
    core.check_writable("run_scheduler()")  # else every tick fails, retried forever
    loop = scheduler.SchedulerLoop(max_sleep, retry_after)  # checks both, before anything runs
    if task_status is not None:
        task_status.started()
    while True:
        action = loop.next_action()
        if isinstance(action, scheduler.Sleep):
            await runtime.sleep(action.seconds)
            loop.slept()
            continue
        try:
            await tick(core)
            nxt = await core.run(plans.next_fire(core.dialect))
        except AlkstoreError:
            pause = loop.tick_failed()
            log.warning("scheduler tick failed; retrying in %s s", pause, exc_info=True)
            continue
        loop.ticked(core.now_us(), nxt)
