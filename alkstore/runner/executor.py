"""What the facades need from an engine+driver pair: run plans, hold a transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol, TypeVar

from ..protocol.dialect import Dialect
from ..protocol.machines.lifecycle import Lifecycle
from ..protocol.plan import Plan
from ..protocol.values.errors import CommitUnknown
from .runtime import Runtime

T = TypeVar("T")


class TxSession(Protocol):
    async def run(self, plan: Plan[T]) -> T: ...
    async def execute(
        self, sql: str, params: Sequence[Any] | dict[str, Any]
    ) -> list[tuple[Any, ...]]: ...
    @property
    def wakes(self) -> list[str]:
        """Channels notified so far; woken locally only after commit."""
        ...

    @property
    def ended(self) -> bool:
        """True once ``finish`` was called: the block's end then does nothing."""
        ...

    async def finish(self, commit: bool) -> None:
        """Commit (or roll back) now; the session is closed whatever happens."""
        ...


class Session:
    """What every ``TxSession`` keeps (open or not, the channels notified so
    far) and how it ends; a session supplies ``_end``."""

    def __init__(self) -> None:
        self._wakes: list[str] = []
        self.lifecycle = Lifecycle("transaction")

    @property
    def wakes(self) -> list[str]:
        return self._wakes

    @property
    def ended(self) -> bool:
        return self.lifecycle.closed

    def check_open(self, plan: Plan[Any] | None = None) -> None:
        """``Closed`` once the session ended (closing ``plan`` first)."""
        self.lifecycle.check(plan)

    async def finish(self, commit: bool) -> None:
        self.lifecycle.check()
        self.lifecycle.close()
        try:
            await self._end(commit)
        except CommitUnknown as exc:
            exc.wakes = tuple(self._wakes)  # it may have committed: wake anyway
            raise

    async def _end(self, commit: bool) -> None:
        raise NotImplementedError


S = TypeVar("S", bound=Session)


@asynccontextmanager
async def transaction_block(session: S, runtime: Runtime) -> AsyncIterator[S]:
    """The block of a caller's transaction, on every executor: commit when it
    ends normally (a cancel that came before COMMIT is taken first, and rolls
    back), roll back when it raises, neither when the session was finished
    inside the block."""
    try:
        yield session
        if not session.ended:
            await runtime.cancel_point()
    except BaseException:
        if not session.ended:
            await session.finish(False)
        raise
    if not session.ended:
        await session.finish(True)


class Executor(Protocol):
    @property
    def dialect(self) -> Dialect: ...
    @property
    def exclusive_transactions(self) -> bool:
        """True when a caller's transaction holds the engine's only writer."""
        ...

    @property
    def separate_readers(self) -> bool:
        """True when read-only plans never wait for the engine's writer, so
        they may run while a caller's transaction holds it."""
        ...

    async def run(self, plan: Plan[T], *, bulk: bool = False) -> tuple[T, list[str]]:
        """Run ``plan`` in its own transaction (a read-only one for a
        ``ReadPlan``); return its value and the channels it notified (to
        wake locally, now that it committed). ``bulk``: its work grows with
        its input or the data (keep it off the event-loop thread)."""
        ...

    def transaction(self) -> AbstractAsyncContextManager[TxSession]:
        """Commit when the block ends normally, roll back when it raises;
        neither when the session was finished inside the block."""
        ...

    def join(self, connection: Any) -> Any:
        """A session over the application's own connection and transaction."""
        ...

    async def maintain(self, command: str) -> None:
        """Run a parameterless maintenance ``command`` outside any
        transaction (Postgres's ``VACUUM``, which cannot run inside one).
        Only an engine whose dialect asks for maintenance is sent any."""
        ...

    async def listen(self, channel: str) -> None:
        """Start receiving cross-process wakes for ``channel`` (reference counted)."""
        ...

    async def unlisten(self, channel: str) -> None: ...

    async def close(self) -> None: ...
