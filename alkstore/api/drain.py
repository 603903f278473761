"""``Drain``: ending running workers gracefully, all of them with one call.

The drain itself holds no task and no clock: it only tells the workers
given it that draining began (each then decides, in its ``WorkerPolicy``,
what to hand back and when to stop) and counts what they are running.
"""

from __future__ import annotations

from typing import Protocol

from ..protocol.values.timeconv import Duration, duration_us


class _Drainable(Protocol):
    """A running worker, as a drain sees it (``services.worker.Worker``)."""

    def begin_drain(self, timeout_us: int | None) -> None: ...
    def handlers_running(self) -> int: ...


class Drain:
    """Ends the ``Queue.work`` calls given it (``work(..., drain=drain)``)
    gracefully, together.

    ``start(timeout)``: every such worker stops claiming at once, hands back
    at once the jobs it claimed ahead and has not started (due now, attempt
    refunded, so other workers take them), and lets its running handlers
    finish, acked or retried as usual, for up to ``timeout`` seconds; those
    still running then are cancelled and their jobs handed back too. Each
    ``work`` call then returns its ``WorkerReport`` (no exception), so a
    task group of workers on several queues ends by itself. ``now()``: the
    same without the wait (a second Ctrl-C).

    Call ``start`` and ``now`` from the thread running the event loop: a
    task, a ``trio.open_signal_receiver`` loop, a callback of asyncio's
    ``loop.add_signal_handler``; not from a ``signal.signal`` handler or
    another thread. A drain is one-shot: a worker started with a drain that
    has already started returns at once, having claimed nothing.
    """

    def __init__(self) -> None:
        self._workers: set[_Drainable] = set()
        self._started = False
        self._forced = False
        # The shortest timeout asked for so far (None: no deadline).
        self._timeout_us: int | None = None

    def __repr__(self) -> str:
        state = "forced" if self._forced else "started" if self._started else "idle"
        return f"Drain({state}, workers={len(self._workers)})"

    @property
    def started(self) -> bool:
        """True once ``start`` or ``now`` was called."""
        return self._started

    @property
    def forced(self) -> bool:
        """True once ``now`` was called (or ``start`` with a timeout of 0)."""
        return self._forced

    @property
    def workers(self) -> int:
        """How many ``work`` calls are running with this drain now."""
        return len(self._workers)

    @property
    def running(self) -> int:
        """How many handlers are running now in those workers (jobs claimed
        ahead and not started are not counted)."""
        return sum(w.handlers_running() for w in self._workers)

    def start(self, timeout: Duration | None = None) -> None:
        """Begin draining: no more claims; running handlers may finish for up
        to ``timeout`` seconds (or a ``timedelta``; ``None``: however long
        they take). Calling it again can only shorten the deadline."""
        timeout_us = None if timeout is None else duration_us(timeout, "timeout")
        if timeout_us is not None and (self._timeout_us is None or timeout_us < self._timeout_us):
            self._timeout_us = timeout_us
        self._started = True
        if timeout_us == 0:
            self._forced = True
        for worker in list(self._workers):
            worker.begin_drain(timeout_us)

    def now(self) -> None:
        """Stop at once: handlers still running are cancelled and every job
        not finished is handed back. Works whether or not ``start`` was
        called first."""
        self.start(0)

    def _attach(self, worker: _Drainable) -> None:
        self._workers.add(worker)
        if self._started:
            worker.begin_drain(self._timeout_us)

    def _detach(self, worker: _Drainable) -> None:
        self._workers.discard(worker)


__all__ = ["Drain"]
