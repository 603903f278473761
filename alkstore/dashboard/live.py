"""Live numbers: a long-polled endpoint that answers with a page's fragments
rendered again, as soon as the store's own wakes say something changed.

``GET /live?view=NAME&...&wait=1`` listens on the wake channels the view's
last build named (a queue's enqueues, requeues, resumes and cancels; a
stream's publishes), waits ``debounce`` seconds so a burst of wakes costs
one refresh, then until a wake comes or ``refresh`` seconds have passed
(claims and acks wake nobody, so the numbers they move refresh at that
pace), and answers ``{"fragments": {NAME: HTML}, "refresh": SECONDS}``.
``wait`` absent: it answers at once. The page's script (static/live.js)
swaps each fragment into the element ``data-live="NAME"`` and asks again.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AsyncExitStack

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..api.core.wakes import WakeReceiver
from ..api.store import Store
from ..protocol.values.errors import AlkstoreError, Closed
from .pages import base_of, common
from .safety import CSRF_COOKIE
from .settings import settings_of
from .views import VIEWS, BadRequest, page_path


async def wait_for_news(
    store: Store, channels: Sequence[str], debounce: float, refresh: float
) -> None:
    """Return once a wake came on one of ``channels`` (but not before
    ``debounce`` seconds), or after ``refresh`` seconds."""
    deadline = anyio.current_time() + refresh
    async with AsyncExitStack() as stack:
        receivers: list[WakeReceiver] = []
        for channel in channels:
            try:
                receiver = store._core.subscribe(channel)
                receivers.append(await stack.enter_async_context(receiver))
            except AlkstoreError:
                break  # the store is closing: the interval will do
        await anyio.sleep(debounce)
        try:
            if any(r.try_recv() is not None for r in receivers):
                return
        except Closed:
            return
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            async with anyio.create_task_group() as group:

                async def first(receiver: WakeReceiver) -> None:
                    await receiver.recv()  # a wake, or None once closed
                    group.cancel_scope.cancel()

                for receiver in receivers:
                    group.start_soon(first, receiver)
                if not receivers:
                    await anyio.sleep_forever()


async def endpoint(request: Request) -> Response:
    settings = settings_of(request)
    params = request.query_params
    name = params.get("view", "")
    view = VIEWS.get(name)
    if view is None:
        raise BadRequest(f"no view named {name!r}")
    key = (name, *(f"{k}={params.get(k, '')}" for k in view.keys))
    if params.get("wait") == "1":
        channels = settings.channels.get(key, [])
        await wait_for_news(settings.store, channels, settings.debounce, settings.refresh)
    built = await view.build(settings.store, params)
    settings.remember_channels(key, built.channels)
    cookie, new = settings.csrf.cookie_of(request)
    context = {
        **common(request, settings, cookie),
        **built.context,
        "view": name,
        "here": page_path(name, params),  # where an action in a fragment comes back to
    }
    fragments = {
        fragment: settings.templates.get_template(f"fragments/{fragment}.html").render(context)
        for fragment in view.fragments
    }
    response = JSONResponse({"fragments": fragments, "refresh": settings.refresh})
    if new:
        response.set_cookie(CSRF_COOKIE, cookie, httponly=True, samesite="strict",
                            path=base_of(request) or "/")  # fmt: skip
    return response
