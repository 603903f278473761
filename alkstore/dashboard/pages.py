"""The pages: each renders a view (``views.py``) whole, with what every
page shares (the header, the CSRF token, the live URL, a notice left by
the last action)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import shapes
from ..protocol.values.errors import AlkstoreError, DatabaseError, InvalidArgument, InvalidName
from . import format as fmt
from .safety import CSRF_COOKIE, CSRF_FIELD, USER_KEY
from .settings import Settings, settings_of
from .views import VIEWS, BadRequest, Built, View, now

log = logging.getLogger("alkstore.dashboard")

NOTICE_COOKIE = "alkstore_notice"


def base_of(request: Request) -> str:
    """Where the dashboard is mounted (``""`` at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def here(request: Request) -> str:
    """This page's path and query inside the dashboard (where an action
    sends the browser back to)."""
    path = request.url.path.removeprefix(base_of(request)) or "/"
    return path + (f"?{request.url.query}" if request.url.query else "")


def live_url(request: Request, name: str, view: View, params: Mapping[str, str]) -> str:
    query = {k: params[k] for k in view.keys if params.get(k)}
    return fmt.href(base_of(request), "/live", view=name, **query)


def common(request: Request, settings: Settings, cookie: str) -> dict[str, Any]:
    base = base_of(request)
    notice = request.cookies.get(NOTICE_COOKIE)
    kind, _, text = unquote(notice or "").partition(":")
    return {
        "request": request,
        "base": base,
        "link": functools.partial(fmt.href, base),
        "title": settings.title,
        "where": settings.where,
        "engine": settings.store.engine,
        "read_only_store": settings.store.read_only,
        "allow_actions": settings.allow_actions,
        "csrf_field": CSRF_FIELD,
        "csrf_token": settings.csrf.token(cookie),
        "user": request.scope.get(USER_KEY),
        "notice": (kind, text) if text else None,
        "here": here(request),
    }


def render(
    request: Request, template: str, context: dict[str, Any], *, status: int = 200
) -> Response:
    settings = settings_of(request)
    cookie, new = settings.csrf.cookie_of(request)
    full = {**common(request, settings, cookie), **context}
    response = settings.templates.TemplateResponse(
        request, template, full, status_code=status
    )
    path = base_of(request) or "/"
    if new:
        response.set_cookie(
            CSRF_COOKIE, cookie, httponly=True, samesite="strict", path=path,
            secure=request.url.scheme == "https",
        )  # fmt: skip
    if NOTICE_COOKIE in request.cookies:
        response.delete_cookie(NOTICE_COOKIE, path=path)
    return response


async def render_view(request: Request, name: str, params: Mapping[str, str]) -> Response:
    view = VIEWS[name]
    built: Built = await view.build(settings_of(request).store, params)
    context = {**built.context, "view": name, "live_url": live_url(request, name, view, params)}
    return render(request, view.template, context)


def page(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await render_view(request, name, request.query_params)

    endpoint.__name__ = f"{name}_page"
    return endpoint


def id_page(name: str) -> Callable[[Request], Awaitable[Response]]:
    """A page of one thing named by the id in its path (``/job/7``)."""

    async def endpoint(request: Request) -> Response:
        return await render_view(request, name, {"id": str(request.path_params["id"])})

    endpoint.__name__ = f"{name}_page"
    return endpoint


async def api_overview(request: Request) -> Response:
    """The overview as JSON, in the shapes of ``alkstore watch --json``."""
    store = settings_of(request).store
    at = now(store)
    queues = await store.list_queues()
    doc = shapes.overview_doc(
        at, queues, await store.list_streams(), await store.list_schedules(),
        await store.list_locks(),
    )  # fmt: skip
    return Response(shapes.dumps(doc), media_type="application/json")


# -- errors ----------------------------------------------------------------------------
def error_page(request: Request, status: int, message: str) -> Response:
    if request.url.path.endswith("/live") or "/api/" in request.url.path:
        return JSONResponse({"error": message}, status_code=status)
    try:
        return render(request, "error.html", {"status": status, "message": message},
                      status=status)  # fmt: skip
    except Exception:  # the error page itself failed: plain text, never a traceback
        log.exception("the error page failed")
        return Response(f"{status}: {message}\n", status_code=status, media_type="text/plain")


async def _bad_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BadRequest)
    return error_page(request, exc.status, exc.message)


async def _invalid(request: Request, exc: Exception) -> Response:
    return error_page(request, 400, str(exc))


async def _database(request: Request, exc: Exception) -> Response:
    log.warning("the database failed while serving %s", request.url.path, exc_info=exc)
    return error_page(request, 503, f"the database failed: {exc}")


async def _alkstore(request: Request, exc: Exception) -> Response:
    log.warning("an error while serving %s", request.url.path, exc_info=exc)
    return error_page(request, 500, str(exc))


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    messages = {404: "no such page", 405: "method not allowed"}
    return error_page(request, exc.status_code, messages.get(exc.status_code, str(exc.detail)))


EXCEPTION_HANDLERS: Mapping[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    BadRequest: _bad_request,
    InvalidArgument: _invalid,
    InvalidName: _invalid,
    DatabaseError: _database,
    AlkstoreError: _alkstore,
    HTTPException: _http,
}


def notice_cookie(response: Response, request: Request, kind: str, text: str) -> None:
    response.set_cookie(
        NOTICE_COOKIE, quote(f"{kind}:{text}"[:500]), max_age=60, httponly=True,
        samesite="strict", path=base_of(request) or "/",
    )  # fmt: skip
