"""Virtual time for asyncio programs, by way of the ``looptime`` library.

trio has ``MockClock(autojump_threshold=0)``; asyncio has no virtual clock of
its own. ``looptime`` provides one: an event loop whose ``time()`` jumps to
the next timer whenever nothing else is ready to run, so ``asyncio.sleep``,
``asyncio.timeout`` and the store of ``open_simulated()`` (which follows the
loop's ``time()``) pass minutes in no real time.

``looptime`` is an optional dependency: ``pip install 'alkstore[testing]'``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..protocol.values.errors import UsageError

T = TypeVar("T")

_MISSING = (
    "virtual time under asyncio needs the looptime package: "
    "pip install 'alkstore[testing]' (or: pip install looptime)"
)


def virtual_event_loop(*, idle_timeout: float | None = None) -> asyncio.AbstractEventLoop:
    """A new asyncio event loop on virtual time, its clock starting at 0.

    Whenever every task waits and a timer is due later, the loop's clock
    jumps to that timer instead of sleeping. Use it as a loop factory:
    ``asyncio.Runner(loop_factory=virtual_event_loop)``.

    When no timer is pending at all, only outside I/O could wake the loop,
    so it waits in real time; ``idle_timeout`` (seconds of such waiting)
    then fails every waiting task with ``looptime.IdleTimeoutError``, which
    turns a deadlocked test into a failure instead of a hang. ``None`` waits
    as long as it takes, as a plain loop would.
    """
    try:
        import looptime
    except ImportError as exc:
        raise UsageError(_MISSING) from exc
    return looptime.new_event_loop(start=0.0, idle_timeout=idle_timeout)


def run_virtual(
    main: Coroutine[Any, Any, T],
    *,
    idle_timeout: float | None = None,
    debug: bool | None = None,
) -> T:
    """``asyncio.run(main)`` on a ``virtual_event_loop()``: returns its result.

    Everything ``asyncio.run`` does at the end still happens (remaining
    tasks cancelled, async generators and the default executor shut down).
    """
    try:
        loop = virtual_event_loop(idle_timeout=idle_timeout)
    except UsageError:
        # The caller made the coroutine and it will never run: close it, so
        # that Python does not add a "never awaited" warning to the error.
        main.close()
        raise
    # The Runner owns the loop from here on: it closes it on the way out.
    with asyncio.Runner(debug=debug, loop_factory=lambda: loop) as runner:
        return runner.run(main)
