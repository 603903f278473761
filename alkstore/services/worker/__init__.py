"""The worker runtime behind ``Queue.work`` (and an outbox's delivery).

Claims in batches when woken, runs the handler with bounded concurrency, acks
on return, retries with backoff on exception, heartbeats long jobs, and on
cancellation hands back at once whatever it has not finished. A drain ends
it gracefully instead: no more claims, what waits for a slot handed back at
once, running handlers given until a deadline to finish.

Every decision (when to claim, how many, how long to sleep, when to sweep,
when to heartbeat, when a claim is lost, when to claim more) is taken by the
pure state machines in ``alkstore/protocol/machines/worker.py`` and
``leases.py``; every settlement's verdict by the plans. This package only
performs them, through the store's narrow handle (``StoreCore``), so it
serves every driver. Its units each have a module: ``claims`` (the claim
loop), ``slots`` (the handlers), ``keeper`` (the leases and live
cancellation), ``settler`` (acks, retries, hand-backs), ``worker`` (the task
group that runs them, and what a drain and the jobs tell it).

Wakes: enqueues notify the queue's internal channel; local commits wake the
worker directly and the engine's wake source (the SQLite watcher, Postgres
LISTEN) carries commits from other processes. Without a wake the worker still
looks when the next job falls due (read with each short claim), at every
``poll_interval`` as a backstop, and whenever one of its own jobs finishes.

Live cancellation: ``Queue.cancel`` notifies the queue's cancel channel (a
channel of its own, so enqueues never cost this look); on that wake the
worker reads which of the jobs it holds and has not settled are gone, drops
those claimed ahead, and cancels the handlers of those running. A worker that
misses the wake finds out at its next heartbeat, as a lost claim.
"""

from __future__ import annotations

import functools
import inspect
import os
import secrets
import socket

from ...protocol.values.errors import InvalidArgument, brief
from .worker import Worker


def check_handler(handler: object, what: str = "handler") -> None:
    """Refuse anything but an async function (or a partial of one, or an
    object with an ``async def __call__``) before any job is claimed: a
    plain function would run, then fail on ``await`` after its side effects,
    and be retried until it went dead."""
    target = handler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return
    # An instance whose class defines ``async def __call__``.
    call = None
    if not inspect.isroutine(target):
        call = inspect.getattr_static(type(target), "__call__", None)
    if call is not None and inspect.iscoroutinefunction(call):
        return
    if callable(handler):
        raise InvalidArgument(
            f"{what} must be an async function (async def), got {brief(handler)}: "
            "it must be awaited; wrap a sync function in an async def (and run blocking "
            "work in a thread)"
        )
    raise InvalidArgument(f"{what} must be an async function, got {brief(handler)}")


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


__all__ = ["Worker", "check_handler", "default_worker_id"]
