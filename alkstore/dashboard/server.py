"""Serving the dashboard under trio with Hypercorn (``alkstore dashboard``)."""

from __future__ import annotations

import ipaddress
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .safety import LOOPBACK_HOSTS

log = logging.getLogger("alkstore.dashboard")

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without
    brackets) reaches this machine only."""
    bare = host.strip("[]").lower()
    if bare in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` listens on every address (``0.0.0.0``, ``::``)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def served_hosts(host: str, trusted: tuple[str, ...]) -> tuple[str, ...] | None:
    """The ``Host`` names a dashboard bound to ``host`` answers: the bound
    name or address, the loopback names when it listens on loopback, and
    ``trusted``. None when nothing names it: a wildcard bind with no
    ``trusted`` (its users reach it under names only they know)."""
    if is_wildcard(host):
        return (*LOOPBACK_HOSTS, *trusted) if trusted else None
    if is_loopback(host):
        return (*LOOPBACK_HOSTS, host, *trusted)
    return (host, *trusted)


def bind_address(host: str, port: int) -> str:
    bare = host.strip("[]")
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


async def until_signalled() -> None:
    """Return on SIGINT or SIGTERM (the server then shuts down gracefully)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: stopping", signal.Signals(signum).name)
            return


class CannotListen(Exception):
    """The dashboard's address cannot be listened on: taken by another
    process, not this machine's, or a port that needs privileges."""


async def serve(
    app: Any,
    host: str,
    port: int,
    *,
    shutdown: Callable[[], Awaitable[None]] = until_signalled,
    graceful_timeout: float = 5.0,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` under trio until ``shutdown()`` returns;
    requests still running then get ``graceful_timeout`` seconds. Reports
    started (``nursery.start``) once it listens; raises ``CannotListen``
    when it cannot."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [bind_address(host, port)]
    config.graceful_timeout = graceful_timeout
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    listening = False

    async def run(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await hypercorn_serve(app, config, shutdown_trigger=shutdown, task_status=task_status)

    refused: OSError | None = None
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(run)
            listening = True
            task_status.started()
    except* OSError as group:
        if listening:  # a failure once serving is the server's to report
            raise
        refused = _first(group)
    if refused is not None:
        reason = refused.strerror or str(refused)
        raise CannotListen(f"cannot listen on {bind_address(host, port)}: {reason}")


def _first(group: BaseExceptionGroup[OSError]) -> OSError:
    found = group.exceptions[0]
    while isinstance(found, BaseExceptionGroup):
        found = found.exceptions[0]
    return found
