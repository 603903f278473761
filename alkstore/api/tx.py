"""``Transaction``: the caller's own SQL and alkstore's operations, one commit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, Unpack

from ..protocol.machines.lifecycle import Lifecycle
from ..protocol.plan import Plan
from ..protocol.values import codec
from ..protocol.values.errors import UsageError
from ..protocol.values.names import check_name
from ..protocol.values.timeconv import Duration
from ..protocol.values.types import Enqueued, EnqueueOptions, NewJob, QueueOptions
from ..runner.executor import TxSession
from .core import ops
from .core.handle import StoreCore

# A joined transaction belongs to the application: the handle refuses to end it.
JOINED_FINISH = "a joined transaction is the application's: commit or roll back its connection"


class WorkflowPlan(Protocol):
    """A workflow as a transaction enqueues it (an ``alkstore.Workflow``)."""

    def plan(self) -> Plan[tuple[int, dict[str, int]]]:
        """The plan that enqueues it."""
        ...


class Transaction:
    """Everything done through this handle commits together or not at all.

    Wakes from ``notify``, ``enqueue`` and ``publish`` fire only after commit;
    a rolled-back transaction wakes nobody. After the block ends the handle
    raises ``Closed``.
    """

    def __init__(self, core: StoreCore, session: TxSession, *, joined: bool = False) -> None:
        self._core = core
        self._session = session
        self._joined = joined
        self._lifecycle = Lifecycle("transaction")
        # Committed or rolled back through the handle, before the block ended.
        self._finished = False

    def _close(self) -> None:
        self._lifecycle.close()

    async def commit(self) -> None:
        """Commit now. The handle is closed afterwards (every method raises
        ``Closed``) and the end of the block does nothing more. Raises
        ``DatabaseError`` if the database refused (nothing committed) and
        ``CommitUnknown`` if its answer never came."""
        await self._finish(True)

    async def rollback(self) -> None:
        """Roll back now; the handle is closed, the block's end does nothing more."""
        await self._finish(False)

    async def _finish(self, commit: bool) -> None:
        self._lifecycle.check()
        if self._joined:
            raise UsageError(JOINED_FINISH)
        # A cancellation point where it starts, like every operation: a
        # cancel already pending is taken here, with nothing done and the
        # handle still open (the block's end then rolls back).
        await self._core.runtime.cancel_point()
        self._lifecycle.close()
        self._finished = True
        await self._core.end_transaction(self._session, commit)

    async def _run(self, plan: Plan[Any]) -> Any:
        self._lifecycle.check(plan)
        return await self._session.run(plan)

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run the caller's own SQL (engine placeholders); returns any rows."""
        self._lifecycle.check()
        return await self._session.execute(*ops.check_sql(sql, params))

    async def enqueue_workflow(self, workflow: WorkflowPlan) -> tuple[int, dict[str, int]]:
        """Enqueue every step of ``workflow`` (a ``Workflow`` of this store)
        in this transaction: they commit with it or not at all. Returns the
        workflow's id and each step's job id (``store.workflow_run(id)``
        reads it back once committed)."""
        self._lifecycle.check()
        return await self._run(workflow.plan())  # type: ignore[no-any-return]

    async def enqueue(
        self, queue: str | ops.QueueHandle, payload: codec.JSON, **options: Unpack[EnqueueOptions]
    ) -> int:
        """Enqueue into ``queue`` (a name, or a ``Queue`` whose defaults apply),
        with ``Queue.enqueue``'s options; returns the job's id."""
        name, defaults = ops.queue_target(queue)
        return await self._enqueue(name, defaults, payload, **options)

    async def _enqueue(
        self,
        name: str,
        defaults: QueueOptions,
        payload: codec.JSON,
        **options: Unpack[EnqueueOptions],
    ) -> int:
        core = self._core
        now = core.now_us()
        job = ops.new_job(name, payload, now, defaults, **options)
        return int(await core.telemetry.enqueue(job, lambda j: self._run(ops.insert(core, j, now))))

    async def enqueue_unique(
        self,
        queue: str | ops.QueueHandle,
        payload: codec.JSON,
        key: str,
        *,
        unique_for: Duration | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> Enqueued:
        """``Queue.enqueue_unique`` inside this transaction: the job (or the
        key's claim) exists only if it commits."""
        name, defaults = ops.queue_target(queue)
        core = self._core
        now = core.now_us()
        for_us = ops.check_unique_for(unique_for)
        job, key = ops.new_unique_job(name, payload, key, now, defaults, options)
        return await run_unique(core, self._run, job, key, for_us, now)

    async def outbox_enqueue(
        self, outbox: str | ops.OutboxHandle, payload: codec.JSON, **options: Unpack[EnqueueOptions]
    ) -> int:
        """Enqueue a message into ``outbox`` (a name, or an ``Outbox`` whose defaults apply),
        delivered only if this transaction commits; returns its id."""
        name, defaults = ops.outbox_target(outbox)
        return await self._enqueue(name, defaults, payload, **options)

    async def publish(self, stream: str, payload: codec.JSON) -> int:
        """``Stream.publish`` inside this transaction: the event exists, and wakes fire, only if it
        commits."""
        name = check_name(stream, "stream")
        return await self._publish(name, ops.publish(self._core, name, None, payload))

    async def publish_with_key(self, stream: str, key: str, payload: codec.JSON) -> int:
        """``Stream.publish_with_key`` inside this transaction."""
        name = check_name(stream, "stream")
        return await self._publish(name, ops.publish_keyed(self._core, name, key, payload))

    async def _publish(self, stream: str, plan: Plan[int]) -> int:
        return int(await self._core.telemetry.publish(stream, self._run(plan)))

    async def notify(self, channel: str, payload: codec.JSON = None) -> None:
        """``Store.notify`` inside this transaction: the wake fires only after commit."""
        await self._run(ops.notify(self._core, channel, payload))

    async def save_offset(self, stream: str, consumer: str, offset: int) -> None:
        """``Stream.save_offset`` inside this transaction: the checkpoint
        commits with your writes."""
        name = check_name(stream, "stream")
        await self._run(ops.save_offset(self._core, name, consumer, offset))



async def run_unique(
    core: StoreCore,
    run: Callable[[Plan[Enqueued]], Awaitable[Enqueued]],
    job: NewJob,
    key: str,
    unique_for_us: int | None,
    now: int,
) -> Enqueued:
    """Run a unique enqueue with ``run`` (a store's or a transaction's),
    through the telemetry's enqueue hook (it sets the job's headers; the
    hook sees the id, new or not)."""
    done: list[Enqueued] = []

    async def insert(j: NewJob) -> int:
        result = await run(ops.insert_unique(core, j, key, unique_for_us, now))
        done.append(result)
        return result.id

    await core.telemetry.enqueue(job, insert)
    return done[0]
