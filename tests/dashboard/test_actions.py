"""Every action through the ASGI app, on every backend: it does what it
says to the store, sends the browser back with a notice, and is logged
with the user who asked."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest

from alkstore import ManualClock, Store
from alkstore.dashboard import create_app

from .support import BASE, client, fill, post, token


async def test_pause_and_resume_a_queue(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    await fill(store)
    caplog.set_level(logging.INFO, "alkstore.dashboard")
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, "/queue?name=emails")
        response = await post(c, "/action/queue/pause", {"name": "emails"}, csrf=csrf)
        assert response.status_code == 303
        assert response.headers["location"] == "/queue?name=emails"
        assert await store.queue("emails").is_paused()
        page = (await c.get(response.headers["location"])).text
        assert "paused queue &#39;emails&#39;" in page and 'data-paused="yes"' in page
        assert "Resume queue" in page
        again = (await c.get("/queue?name=emails")).text
        assert "paused queue" not in again  # the notice shows once
        await post(c, "/action/queue/resume", {"name": "emails"}, csrf=csrf)
        assert not await store.queue("emails").is_paused()
    logged = [r.getMessage() for r in caplog.records if r.name == "alkstore.dashboard"]
    assert logged == [
        "queue/pause by anonymous: paused queue 'emails'",
        "queue/resume by anonymous: resumed queue 'emails'",
    ]


async def test_a_queue_that_does_not_exist_is_not_shown_nor_paused_into_being(
    store: Store,
) -> None:
    """The command line's rule (a queue exists once listed, or fed by a
    schedule): a typo is a 404 with the near name, and pausing it creates
    no queue."""
    await fill(store)
    await store.schedule("nightly", "reports", "@every 1h", None)
    before = {q.name for q in await store.list_queues()}
    async with client(create_app(store, allow_actions=True)) as c:
        for page in ("/queue?name=emials", "/queue/dead?name=emials"):
            typo = await c.get(page)
            assert typo.status_code == 404, page
            assert "no queue named &#39;emials&#39; (did you mean &#39;emails&#39;?)" in typo.text
        assert (await c.get("/queue?name=reports")).status_code == 200  # fed by a schedule
        csrf = await token(c)
        for action in ("pause", "resume"):
            response = await post(c, f"/action/queue/{action}", {"name": "emials"}, csrf=csrf)
            assert response.status_code == 303
            page = (await c.get(response.headers["location"])).text
            assert "no queue named &#39;emials&#39;" in page, action
    assert {q.name for q in await store.list_queues()} == before
    assert not await store.queue("emials").is_paused()


async def test_an_outbox_queue_is_paused_by_its_internal_name(store: Store) -> None:
    await store.outbox("webhooks").enqueue({"order": 1})
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c)
        name = "__alkstore_outbox:webhooks"
        assert (await post(c, "/action/queue/pause", {"name": name}, csrf=csrf)).status_code == 303
    assert await store.outbox("webhooks").queue.is_paused()


async def test_requeue_selected_dead_letters(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, "/queue/dead?name=emails")
        response = await c.post(
            "/action/dead/requeue",
            data={"csrf_token": csrf, "name": "emails", "which": "selected",
                  "id": [str(made.dead[0]), str(made.dead[2])]},
            headers={"origin": BASE},
        )  # fmt: skip
        assert response.status_code == 303
        assert response.headers["location"] == "/queue/dead?name=emails"
        page = (await c.get(response.headers["location"])).text
    assert "requeued 2 dead letter(s) of &#39;emails&#39;" in page
    for job_id, state in zip(made.dead, ("pending", "dead", "pending"), strict=True):
        info = await store.get_job(job_id)
        assert info is not None and info.state == state


async def test_requeue_by_age_then_purge_all(store: Store, clock: ManualClock) -> None:
    q = store.queue("q", max_attempts=1)
    await q.enqueue_batch([1, 2, 3, 4])
    early = await q.claim_batch("w", 2)
    for job in early:
        assert await job.fail("early")
    clock.advance(timedelta(hours=2).total_seconds())
    late = await q.claim_batch("w", 2)
    for job in late:
        assert await job.fail("late")
    # Ages are measured on the store's clock (here the test's).
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, "/queue/dead?name=q")
        requeued = await post(c, "/action/dead/requeue",
                              {"name": "q", "which": "age", "age": "1h"}, csrf=csrf)  # fmt: skip
        assert requeued.status_code == 303
        assert [j.id for j in await q.list_jobs(state="dead")] == [j.id for j in late]
        assert sorted(j.id for j in await q.list_jobs(state="pending")) == [j.id for j in early]
        refused = await post(c, "/action/dead/purge", {"name": "q", "which": "all"}, csrf=csrf)
        page = (await c.get(refused.headers["location"])).text
        assert "tick the confirmation box" in page
        assert len(await q.list_jobs(state="dead")) == 2  # nothing purged
        purged = await post(c, "/action/dead/purge",
                            {"name": "q", "which": "all", "confirm": "yes"}, csrf=csrf)  # fmt: skip
        page = (await c.get(purged.headers["location"])).text
    assert "purged 2 dead letter(s)" in page
    assert await q.list_jobs(state="dead") == []


async def test_requeue_all_and_purge_selected(store: Store) -> None:
    made = await fill(store)
    q = store.queue("emails")
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, "/queue/dead?name=emails")
        await post(c, "/action/dead/purge",
                   {"name": "emails", "which": "selected", "id": str(made.dead[1])}, csrf=csrf)
        assert [j.id for j in await q.list_jobs(state="dead")] == [made.dead[0], made.dead[2]]
        await post(c, "/action/dead/requeue", {"name": "emails", "which": "all"}, csrf=csrf)
    assert await q.list_jobs(state="dead") == []
    assert await store.get_job(made.dead[1]) is None


async def test_cancel_requeue_and_purge_one_job(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, f"/job/{made.pending[0]}")
        response = await post(c, "/action/job/cancel", {"id": made.pending[0]}, csrf=csrf)
        assert response.headers["location"] == f"/job/{made.pending[0]}"
        page = (await c.get(response.headers["location"])).text
        assert "cancelled job" in page and "(it was pending)" in page
        info = await store.get_job(made.pending[0])
        assert info is not None and info.state == "cancelled"  # the queue keeps history
        # A job that cannot be cancelled: told so, nothing changes.
        again = await post(c, "/action/job/cancel", {"id": made.dead[0]}, csrf=csrf)
        page = (await c.get(again.headers["location"])).text
        assert "is dead: nothing to cancel" in page and 'class="notice error"' in page
        await post(c, "/action/job/requeue", {"id": made.dead[0]}, csrf=csrf)
        info = await store.get_job(made.dead[0])
        assert info is not None and info.state == "pending" and info.attempts == 0
        purged = await post(c, "/action/job/purge", {"id": made.dead[1]}, csrf=csrf)
        assert purged.headers["location"] == "/queue/dead?name=emails"
        assert await store.get_job(made.dead[1]) is None
        missing = await post(c, "/action/job/purge", {"id": 999_999}, csrf=csrf)
        assert missing.status_code == 303
        assert "no job 999999" in (await c.get(missing.headers["location"])).text


async def test_pause_and_resume_a_schedule(store: Store) -> None:
    await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, "/schedules")
        response = await post(c, "/action/schedule/pause", {"name": "digest"}, csrf=csrf)
        assert response.headers["location"] == "/schedules"
        assert [s.paused for s in await store.list_schedules()] == [False, True]
        await post(c, "/action/schedule/resume", {"name": "digest"}, csrf=csrf)
        assert [s.paused for s in await store.list_schedules()] == [False, False]
        unknown = await post(c, "/action/schedule/pause", {"name": "nope"}, csrf=csrf)
        assert "no schedule named" in (await c.get(unknown.headers["location"])).text


async def test_cancel_selected_live_jobs(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store)) as c:
        assert 'name="id"' not in (await c.get("/queue?name=emails")).text  # read-only
    async with client(create_app(store, allow_actions=True)) as c:
        page = (await c.get("/queue?name=emails")).text
        ticks = re.findall(r'name="id" value="(\d+)"', page)
        assert sorted(map(int, ticks)) == sorted(made.pending + made.processing)  # live rows only
        csrf = await token(c, "/queue?name=emails")
        chosen = [made.pending[0], made.processing[0], made.dead[0]]
        response = await post(c, "/action/jobs/cancel", {"name": "emails", "id": chosen},
                              csrf=csrf)  # fmt: skip
        assert response.headers["location"] == "/queue?name=emails"
        page = (await c.get(response.headers["location"])).text
        assert "cancelled 2 of 3 selected job(s) of &#39;emails&#39;; 1 had finished" in page
        empty = await post(c, "/action/jobs/cancel", {"name": "emails"}, csrf=csrf)
        assert "no job selected" in (await c.get(empty.headers["location"])).text
    for job_id in chosen[:2]:
        info = await store.get_job(job_id)
        assert info is not None and info.state == "cancelled"
    dead = await store.get_job(made.dead[0])
    assert dead is not None and dead.state == "dead"


async def test_run_a_schedule_now(store: Store) -> None:
    await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, "/schedules")
        assert "Run now" in (await c.get("/schedules")).text
        response = await post(c, "/action/schedule/run", {"name": "digest"}, csrf=csrf)
        page = (await c.get(response.headers["location"])).text
        assert "ran schedule &#39;digest&#39; now: job" in page
        missing = await post(c, "/action/schedule/run", {"name": "nope"}, csrf=csrf)
        assert "no schedule named" in (await c.get(missing.headers["location"])).text
    (digest,) = [s for s in await store.list_schedules() if s.name == "digest"]
    assert digest.last_fire_at is None  # its fire times stay
    jobs = await store.queue("emails").list_jobs(state="ready")
    assert [j.payload for j in jobs if j.payload == {"kind": "digest"}] == [{"kind": "digest"}]


async def test_a_form_goes_back_to_its_page_and_never_off_the_dashboard(store: Store) -> None:
    await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c)
        for target, expected in (
            ("/queue?name=emails&state=dead", "/queue?name=emails&state=dead"),
            ("//evil.example/x", "/"), ("https://evil.example/", "/"), ("/\\evil", "/"),
            ("javascript:alert(1)", "/"),
        ):  # fmt: skip
            response = await post(
                c, "/action/queue/pause", {"name": "emails", "next": target, "back": "1"},
                csrf=csrf,
            )  # fmt: skip
            assert response.headers["location"] == expected, target


async def test_bad_action_input_is_a_notice_and_changes_nothing(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c)
        for data, message in (
            ({"name": "emails", "which": "selected"}, "no dead letter selected"),
            ({"name": "emails", "which": "selected", "id": "x"}, "not a whole number"),
            ({"name": "emails", "which": "age", "age": "soon"}, "duration"),
            ({"name": "emails", "which": "sideways"}, "say which dead letters"),
            ({"which": "all"}, "missing parameter"),
            ({"name": "__alkstore_x", "which": "all"}, "reserved"),
        ):  # fmt: skip
            response = await post(c, "/action/dead/requeue", data, csrf=csrf)
            assert response.status_code == 303
            page = (await c.get(response.headers["location"])).text
            assert message in page, (data, page[:2000])
    assert [j.id for j in await store.queue("emails").list_jobs(state="dead")] == made.dead
