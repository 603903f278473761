"""``dashboard``: serve the web dashboard (alkstore.dashboard) under trio."""

from __future__ import annotations

import functools
import logging

import click
import trio

from ..protocol.values.errors import InvalidArgument
from .target import (
    UNUSABLE,
    Exit,
    Target,
    database_options,
    fail,
    guarded,
    opened,
    refuse_missing,
)

AUTH_ENV = "ALKSTORE_DASHBOARD_AUTH"


@click.command("dashboard")
@database_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="Port."
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Let the pages change things (requeue, purge, cancel, pause); opens the "
    "database read-write. Default: read-only.",
)
@click.option(
    "--auth",
    envvar=AUTH_ENV,
    default=None,
    metavar="user:PASSWORD|bearer:TOKEN",
    help=f"Require HTTP basic auth or a bearer token. Default: ${AUTH_ENV}.",
)
@click.option(
    "--allow-unauthenticated",
    is_flag=True,
    help="Serve a non-loopback --host without --auth (refused otherwise).",
)
@click.option(
    "--trusted-host",
    "trusted_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name browsers use to reach the dashboard, besides the --host it binds "
    "(and localhost, for a loopback --host); '*.example.com' for subdomains, '*' for any. "
    "Repeatable. Other Host headers are refused (400).",
)
@click.option(
    "--refresh",
    type=click.FloatRange(0.5, 300),
    default=5.0,
    show_default=True,
    help="Longest time in seconds the pages' numbers go without refreshing.",
)
def dashboard_command(
    target: Target,
    host: str,
    port: int,
    allow_actions: bool,
    auth: str | None,
    allow_unauthenticated: bool,
    trusted_hosts: tuple[str, ...],
    refresh: float,
) -> None:
    """Serve the web dashboard: queues, jobs, dead letters, workflows,
    streams, schedules and locks, live. Read-only unless --allow-actions; binds
    127.0.0.1 unless --host says otherwise. Stops on Ctrl-C or SIGTERM."""
    try:
        from ..dashboard import create_app
        from ..dashboard.safety import Auth, Hosts
        from ..dashboard.server import CannotListen, is_loopback, serve, served_hosts
    except ImportError as exc:
        fail(UNUSABLE, str(exc))
    try:
        import hypercorn  # noqa: F401
    except ImportError:
        fail(UNUSABLE, "the dashboard needs the 'dashboard' extra: pip install "
                       "'alkstore[dashboard]' (missing: hypercorn)")  # fmt: skip
    auth = auth or None
    if auth is not None:
        try:
            Auth.parse(auth)
        except InvalidArgument as exc:
            raise click.BadParameter(str(exc), param_hint="--auth") from None
    if not is_loopback(host) and auth is None and not allow_unauthenticated:
        raise click.UsageError(
            f"--host {host} is reachable from other machines: give --auth (or set {AUTH_ENV}), "
            "or --allow-unauthenticated to serve it without"
        )
    hosts = served_hosts(host, trusted_hosts)
    if hosts is None:
        raise click.UsageError(
            f"--host {host} listens on every address: name the host names browsers use to "
            "reach it with --trusted-host NAME (or --trusted-host '*' to answer any)"
        )
    try:
        Hosts.of(hosts)
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc), param_hint="--trusted-host") from None
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s "
                                                       "%(message)s")  # fmt: skip
    read_only = not allow_actions
    refuse_missing(target)  # a dashboard of a new, empty file is a typo's

    async def main() -> None:
        async with opened(target, read_only=read_only) as store:
            app = create_app(
                store, allow_actions=allow_actions, auth=auth, refresh=refresh,
                where=target.where, trusted_hosts=hosts,
            )  # fmt: skip
            mode = "actions allowed" if allow_actions else "read-only"
            shown = f"[{host}]" if ":" in host else host
            refused: CannotListen | None = None
            try:
                async with trio.open_nursery() as nursery:
                    await nursery.start(functools.partial(serve, app, host, port))
                    click.echo(f"alkstore dashboard on http://{shown}:{port}/ ({mode}, "
                               f"{target.where}); Ctrl-C stops it", err=True)  # fmt: skip
            except* CannotListen as group:
                refused = group.exceptions[0]  # type: ignore[assignment]
            if refused is not None:
                raise Exit(UNUSABLE, str(refused))

    guarded(target, lambda: trio.run(main))
