"""What ``alkstore.sync``'s facades need from an engine: run plans and hold a
transaction, blocking the calling thread (no event loop, no thread hop).

The blocking executors (``sqlite_blocking.py``, ``pg_blocking.py``) hold one
connection each, guarded by ``StoreLock``: a store may be shared by threads,
which then take turns (a caller's transaction holds the connection, and so
the lock, until it ends).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from ..protocol.dialect import Dialect
from ..protocol.machines.lifecycle import Lifecycle
from ..protocol.plan import Plan
from ..protocol.values.errors import UsageError

T = TypeVar("T")

# The same words as the async store's (``api.core.handle.reentry``).
REENTRY = (
    "this store's own methods cannot run inside its transaction on this thread "
    "(the transaction holds the store's connection): use the tx.* methods, or call after the "
    "block"
)


class BlockingSession(Protocol):
    def run(self, plan: Plan[T]) -> T: ...
    def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]: ...
    @property
    def ended(self) -> bool: ...
    def finish(self, commit: bool) -> None: ...


class BlockingExecutor(Protocol):
    @property
    def dialect(self) -> Dialect: ...

    def run(self, plan: Plan[T], bulk: bool = False) -> T:
        """Run ``plan`` in a transaction of its own (a read-only one for a
        ``ReadPlan``) and return its value."""
        ...

    def transaction(self) -> Any:
        """A context manager yielding a ``BlockingSession``: commit when the
        block ends normally, roll back when it raises, neither when the
        session was finished inside it."""
        ...

    def join(self, connection: Any) -> BlockingSession:
        """A session over the application's own connection and transaction."""
        ...

    def close(self) -> None: ...


class Session:
    """What every blocking session keeps (open or not) and how it ends; a
    session supplies ``_end``."""

    def __init__(self) -> None:
        self.lifecycle = Lifecycle("transaction")

    @property
    def ended(self) -> bool:
        return self.lifecycle.closed

    def finish(self, commit: bool) -> None:
        self.lifecycle.check()
        self.lifecycle.close()
        self._end(commit)

    def _end(self, commit: bool) -> None:
        raise NotImplementedError


S = TypeVar("S", bound=Session)


@contextmanager
def transaction_block(session: S) -> Iterator[S]:
    """``executor.transaction_block``, blocking: commit when the block ends
    normally, roll back when it raises, neither when the session was finished
    inside the block."""
    try:
        yield session
    except BaseException:
        if not session.ended:
            session.finish(False)
        raise
    if not session.ended:
        session.finish(True)


class StoreLock:
    """The store's one connection, taken by one thread at a time. A thread
    that holds it for a transaction and asks again is refused
    (``UsageError``) rather than left waiting for itself."""

    __slots__ = ("_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    @contextmanager
    def held(self, plan: Plan[Any] | None = None) -> Iterator[None]:
        me = threading.get_ident()
        if self._owner == me:
            if plan is not None:
                plan.close()
            raise UsageError(REENTRY)
        with self._lock:
            self._owner = me
            try:
                yield
            finally:
                self._owner = None
