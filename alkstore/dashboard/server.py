"""Serving the dashboard under trio with Hypercorn (``alkstore dashboard``)."""

from __future__ import annotations

import ipaddress
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import trio

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


def bind_address(host: str, port: int) -> str:
    bare = host.strip("[]")
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


async def until_signalled() -> None:
    """Return on SIGINT or SIGTERM (the server then shuts down gracefully)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: stopping", signal.Signals(signum).name)
            return


async def serve(
    app: Any,
    host: str,
    port: int,
    *,
    shutdown: Callable[[], Awaitable[None]] = until_signalled,
    graceful_timeout: float = 5.0,
) -> None:
    """Serve ``app`` on ``host:port`` under trio until ``shutdown()`` returns;
    requests still running then get ``graceful_timeout`` seconds."""
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    config = Config()
    config.bind = [bind_address(host, port)]
    config.graceful_timeout = graceful_timeout
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    await hypercorn_serve(app, config, shutdown_trigger=shutdown)
