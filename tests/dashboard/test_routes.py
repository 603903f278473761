"""The dashboard's pages through its ASGI app (httpx), on every backend:
each page shows what the store holds, listings page by keyset, bad
parameters are refused with 400, live fragments come back when the store
wakes, and the app works mounted under a prefix in someone else's app."""

from __future__ import annotations

import html
import re

import anyio
import orjson
import pytest
from fastapi import FastAPI

from alkstore import ManualClock, Rate, Store
from alkstore.dashboard import create_app

from .support import client, fill, post, token


def rows(page: str, attribute: str) -> list[str]:
    """The values of ``data-ATTRIBUTE="..."`` in a page, in order."""
    return re.findall(rf'data-{attribute}="([^"]*)"', page)


async def test_the_overview_shows_every_queue_stream_schedule_and_held_lock(store: Store) -> None:
    await fill(store)
    async with client(create_app(store)) as c:
        page = (await c.get("/")).text
    assert rows(page, "queue") == ["__alkstore_outbox:webhooks", "emails", "reports"]
    emails = page.split('data-queue="emails"')[1].split("</tr>")[0]
    counts = dict(re.findall(r'data-count="(\w+)">(?:<a[^>]*>)?(\d+)', emails))
    assert counts == {"ready": "3", "scheduled": "0", "waiting": "0", "processing": "2",
                      "dead": "3"}  # fmt: skip
    assert "webhooks (outbox)" in page
    async with client(create_app(store)) as c:
        outbox = await c.get("/queue", params={"name": "__alkstore_outbox:webhooks"})
    assert outbox.status_code == 200 and "<h1>webhooks (outbox)</h1>" in outbox.text
    assert 'data-count="ready">1<' in outbox.text
    reports = page.split('data-queue="reports"')[1].split("</tr>")[0]
    assert "paused" in reports
    # throughput: 4 acked into history and 3 dead, in the last 30 minutes
    assert "4 done" in emails and "3 dead" in emails and "<svg" in emails
    assert "keeps no history" in reports
    assert ">orders</a>" in page and "shipping" in page and "lag 4" in page
    assert rows(page, "schedule") == ["cleanup", "digest"]
    assert rows(page, "lock") == ["nightly-report"] and "host-1" in page
    assert "read-only" in page and "<form" not in page  # no actions by default


async def test_the_queue_page_shows_counts_chart_and_a_page_of_jobs(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store)) as c:
        page = (await c.get("/queue", params={"name": "emails"})).text
        dead_only = (await c.get("/queue", params={"name": "emails", "state": "dead"})).text
        acked = (await c.get("/queue", params={"name": "emails", "state": "acked"})).text
    summary = page.split('id="queue-summary"')[1].split("</div>\n</div>")[0]
    counts = dict(re.findall(r'data-count="(\w+)">(?:<a[^>]*>)?(\d+)', summary))
    assert counts == {"ready": "3", "scheduled": "0", "waiting": "0", "processing": "2",
                      "dead": "3", "history": "4"}  # fmt: skip
    assert "4 finished, 3 dead" in page
    listed = [int(i) for i in rows(page, "job")]
    assert listed == sorted(made.dead + made.processing + made.pending)  # live and dead, by id
    assert [int(i) for i in rows(dead_only, "job")] == made.dead
    assert "SMTP 550: mailbox unavailable" in dead_only
    assert [int(i) for i in rows(acked, "job")] == made.acked
    assert "limits: none · a processing job keeps its unique key" in page


async def test_the_job_list_filters_by_payload_or_key_text(store: Store) -> None:
    made = await fill(store)
    await store.queue("emails").enqueue({"to": "zed@example.com"}, concurrency_key="Tenant-9")
    async with client(create_app(store)) as c:
        one = (await c.get("/queue", params={"name": "emails", "match": "USER11@"})).text
        key = (await c.get("/queue", params={"name": "emails", "match": "tenant-9"})).text
        none = (await c.get("/queue", params={"name": "emails", "match": "nobody"})).text
    assert [int(i) for i in rows(one, "job")] == [made.pending[-1]]  # any case
    assert len(rows(key, "job")) == 1 and "zed@example.com" in key  # a concurrency key
    assert rows(none, "job") == [] and "No jobs containing" in none
    # every live and dead job read (3 dead, 2 processing, 4 pending), to the end
    assert "searched 9 job(s) (payloads" in none
    assert 'name="match" maxlength="200" value="nobody"' in none


async def test_the_queue_chart_has_axes_and_longer_windows(store: Store) -> None:
    await fill(store)
    async with client(create_app(store)) as c:
        default = (await c.get("/queue", params={"name": "emails"})).text
        day = (await c.get("/queue", params={"name": "emails", "window": "24h"})).text
        bad = await c.get("/queue", params={"name": "emails", "window": "1y"})
    assert "last 30m, per 1m" in default and "last 1d, per 30m" in day
    chart = day.split('id="throughput"')[1].split("</figure>")[0]
    assert '<span class="y-top" title="the busiest bar">7</span>' in chart  # 4 done + 3 dead
    assert len(re.findall(r"<time datetime=", chart)) == 2  # the first and last instants
    windows = re.findall(r'<a href="[^"]*"( class="current")?>(30m|6h|24h|7d)</a>', day)
    assert [(w, bool(cur)) for cur, w in windows] == [
        ("30m", False), ("6h", False), ("24h", True), ("7d", False)
    ]
    assert bad.status_code == 400 and "window must be one of" in bad.text


async def test_a_job_not_due_yet_reads_scheduled_in_the_list(store: Store) -> None:
    q = store.queue("later")
    due = await q.enqueue("now")
    later = await q.enqueue("later", delay=3600)
    async with client(create_app(store)) as c:
        page = (await c.get("/queue", params={"name": "later"})).text
    states = dict(re.findall(r'data-job="(\d+)">.*?<span class="state (\w+)">', page, re.S))
    assert states == {str(due): "pending", str(later): "scheduled"}
    assert "queue.set_retention(history=3600)</code> keeps an hour" in page  # how to chart it


async def test_the_queue_page_shows_the_queues_limits_and_unique_policy(store: Store) -> None:
    q = store.queue("paced")
    await q.enqueue({"n": 1})
    await q.set_limits(concurrency_per_key=2, rate=Rate(10, per=1.5), rate_per_key=Rate(1, per=60))
    await q.set_unique_policy(processing_blocks=False)
    async with client(create_app(store)) as c:
        page = (await c.get("/queue", params={"name": "paced"})).text
    assert "limits: 2 per key, 10/1.5s, 1/60s per key" in page
    assert "a processing job gives up its unique key" in page


async def test_jobs_page_by_keyset_with_a_link_to_the_next_page(store: Store) -> None:
    q = store.queue("big")
    ids = await q.enqueue_batch(list(range(120)))
    seen: list[int] = []
    url: str | None = "/queue?name=big"
    pages = 0
    async with client(create_app(store)) as c:
        while url is not None:
            page = (await c.get(url)).text
            seen += [int(i) for i in rows(page, "job")]
            pages += 1
            nxt = re.search(r'rel="next" href="([^"]+)"', page)
            url = html.unescape(nxt.group(1)) if nxt else None
    assert seen == ids and pages == 3  # 50, 50, 20: the last page has no next link
    async with client(create_app(store)) as c:
        page = (await c.get("/queue", params={"name": "big", "after": ids[99], "limit": 25})).text
    assert [int(i) for i in rows(page, "job")] == ids[100:]
    assert "first page" in page


async def test_the_dead_letters_page_lists_them_with_their_errors(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store)) as c:
        page = (await c.get("/queue/dead", params={"name": "emails"})).text
    assert [int(i) for i in rows(page, "job")] == made.dead
    assert page.count("SMTP 550: mailbox unavailable") == 3 and "failed" in page


async def test_the_job_page_shows_payload_attempts_error_and_claim(store: Store) -> None:
    made = await fill(store)
    async with client(create_app(store)) as c:
        dead = (await c.get(f"/job/{made.dead[0]}")).text
        running = (await c.get(f"/job/{made.processing[0]}")).text
        finished = (await c.get(f"/job/{made.acked[0]}")).text
    payload = re.search(r'<pre class="json" id="payload">(.*?)</pre>', dead, re.S)
    assert payload is not None
    assert orjson.loads(html.unescape(payload.group(1))) == {"to": "user4@example.com"}
    assert "\n  &#34;to&#34;" in payload.group(1)  # pretty-printed, indented
    assert "1 of 1" in dead and "dead (failed)" in dead
    assert "ValueError: SMTP 550: mailbox unavailable" in dead
    # The attempt that failed, its worker and its stack trace.
    attempts = dead.split('<table class="grid" id="attempts">')[1].split("</table>")[0]
    assert attempts.count('<tr class="attempt') == 1 and "died" in attempts
    assert "<code>web-1</code>" in attempts and "in _send_email" in attempts
    assert '<table class="grid" id="attempts">' not in running
    assert "claimed by" in running and "web-2" in running and "claim lapses" in running
    assert "finished by" in finished and "acked by web-1" in finished


async def test_the_streams_and_stream_pages_show_consumers_and_events_newest_first(
    store: Store,
) -> None:
    await fill(store)
    async with client(create_app(store)) as c:
        listing = (await c.get("/streams")).text
        first = (await c.get("/stream", params={"name": "orders", "limit": 25})).text
        older = (await c.get("/stream", params={"name": "orders", "before": 3})).text
    assert ">orders</a>" in listing and "lag 4" in listing
    assert rows(first, "offset") == ["7", "6", "5", "4", "3", "2", "1"]
    assert "shipping" in first and "billing" in first
    assert rows(older, "offset") == ["2", "1"]


async def test_stream_events_page_by_keyset(store: Store) -> None:
    s = store.stream("long")
    for i in range(60):
        await s.publish(i)
    async with client(create_app(store)) as c:
        page = (await c.get("/stream", params={"name": "long"})).text
        nxt = re.search(r'rel="next" href="([^"]+)"', page)
        assert nxt is not None
        rest = (await c.get(html.unescape(nxt.group(1)))).text
    assert rows(page, "offset") == [str(i) for i in range(60, 10, -1)]
    assert rows(rest, "offset") == [str(i) for i in range(10, 0, -1)]
    assert 'rel="next"' not in rest


async def test_the_schedules_and_locks_pages(store: Store) -> None:
    await fill(store)
    await store.pause_schedule("digest")
    async with client(create_app(store)) as c:
        schedules = (await c.get("/schedules")).text
        locks = (await c.get("/locks")).text
    assert rows(schedules, "schedule") == ["cleanup", "digest"]
    digest = schedules.split('data-schedule="digest"')[1].split("</tr>")[0]
    assert "paused" in digest and "0 7 * * *" in digest
    assert "@every 10m" in schedules and "latest" in schedules
    cleanup = schedules.split('data-schedule="cleanup"')[1].split("</tr>")[0]
    assert "<td>UTC</td>" in cleanup  # the time zone has a column, as in the CLI
    assert rows(locks, "lock") == ["nightly-report"] and "held" in locks and "host-1" in locks


@pytest.mark.parametrize(
    "url",
    [
        "/queue", "/queue?name=", "/queue?name=q&limit=7", "/queue?name=q&after=-1",
        "/queue?name=q&after=abc", "/queue?name=q&state=bogus", "/queue/dead?name=q&after=1.5",
        "/stream?name=s&before=x", "/stream", "/job/0", "/queue?name=" + "x" * 2000,
        "/queue?name=q&after=99999999999999999999",
    ],
)  # fmt: skip
async def test_bad_parameters_are_refused_with_400(store: Store, url: str) -> None:
    async with client(create_app(store)) as c:
        response = await c.get(url)
    assert response.status_code == 400, (url, response.status_code)
    assert "<h1>400</h1>" in response.text


async def test_unknown_pages_and_jobs_are_404_and_other_methods_405(store: Store) -> None:
    async with client(create_app(store)) as c:
        assert (await c.get("/nope")).status_code == 404
        assert (await c.get("/job/424242")).status_code == 404
        assert (await c.get("/live?view=nope")).json() == {"error": "no view named 'nope'"}
        assert (await c.put("/queue?name=q")).status_code == 405
        assert (await c.get("/action/queue/pause")).status_code == 405


async def test_the_live_endpoint_answers_with_the_pages_fragments(store: Store) -> None:
    q = store.queue("q")
    await q.enqueue(1)
    async with client(create_app(store)) as c:
        first = (await c.get("/live", params={"view": "queue", "name": "q"})).json()
        await q.enqueue(2)
        second = (await c.get("/live", params={"view": "queue", "name": "q"})).json()
        overview = (await c.get("/live", params={"view": "overview"})).json()
    assert sorted(first["fragments"]) == ["clock", "jobs", "queue_summary"]
    assert 'data-count="ready">1<' in first["fragments"]["queue_summary"]
    assert 'data-count="ready">2<' in second["fragments"]["queue_summary"]
    assert rows(second["fragments"]["jobs"], "job") == ["1", "2"]
    assert sorted(overview["fragments"]) == ["clock", "locks", "queues", "schedules", "streams"]


async def test_a_waiting_live_request_answers_as_soon_as_the_store_wakes(store: Store) -> None:
    """With a refresh interval of 60 s, only a wake (an enqueue's commit)
    can answer a waiting request within the bound below."""
    q = store.queue("q")
    await q.enqueue(1)
    answered: list[dict[str, object]] = []
    async with client(create_app(store, refresh=60)) as c:
        await c.get("/live", params={"view": "queue", "name": "q"})  # learns the channels

        async def wait() -> None:
            response = await c.get("/live", params={"view": "queue", "name": "q", "wait": "1"})
            answered.append(response.json())

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await anyio.sleep(0.3)
                assert answered == []  # still waiting
                await q.enqueue(2)
    fragments = answered[0]["fragments"]
    assert isinstance(fragments, dict) and 'data-count="ready">2<' in fragments["queue_summary"]


async def test_a_waiting_live_request_answers_after_the_refresh_interval(store: Store) -> None:
    async with client(create_app(store, refresh=0.5)) as c:
        with anyio.fail_after(10):
            response = await c.get("/live", params={"view": "overview", "wait": "1"})
    assert response.status_code == 200 and response.json()["refresh"] == 0.5


async def test_the_json_overview_has_the_shapes_of_watch_json(store: Store) -> None:
    await fill(store)
    async with client(create_app(store)) as c:
        doc = (await c.get("/api/overview")).json()
    assert sorted(doc) == ["at", "locks", "queues", "schedules", "streams"]
    emails = next(q for q in doc["queues"] if q["name"] == "emails")
    assert emails["dead"] == 3 and emails["processing"] == 2 and emails["kind"] == "queue"
    assert doc["streams"][0]["consumers"][0] == {"name": "billing", "offset": 7, "lag": 0,
                                                 "protected": False}  # fmt: skip


async def test_static_files_are_served_and_nothing_else_is(store: Store) -> None:
    async with client(create_app(store)) as c:
        css = await c.get("/static/dashboard.css")
        js = await c.get("/static/live.js")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert js.status_code == 200 and "data-live" in js.text
        for path in (
            "/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py",
            "/static/%2e%2e%2f%2e%2e%2fpyproject.toml", "/static//etc/passwd",
            "/static/../../../../etc/passwd", "/static/templates/base.html",
        ):  # fmt: skip
            response = await c.get(path)
            assert response.status_code == 404, (path, response.status_code)
            assert "import" not in response.text and "root:" not in response.text


async def test_every_response_carries_the_security_headers(store: Store) -> None:
    async with client(create_app(store)) as c:
        for path in ("/", "/static/live.js", "/nope", "/live?view=locks"):
            headers = (await c.get(path)).headers
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert "script-src 'self'" in headers["content-security-policy"]
            assert headers["x-frame-options"] == "DENY"
            assert headers["x-content-type-options"] == "nosniff"
        assert (await c.get("/")).headers["cache-control"] == "no-store"


async def test_mounted_under_a_prefix_in_a_fastapi_app(store: Store, clock: ManualClock) -> None:
    """The user's app owns the store; the dashboard's links, static files,
    live URL and action redirects all stay under the mount's prefix."""
    made = await fill(store)
    app = FastAPI()

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    app.mount("/admin/alkstore", create_app(store, allow_actions=True))
    async with client(app) as c:
        assert (await c.get("/hello")).json() == {"hello": "world"}
        page = (await c.get("/admin/alkstore/")).text
        assert 'href="/admin/alkstore/static/dashboard.css"' in page
        assert 'href="/admin/alkstore/queue?name=emails"' in page
        assert 'data-live-url="/admin/alkstore/live?view=overview"' in page
        assert (await c.get("/admin/alkstore/static/live.js")).status_code == 200
        live = await c.get("/admin/alkstore/live", params={"view": "overview"})
        assert "/admin/alkstore/queue?name=emails" in live.json()["fragments"]["queues"]
        csrf = await token(c, "/admin/alkstore/queue/dead?name=emails")
        response = await post(
            c, "/admin/alkstore/action/dead/requeue",
            {"name": "emails", "which": "selected", "id": str(made.dead[0])}, csrf=csrf,
        )  # fmt: skip
        assert response.status_code == 303
        assert response.headers["location"] == "/admin/alkstore/queue/dead?name=emails"
        assert (await store.get_job(made.dead[0])).state == "pending"  # type: ignore[union-attr]
        after = (await c.get(response.headers["location"])).text
        assert "requeued 1 dead letter" in after
