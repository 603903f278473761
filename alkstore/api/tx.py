"""``Transaction``: the caller's own SQL and alkstore's operations, one commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from ..protocol import codec, queues, streams
from ..protocol import wakes as wake_plans
from ..protocol.errors import InvalidArgument, UsageError, brief
from ..protocol.lifecycle import Lifecycle
from ..protocol.names import check_identifier, check_key, check_name, outbox_queue_name
from ..protocol.plan import Plan
from ..protocol.types import OUTBOX_OPTIONS, EnqueueOptions, QueueOptions, resolve_enqueue
from ..runner.executor import TxSession
from .outbox import Outbox
from .queue import Queue

if TYPE_CHECKING:
    from .store import Store

_DEFAULTS = QueueOptions()


class Transaction:
    """Everything done through this handle commits together or not at all.

    Wakes from ``notify``, ``enqueue`` and ``publish`` fire only after commit;
    a rolled-back transaction wakes nobody. After the block ends the handle
    raises ``Closed``.
    """

    def __init__(self, store: Store, session: TxSession, *, joined: bool = False) -> None:
        self._store = store
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
            raise UsageError(
                "a joined transaction is the application's: commit or roll back its connection"
            )
        # A cancellation point where it starts, like every operation: a
        # cancel already pending is taken here, with nothing done and the
        # handle still open (the block's end then rolls back).
        await self._store._runtime.cancel_point()
        self._lifecycle.close()
        self._finished = True
        await self._store._end_transaction(self._session, commit)

    async def _run(self, plan: Plan[Any]) -> Any:
        self._lifecycle.check(plan)
        return await self._session.run(plan)

    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run the caller's own SQL (engine placeholders); returns any rows."""
        self._lifecycle.check()
        if not isinstance(sql, str):
            raise InvalidArgument(f"sql must be a str, got {brief(sql)}")
        if isinstance(params, str | bytes) or not isinstance(params, Sequence | dict):
            raise InvalidArgument(f"params must be a sequence or a dict, got {brief(params)}")
        return await self._session.execute(sql, params)

    async def enqueue(
        self, queue: str | Queue, payload: codec.JSON, **options: Unpack[EnqueueOptions]
    ) -> int:
        """Enqueue into ``queue`` (a name, or a ``Queue`` whose defaults apply),
        with ``Queue.enqueue``'s options; returns the job's id."""
        if isinstance(queue, Queue):
            name, defaults = queue.name, queue._options
        else:
            name, defaults = check_name(queue, "queue"), _DEFAULTS
        return await self._enqueue(name, defaults, payload, **options)

    async def _enqueue(
        self,
        name: str,
        defaults: QueueOptions,
        payload: codec.JSON,
        **options: Unpack[EnqueueOptions],
    ) -> int:
        store = self._store
        now = store._now_us()
        job = resolve_enqueue(name, payload, now, defaults, **options)
        if store._telemetry is not None:
            return await store._telemetry.enqueue(
                job, lambda j: self._run(queues.enqueue(store._dialect, j, store._origin, now))
            )
        return int(await self._run(queues.enqueue(store._dialect, job, store._origin, now)))

    async def outbox_enqueue(
        self, outbox: str | Outbox, payload: codec.JSON, **options: Unpack[EnqueueOptions]
    ) -> int:
        """Enqueue a message into ``outbox`` (a name, or an ``Outbox`` whose defaults apply),
        delivered only if this transaction commits; returns its id."""
        if isinstance(outbox, Outbox):
            name, defaults = outbox.queue.name, outbox.queue._options
        else:
            name = outbox_queue_name(check_name(outbox, "outbox"))
            defaults = OUTBOX_OPTIONS
        return await self._enqueue(name, defaults, payload, **options)

    async def publish(self, stream: str, payload: codec.JSON) -> int:
        """``Stream.publish`` inside this transaction: the event exists, and wakes fire, only if it
        commits."""
        return await self._publish(check_name(stream, "stream"), None, payload)

    async def publish_with_key(self, stream: str, key: str, payload: codec.JSON) -> int:
        """``Stream.publish_with_key`` inside this transaction."""
        return await self._publish(check_name(stream, "stream"), check_key(key), payload)

    async def _publish(self, stream: str, key: str | None, payload: codec.JSON) -> int:
        store = self._store
        text = codec.encode(payload)
        plan = streams.publish(store._dialect, stream, key, text, store._origin, store._now_us())
        if store._telemetry is not None:
            return await store._telemetry.publish(stream, self._run(plan))
        return int(await self._run(plan))

    async def notify(self, channel: str, payload: codec.JSON = None) -> None:
        """``Store.notify`` inside this transaction: the wake fires only after commit."""
        store = self._store
        channel = check_name(channel, "channel")
        store._check_notify_payload(payload)
        await self._run(wake_plans.notify(store._dialect, channel, store._origin, store._now_us()))

    async def save_offset(self, stream: str, consumer: str, offset: int) -> None:
        """``Stream.save_offset`` inside this transaction: the checkpoint
        commits with your writes."""
        stream = check_name(stream, "stream")
        consumer = check_identifier(consumer, "consumer")
        offset = streams.check_offset(offset)
        await self._run(streams.save_offset(self._store._dialect, stream, consumer, offset))

