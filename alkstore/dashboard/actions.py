"""The actions: POSTs that change something, each checked, done through the
store's own operations, logged, and answered with a redirect back.

In order, a POST must: be allowed at all (``allow_actions``, else 403),
come from a page of this dashboard (``Origin``/``Referer``, else 403) and
carry a valid CSRF token (else 403). Only then is its form read for what
to do. Every action, done or failed, is logged on ``alkstore.dashboard``
with the user who asked.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from ..api.queue import Queue
from ..api.store import Store
from ..protocol.values.errors import AlkstoreError, InvalidArgument
from ..protocol.values.schedules import parse_duration
from .pages import base_of, notice_cookie
from .safety import CSRF_FIELD, USER_KEY, same_origin
from .settings import settings_of
from .views import BadRequest, known_queue, name_param, now, queue_handle

log = logging.getLogger("alkstore.dashboard")

# Dead letters read per round trip while selecting them by age or all.
PAGE: Final = 500
# Ids one "requeue/purge selected" takes at most.
MAX_SELECTED: Final = 1000


@dataclass(frozen=True, slots=True)
class Done:
    """What an action did: a sentence for the log and the page, and where
    the browser goes next (a path inside the dashboard)."""

    text: str
    to: str
    failed: bool = False


Handler = Callable[[Store, FormData], Awaitable[Done]]


def _form_int(form: FormData, key: str) -> int:
    value = form.get(key)
    if not isinstance(value, str) or not value.isdigit() or len(value) > 19:
        raise BadRequest(f"{key} must be a whole number")
    number = int(value)
    if not 1 <= number <= 2**63 - 1:
        raise BadRequest(f"{key} is out of range")
    return number


def _form_params(form: FormData) -> dict[str, str]:
    return {k: v for k, v in form.items() if isinstance(v, str)}


async def _queue(store: Store, form: FormData) -> tuple[str, Queue]:
    """The queue a form names; 404 for one that does not exist (pausing it
    would create it)."""
    name = name_param(_form_params(form))
    handle = queue_handle(store, name)
    await known_queue(store, name)
    return name, handle


def _q(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


# -- queues ------------------------------------------------------------------------------
async def pause_queue(store: Store, form: FormData) -> Done:
    name, handle = await _queue(store, form)
    await handle.pause()
    return Done(f"paused queue {name!r}", f"/queue?name={_q(name)}")


async def resume_queue(store: Store, form: FormData) -> Done:
    name, handle = await _queue(store, form)
    await handle.resume()
    return Done(f"resumed queue {name!r}", f"/queue?name={_q(name)}")


# -- selections ----------------------------------------------------------------------------
def _selected_ids(form: FormData, what: str) -> list[int]:
    """The ids ticked in a form (``id`` fields), at most ``MAX_SELECTED``."""
    raw = form.getlist("id")
    if not raw:
        raise BadRequest(f"no {what} selected")
    if len(raw) > MAX_SELECTED:
        raise BadRequest(f"select at most {MAX_SELECTED} at once")
    ids = []
    for value in raw:
        if not isinstance(value, str) or not value.isdigit() or len(value) > 19:
            raise BadRequest("a selected id is not a whole number")
        ids.append(int(value))
    return sorted(set(ids))


async def cancel_selected(store: Store, form: FormData) -> Done:
    """Cancel the live jobs ticked on a queue's page (a running handler is
    stopped, as by ``Queue.cancel``; what waits for them is cancelled too)."""
    name, handle = await _queue(store, form)
    ids = _selected_ids(form, "job")
    cancelled = [job_id for job_id in ids if await handle.cancel(job_id)]
    text = f"cancelled {len(cancelled)} of {len(ids)} selected job(s) of {name!r}"
    if len(cancelled) < len(ids):
        text += f"; {len(ids) - len(cancelled)} had finished or were not live"
    return Done(text, f"/queue?name={_q(name)}", failed=not cancelled)


# -- dead letters ---------------------------------------------------------------------------
def _selection(form: FormData) -> tuple[str, list[int], timedelta | None]:
    """``which`` (selected, age, all), the ids selected, the age."""
    which = form.get("which")
    if which == "selected":
        return which, _selected_ids(form, "dead letter"), None
    if which == "age":
        text = form.get("age")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest("say how old: an age such as 1h, 30m or 7d")
        try:
            age = timedelta(microseconds=parse_duration(text.strip()))
        except InvalidArgument as exc:
            raise BadRequest(str(exc)) from None
        return which, [], age
    if which == "all":
        return which, [], None
    raise BadRequest("say which dead letters: selected, older than an age, or all")


def _confirmed(form: FormData, which: str) -> None:
    if which != "selected" and form.get("confirm") != "yes":
        raise BadRequest("purging deletes dead letters for good: tick the confirmation box")


async def _dead_ids(store: Store, handle: Queue, before: timedelta | None) -> list[int]:
    """Ids of the queue's dead letters that died more than ``before`` ago
    (all when None), read a keyset page at a time."""
    cutoff = None if before is None else now(store) - before
    chosen: list[int] = []
    after: int | None = None
    while True:
        page = await handle.list_jobs(state="dead", limit=PAGE, after=after)
        chosen += [j.id for j in page
                   if cutoff is None or (j.died_at is not None and j.died_at < cutoff)]  # fmt: skip
        if len(page) < PAGE:
            return chosen
        after = page[-1].id


def _described(which: str, ids: list[int], age: timedelta | None) -> str:
    if which == "selected":
        return f"selected ({', '.join(map(str, ids[:20]))}{', ...' if len(ids) > 20 else ''})"
    if which == "age":
        return f"older than {age}"
    return "all"


async def requeue_dead(store: Store, form: FormData) -> Done:
    name, handle = await _queue(store, form)
    which, ids, age = _selection(form)
    chosen = ids if which == "selected" else await _dead_ids(store, handle, age)
    moved = [job_id for job_id in chosen if await handle.requeue_dead(job_id)]
    missing = len(chosen) - len(moved)
    text = f"requeued {len(moved)} dead letter(s) of {name!r}, {_described(which, ids, age)}"
    if missing:
        text += f"; {missing} were no longer dead letters"
    return Done(text, f"/queue/dead?name={_q(name)}")


async def purge_dead(store: Store, form: FormData) -> Done:
    name, handle = await _queue(store, form)
    which, ids, age = _selection(form)
    _confirmed(form, which)
    if which == "selected":
        purged = await handle.purge_dead(ids=ids)
    else:
        purged = await handle.purge_dead(None if age is None else now(store) - age)
    text = f"purged {purged} dead letter(s) of {name!r}, {_described(which, ids, age)}"
    return Done(text, f"/queue/dead?name={_q(name)}")


# -- one job -----------------------------------------------------------------------------------
async def _job(store: Store, form: FormData) -> tuple[int, str, str]:
    job_id = _form_int(form, "id")
    info = await store.get_job(job_id)
    if info is None:
        raise BadRequest(f"no job {job_id}", 404)
    return job_id, info.queue, info.state


async def cancel_job(store: Store, form: FormData) -> Done:
    job_id, queue, state = await _job(store, form)
    if state not in ("pending", "processing", "waiting"):
        return Done(f"job {job_id} is {state}: nothing to cancel", f"/job/{job_id}", True)
    if not await queue_handle(store, queue).cancel(job_id):
        return Done(f"job {job_id} finished before it could be cancelled", f"/job/{job_id}", True)
    return Done(f"cancelled job {job_id} of {queue!r} (it was {state})", f"/job/{job_id}")


async def requeue_job(store: Store, form: FormData) -> Done:
    job_id, queue, state = await _job(store, form)
    if state != "dead" or not await queue_handle(store, queue).requeue_dead(job_id):
        return Done(f"job {job_id} is not a dead letter", f"/job/{job_id}", True)
    return Done(f"requeued dead letter {job_id} of {queue!r}", f"/job/{job_id}")


async def purge_job(store: Store, form: FormData) -> Done:
    job_id, queue, state = await _job(store, form)
    if state != "dead" or not await queue_handle(store, queue).purge_dead(ids=[job_id]):
        return Done(f"job {job_id} is not a dead letter", f"/job/{job_id}", True)
    return Done(f"purged dead letter {job_id} of {queue!r}", f"/queue/dead?name={_q(queue)}")


# -- workflows -----------------------------------------------------------------------------------
async def cancel_workflow(store: Store, form: FormData) -> Done:
    workflow_id = _form_int(form, "id")
    if form.get("confirm") != "yes":
        raise BadRequest(
            "cancelling a workflow cancels every step not finished yet: tick the confirmation box"
        )
    try:
        run = await store.workflow_run(workflow_id)
    except InvalidArgument:
        raise BadRequest(f"no workflow {workflow_id}", 404) from None
    back = f"/workflow/{workflow_id}"
    if (await run.status()).finished:
        return Done(f"workflow {workflow_id} has finished: nothing to cancel", back, True)
    cancelled = await run.cancel()
    return Done(
        f"cancelled workflow {workflow_id} ({run.name!r}): {cancelled} step(s)",
        back,
    )


# -- schedules -----------------------------------------------------------------------------------
async def pause_schedule(store: Store, form: FormData) -> Done:
    name = name_param(_form_params(form))
    if not await store.pause_schedule(name):
        return Done(f"no schedule named {name!r}", "/schedules", True)
    return Done(f"paused schedule {name!r}", "/schedules")


async def run_schedule(store: Store, form: FormData) -> Done:
    name = name_param(_form_params(form))
    job_id = await store.run_schedule_now(name)
    if job_id is None:
        return Done(f"no schedule named {name!r}", "/schedules", True)
    return Done(f"ran schedule {name!r} now: job {job_id}", "/schedules")


async def resume_schedule(store: Store, form: FormData) -> Done:
    name = name_param(_form_params(form))
    if not await store.resume_schedule(name):
        return Done(f"no schedule named {name!r}", "/schedules", True)
    return Done(f"resumed schedule {name!r}", "/schedules")


ACTIONS: Final[dict[str, Handler]] = {
    "/action/queue/pause": pause_queue,
    "/action/queue/resume": resume_queue,
    "/action/dead/requeue": requeue_dead,
    "/action/dead/purge": purge_dead,
    "/action/job/cancel": cancel_job,
    "/action/job/requeue": requeue_job,
    "/action/job/purge": purge_job,
    "/action/workflow/cancel": cancel_workflow,
    "/action/schedule/pause": pause_schedule,
    "/action/schedule/resume": resume_schedule,
    "/action/jobs/cancel": cancel_selected,
    "/action/schedule/run": run_schedule,
}


def _refused(status: int, why: str, request: Request, what: str) -> Response:
    log.warning("refused %s by %s: %s", what, request.scope.get(USER_KEY), why)
    return PlainTextResponse(f"{why}\n", status_code=status)


def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def run(request: Request) -> Response:
        settings = settings_of(request)
        what = request.url.path.removeprefix(base_of(request)).removeprefix("/action/")
        user = request.scope.get(USER_KEY)
        if not settings.allow_actions:
            return _refused(403, "this dashboard is read-only (start it with --allow-actions)",
                            request, what)  # fmt: skip
        if not same_origin(request, settings.hosts, settings.trusted_origins):
            return _refused(403, "cross-origin request refused (Origin/Referer is not this "
                                 "dashboard)", request, what)  # fmt: skip
        async with request.form(max_files=0, max_fields=MAX_SELECTED + 20) as form:
            if not settings.csrf.valid(request, form.get(CSRF_FIELD)):
                return _refused(403, "missing or invalid CSRF token: reload the page and try "
                                     "again", request, what)  # fmt: skip
            try:
                done = await handler(settings.store, form)
            except BadRequest as exc:
                log.warning("%s by %s failed: %s", what, user, exc.message)
                done = Done(exc.message, _back(form), failed=True)
            except AlkstoreError as exc:
                log.warning("%s by %s failed", what, user, exc_info=True)
                done = Done(f"failed: {exc}", _back(form), failed=True)
            else:
                (log.warning if done.failed else log.info)("%s by %s: %s", what, user, done.text)
            target = _back(form) if form.get("back") == "1" else done.to
        response = RedirectResponse(base_of(request) + target, status_code=303)
        notice_cookie(response, request, "error" if done.failed else "ok", done.text)
        return response

    run.__name__ = handler.__name__
    return run


def _back(form: FormData) -> str:
    """The page a form came from (``next``), when it is a path inside the
    dashboard; the overview otherwise."""
    target = form.get("next")
    if (
        isinstance(target, str)
        and target.startswith("/")
        and not target.startswith("//")
        and "\\" not in target
        and all(32 < ord(c) < 127 for c in target)
    ):
        return target
    return "/"
