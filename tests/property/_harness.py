"""Driving an async store from Hypothesis's synchronous state machines.

Each state-machine example gets its own ``StoreSession``: a thread running
the backend's event loop (``trio.run`` or ``asyncio.run``) that opens a store
on a fresh database and keeps it open until ``close()``. Rules call into it
with ``session.call(async_fn, ...)``, which runs ``async_fn`` on that loop
(``trio.from_thread.run`` or ``asyncio.run_coroutine_threadsafe``) and hands
back its result or exception. The store is opened and closed by one task, so
its task group and background tasks live and die inside one ``async with``
block, and ``close()`` joins the thread: nothing outlives the example.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from alkstore.api.store import Store
from alkstore.runner.runtime import ManualClock
from tests.backends import Backend

T = TypeVar("T")

US = 1_000_000
# A fixed start keeps examples reproducible (the clock never reads real time).
START_US = 1_700_000_000_000_000


def machine_settings(backend: Backend, max_examples: int, steps: int) -> settings:
    """Settings for one state machine on ``backend``.

    ``max_examples`` is for SQLite; a server engine costs a fresh schema and
    network round trips per example, so it runs a fifth as many to keep the
    whole suite near a minute. ALKSTORE_PROPERTY_SCALE multiplies both (a
    longer hunt: ``ALKSTORE_PROPERTY_SCALE=20``).
    """
    scale = float(os.environ.get("ALKSTORE_PROPERTY_SCALE", "1"))
    if backend.engine != "sqlite":
        max_examples = max_examples // 5
    return settings(
        max_examples=max(1, round(max_examples * scale)),
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def run_machine(factory: Callable[[], RuleBasedStateMachine], config: settings) -> None:
    """Run a state machine as a test (hypothesis leaves this one untyped)."""
    run_state_machine_as_test(factory, settings=config)  # type: ignore[no-untyped-call]


class StoreSession:
    """A store on a fresh database, open on a private event-loop thread."""

    def __init__(self, backend: Backend, clock: ManualClock) -> None:
        self._backend = backend
        self._clock = clock
        self._tmp = tempfile.mkdtemp(prefix="alkstore-prop-")
        self._location = backend.new_location(Path(self._tmp))
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None  # on trio
        self._loop: asyncio.AbstractEventLoop | None = None  # on asyncio
        self._stop: trio.Event | asyncio.Event | None = None
        self._store: Store | None = None
        self._thread = threading.Thread(
            target=self._main, name=f"alkstore-prop-{backend.driver}", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._store is None:
            self._thread.join()
            shutil.rmtree(self._tmp, ignore_errors=True)
            assert self._error is not None
            raise self._error

    @property
    def store(self) -> Store:
        assert self._store is not None
        return self._store

    def _main(self) -> None:
        try:
            if self._backend.driver == "trio":
                trio.run(self._serve)
            else:
                asyncio.run(self._serve())
        except BaseException as exc:
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        if self._backend.driver == "trio":
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
        else:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
        # No background housekeeping: a prune at a moment of its own choosing
        # would make the store's rows differ from the model's.
        async with self._backend.open(
            self._location, clock=self._clock, housekeeping_interval=None
        ) as store:
            self._store = store
            self._ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await fn(*args)`` on the store's loop and return its result."""
        if self._loop is None:
            return trio.from_thread.run(fn, *args, trio_token=self._token)

        async def on_loop() -> T:
            return await fn(*args)

        return asyncio.run_coroutine_threadsafe(on_loop(), self._loop).result()

    def close(self) -> None:
        """Close the store, end the event loop, join its thread, remove the files."""
        try:
            if self._thread.is_alive() and self._stop is not None:
                if self._loop is not None:
                    self._loop.call_soon_threadsafe(self._stop.set)
                else:
                    trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            self._thread.join()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)
        if self._error is not None:
            raise self._error


# Clock jumps: mostly small, sometimes across visibility timeouts and TTLs.
time_steps = st.one_of(
    st.integers(0, 1_000),  # microseconds: ties and near-ties
    st.integers(0, 3 * US),
    st.integers(3 * US, 40 * US),
)


class StoreMachine(RuleBasedStateMachine):
    """Owns the clock and a ``StoreSession``; subclasses add the model and rules."""

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.clock = ManualClock(START_US)
        self.session = StoreSession(backend, self.clock)

    @property
    def store(self) -> Store:
        return self.session.store

    @property
    def now(self) -> int:
        return self.clock.now_us()

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self.session.call(fn, *args)

    def teardown(self) -> None:
        self.session.close()

    def boundaries(self) -> list[int]:
        """Instants at which the model's answers change (claim lapses, deadlines, TTLs)."""
        return []

    @rule(delta=time_steps)
    def advance(self, delta: int) -> None:
        """Time passes (possibly not at all)."""
        self.clock.set(self.now + delta)

    @rule(data=st.data())
    def advance_to_boundary(self, data: st.DataObject) -> None:
        """Time jumps to exactly a boundary, or one microsecond either side of it."""
        future = sorted({b for b in self.boundaries() if b >= self.now})
        if not future:
            return
        target = data.draw(st.sampled_from(future)) + data.draw(st.sampled_from([-1, 0, 1]))
        self.clock.set(max(self.now, target))

    @invariant()
    def clock_is_shared(self) -> None:
        """The store reads the very clock the model is given."""
        assert self.store._core.now_us() == self.now
