"""``create_app``: the dashboard as a Starlette (ASGI) application over a
store that is already open, on either engine and either driver."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from ..api.store import Store
from ..protocol.values.attempts import ATTEMPTS_KEPT
from ..protocol.values.errors import InvalidArgument, UsageError
from . import actions, live, pages, static
from . import format as fmt
from .safety import (
    LOOPBACK_HOSTS,
    Auth,
    AuthMiddleware,
    Csrf,
    HeadersMiddleware,
    HostMiddleware,
    Hosts,
)
from .settings import Settings, attach


def create_app(
    store: Store | Callable[[], Store],
    *,
    allow_actions: bool = False,
    auth: str | None = None,
    refresh: float = 5.0,
    title: str = "alkstore",
    where: str | None = None,
    trusted_hosts: Sequence[str] | None = None,
    trusted_origins: Sequence[str] = (),
    secret: bytes | None = None,
    debug: bool = False,
) -> Starlette:
    """The dashboard over ``store`` (open, of either engine and driver), as
    a Starlette application: serve it (``hypercorn``, ``uvicorn``) or mount
    it into your own (``app.mount("/alkstore", create_app(store))``).
    ``store`` may also be a function returning the store, called at each
    request: for an app that opens its store in its lifespan, after the
    dashboard is mounted.

    It does not own the store: whoever opened it closes it, after the app
    has stopped serving. ``allow_actions``: the pages may change things
    (requeue and purge dead letters, cancel jobs, pause queues and
    schedules), through POSTs with a CSRF token; otherwise every POST is
    refused (403) and the pages only show. A read-only store cannot have
    actions (``UsageError``). ``auth``: ``"user:password"`` (HTTP basic) or
    ``"bearer:TOKEN"``, required of every request. ``refresh``: the longest
    time (seconds) a page's numbers go without refreshing when no wake
    comes. ``where``: how the header names the database.
    ``trusted_hosts``: the host names requests may carry in ``Host``
    (``"admin.example.com"``, ``"*.example.com"``, or ``"*"`` for any, when
    something in front already checks it); by default only the loopback
    names (``localhost``, ``127.0.0.1``, ``::1``). Any other ``Host`` is
    refused (400) before a page or a token is served: a DNS-rebinding page
    never gets one. ``trusted_origins``: origins besides the request's own
    host that may POST (``"https://admin.example.com"``: a proxy that
    rewrites ``Host``).
    ``secret``: the CSRF key (default: random per process; give the same one
    to every process behind one address)."""
    if isinstance(store, Store):
        if allow_actions and store.read_only:
            raise UsageError(
                "a read-only store cannot have actions: open it without read_only=True"
            )
        given = store

        def resolve() -> Store:
            return given
    elif callable(store):
        resolve = store
    else:
        raise InvalidArgument("store must be a Store or a function returning one")
    if not isinstance(refresh, int | float) or not 0.5 <= refresh <= 300:
        raise InvalidArgument("refresh must be between 0.5 and 300 seconds")
    parsed = None if auth is None else Auth.parse(auth)
    if isinstance(trusted_hosts, str):
        raise InvalidArgument("trusted_hosts must be a sequence of host names, not a string")
    hosts = Hosts.of(LOOPBACK_HOSTS if trusted_hosts is None else trusted_hosts)
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("alkstore.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(fmt.FILTERS)
    env.globals.update(ago=fmt.ago, chart=fmt.chart, attempts_kept=ATTEMPTS_KEPT)
    templates = Jinja2Templates(env=env)
    settings = Settings(
        resolve=resolve,
        allow_actions=allow_actions,
        auth=parsed,
        csrf=Csrf(secret),
        refresh=float(refresh),
        debounce=min(1.0, float(refresh) / 2),
        title=title,
        where=where if where is not None else "",
        hosts=hosts,
        trusted_origins=tuple(trusted_origins),
        templates=templates,
    )
    app = Starlette(
        debug=debug,
        routes=routes(),
        middleware=[
            Middleware(HeadersMiddleware),
            Middleware(HostMiddleware, hosts=hosts),
            Middleware(AuthMiddleware, auth=parsed),
        ],
        exception_handlers=pages.EXCEPTION_HANDLERS,
    )
    attach(app, settings)
    return app


def routes() -> list[BaseRoute]:
    get = ["GET"]
    post = ["POST"]
    found: list[BaseRoute] = [
        Route("/", pages.page("overview"), methods=get, name="overview"),
        Route("/queue", pages.page("queue"), methods=get, name="queue"),
        Route("/queue/dead", pages.page("dead"), methods=get, name="dead"),
        Route("/job/{id:int}", pages.id_page("job"), methods=get, name="job"),
        Route("/workflows", pages.page("workflows"), methods=get, name="workflows"),
        Route("/workflow/{id:int}", pages.id_page("workflow"), methods=get, name="workflow"),
        Route("/streams", pages.page("streams"), methods=get, name="streams"),
        Route("/stream", pages.page("stream"), methods=get, name="stream"),
        Route("/schedules", pages.page("schedules"), methods=get, name="schedules"),
        Route("/locks", pages.page("locks"), methods=get, name="locks"),
        Route("/live", live.endpoint, methods=get, name="live"),
        Route("/api/overview", pages.api_overview, methods=get, name="api_overview"),
        Route("/static/{name}", static.endpoint(static.load()), methods=get, name="static"),
    ]
    for path, handler in actions.ACTIONS.items():
        found.append(Route(path, actions.endpoint(handler), methods=post, name=path))
    return found
