"""The ``sqlite-sync`` and ``postgres-sync`` backends: ``alkstore.sync``
stores dressed as async ones, so the contract tests that make sense for a
producer run on them unedited.

Every call a test makes goes to the blocking store and runs there, at once,
on the test's thread; what it returns (or raises) comes back through an
awaitable that is already complete. The few calls a producer does not have
(claims, workers, subscriptions, listening) go to an async store opened on
the same database, as a worker in another process would: the listed
``CONSUMER`` names, and nothing else. Any other name the blocking store
lacks is an ``AttributeError``, so a test marked ``producer`` that uses one
fails instead of quietly testing the async store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager, asynccontextmanager
from typing import Any

import alkstore.sync

# The consumer side, which only the async stores have, by handle kind.
CONSUMER: dict[str, frozenset[str]] = {
    "store": frozenset({"listen"}),
    "queue": frozenset({"claim_one", "claim_batch", "ack_batch", "work", "sweep_expired",
                        "next_due"}),
    "stream": frozenset({"subscribe"}),
    "outbox": frozenset({"run_once", "work"}),
}  # fmt: skip


class NotOnSync(AttributeError):
    """A call the blocking store does not have, and not a consumer's: a test
    that makes it is not a producer test (``test_bad_input`` counts these
    and leaves them out on the blocking backends)."""


class Done:
    """An awaitable already complete: its value, or its exception."""

    __slots__ = ("_error", "_value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def __await__(self) -> Generator[Any, None, Any]:
        if self._error is not None:
            raise self._error
        return self._value
        yield  # a generator, never suspended


def _unwrap(value: Any) -> Any:
    return value._sync if isinstance(value, Proxy) else value


class Proxy:
    """A blocking handle whose methods return ``Done``; ``async_side``
    makes the async handle the consumer names go to."""

    _kind = ""

    def __init__(self, sync: Any, async_side: Callable[[], Any] | None) -> None:
        self._sync = sync
        self._async_side = async_side

    def __repr__(self) -> str:
        return f"<sync {self._sync!r}>"

    def __getattr__(self, name: str) -> Any:
        if name in CONSUMER.get(self._kind, ()) and self._async_side is not None:
            return getattr(self._async_side(), name)
        try:
            attr = getattr(self._sync, name)
        except AttributeError:
            raise NotOnSync(f"alkstore.sync has no {self._kind} {name!r}") from None
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Done:
            args = tuple(_unwrap(a) for a in args)
            kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
            try:
                return Done(self._wrap(name, attr(*args, **kwargs)))
            except BaseException as exc:
                return Done(error=exc)

        return call

    def _wrap(self, name: str, value: Any) -> Any:
        if name == "workflow_run":
            return WorkflowRunProxy(value, None)
        return value


class TxProxy(Proxy):
    _kind = "tx"


class QueueProxy(Proxy):
    _kind = "queue"


class StreamProxy(Proxy):
    _kind = "stream"


class OutboxProxy(Proxy):
    _kind = "outbox"

    @property
    def queue(self) -> QueueProxy:
        side = self._async_side
        return QueueProxy(self._sync.queue, None if side is None else lambda: side().queue)


class WorkflowRunProxy(Proxy):
    _kind = "workflow run"

    @property
    def id(self) -> int:
        return int(self._sync.id)

    @property
    def job_ids(self) -> dict[str, int]:
        return dict(self._sync.job_ids)


class WorkflowProxy(Proxy):
    """A blocking workflow: ``step`` builds (no IO, as on the async one),
    ``enqueue`` runs and hands back the run."""

    _kind = "workflow"

    def step(self, *args: Any, **kwargs: Any) -> Any:
        return self._sync.step(*args, **kwargs)

    def _wrap(self, name: str, value: Any) -> Any:
        return WorkflowRunProxy(value, None) if name == "enqueue" else value


@asynccontextmanager
async def _entered(
    cm: AbstractContextManager[Any], wrap: Callable[[Any], Any]
) -> AsyncIterator[Any]:
    """A blocking context manager as an async one (entered and left at once)."""
    with cm as value:
        yield wrap(value)


class StoreProxy(Proxy):
    """A blocking store, and the async one beside it for the consumer side."""

    _kind = "store"

    @property
    def consumer_side(self) -> Any:
        """The async store beside the blocking one (claims, locks, schedules
        a test sets up before calling the producer's methods)."""
        assert self._async_side is not None
        return self._async_side()

    def __getattr__(self, name: str) -> Any:
        if name in ("queue", "stream", "outbox"):
            kinds = {"queue": QueueProxy, "stream": StreamProxy, "outbox": OutboxProxy}
            make, sync_make = kinds[name], getattr(self._sync, name)

            def handle(*args: Any, **kwargs: Any) -> Any:
                side = self._async_side
                assert side is not None
                return make(
                    sync_make(*args, **kwargs), lambda: getattr(side(), name)(*args, **kwargs)
                )

            return handle
        if name == "workflow":
            return lambda *args: WorkflowProxy(self._sync.workflow(*args), None)
        if name in ("transaction", "join"):
            opener = getattr(self._sync, name)

            def block(*args: Any) -> AbstractAsyncContextManager[Any]:
                return _entered(opener(*args), lambda tx: TxProxy(tx, None))

            return block
        return super().__getattr__(name)


def _open_sync(engine: str, location: str, kw: dict[str, Any]) -> Any:
    kw = dict(kw)
    kw.pop("housekeeping_interval", None)  # a blocking store runs no housekeeping
    if engine == "sqlite":
        return alkstore.sync.open_sqlite(location, **kw)
    from tests.backends import PG_DSN

    options = kw.pop("options", None) or alkstore.sync.PostgresOptions(schema=location)
    return alkstore.sync.open_postgres(PG_DSN, options=options, **kw)


def opener(engine: str, companion: Callable[..., AbstractAsyncContextManager[Any]]) -> Callable[
    ..., AbstractAsyncContextManager[Any]
]:
    """A backend's ``open_at``: the blocking store, with ``companion`` (an
    async backend's opener) on the same database for the consumer side."""

    @asynccontextmanager
    async def open_at(location: str, **kw: Any) -> AsyncIterator[StoreProxy]:
        with _open_sync(engine, location, kw) as sync:
            async with companion(location, **kw) as other:
                yield StoreProxy(sync, lambda: other)

    return open_at
