"""Dependencies, results and workflows in the dashboard, through its ASGI
app on every backend: a job's page links what it waits for and what waits
for it, shows its result and its workflow; the workflows page lists runs
newest first, a page at a time; a run's page shows its steps, their states
and its graph; the queue pages count waiting jobs; cancelling a workflow is
an action like the others."""

from __future__ import annotations

import html
import logging
import re
from typing import Any

import anyio
import pytest

from alkstore import Store
from alkstore.dashboard import create_app
from tests.graphs import Graphs, enqueue_graphs

from .support import client, post, token


def rows(page: str, attribute: str) -> list[str]:
    """The values of ``data-ATTRIBUTE="..."`` in a page, in order."""
    return re.findall(rf'data-{attribute}="([^"]*)"', page)


def row(page: str, attribute: str, value: str) -> str:
    """The markup of the element ``data-ATTRIBUTE="VALUE"`` up to its row's end."""
    return page.split(f'data-{attribute}="{value}"', 1)[1].split("</tr>", 1)[0]


async def graphs(store: Store) -> Graphs:
    """``tests/graphs.py``'s runs, with a result and an error to escape."""
    return await enqueue_graphs(
        store, tea_result={"price": 4, "note": "<b>bold</b>"}, build_error="compiler crashed"
    )


async def test_the_workflow_page_shows_every_step_its_state_and_its_graph(store: Store) -> None:
    made = await graphs(store)
    ids = made.quote.job_ids
    async with client(create_app(store)) as c:
        page = (await c.get(f"/workflow/{made.quote.id}")).text
    assert f"<h1>Workflow {made.quote.id} " in page and "quote" in page
    assert rows(page, "step") == ["tea", "cups", "total", "mail"]  # level by level
    states = {name: re.search(r'class="state (\w+)"', row(page, "step", name)) for name in ids}
    assert {n: m.group(1) for n, m in states.items() if m} == {
        "tea": "acked", "cups": "pending", "total": "waiting", "mail": "waiting",
    }  # fmt: skip
    for name, job_id in ids.items():
        assert f'<a href="/job/{job_id}">{job_id}</a>' in row(page, "step", name)
    total = row(page, "step", "total")
    assert "tea, cups" in total and '<td class="num">1</td>' in total
    # The result, escaped: data, never markup.
    assert "&lt;b&gt;bold&lt;/b&gt;" in row(page, "step", "tea") and "<b>bold" not in page
    assert 'id="workflow-summary"' in page and "2 waiting" in page and "1 acked" in page
    # The graph: a box per step, linked to its job, and an edge per dependency.
    svg = page.split('<svg class="graph"', 1)[1].split("</svg>", 1)[0]
    assert rows(svg, "node") == ["tea", "cups", "total", "mail"]
    for name, job_id in ids.items():
        node = svg.split(f'data-node="{name}"', 1)[0].rsplit("<a", 1)[1]
        assert f'href="/job/{job_id}"' in node
    edges = re.findall(r'<path class="edge (\w+)"[^>]*><title>([^<]*)</title>', svg)
    assert sorted(edges) == [
        ("acked", "total waits for tea"), ("pending", "total waits for cups"),
        ("waiting", "mail waits for total"),
    ]  # fmt: skip
    assert "running" in page.split("</h1>", 1)[0]


async def test_the_workflow_page_shows_why_steps_failed(store: Store) -> None:
    made = await graphs(store)
    build = made.deploy.job_ids["build"]
    async with client(create_app(store)) as c:
        page = (await c.get(f"/workflow/{made.deploy.id}")).text
    assert "failed: compiler crashed" in row(page, "step", "build")
    assert 'class="state dead"' in row(page, "step", "build")
    ship = row(page, "step", "ship")
    assert 'class="state cancelled"' in ship and f"dependency job {build} died (failed)" in ship
    assert 'class="state pending"' in row(page, "step", "cleanup")


async def test_a_finished_run_reads_succeeded_or_failed(store: Store) -> None:
    made = await graphs(store)
    for queue in ("tasks", "tasks", "mail"):
        job = await store.queue(queue).claim_one("w")
        assert job is not None and await job.ack()
    assert await made.deploy.cancel() == 1
    async with client(create_app(store)) as c:
        done = (await c.get(f"/workflow/{made.quote.id}")).text
        failed = (await c.get(f"/workflow/{made.deploy.id}")).text
        listing = (await c.get("/workflows")).text
    assert '<span class="state succeeded">succeeded</span>' in done.split("</h1>", 1)[0]
    assert '<span class="state failed">failed</span>' in failed.split("</h1>", 1)[0]
    assert "state succeeded" in row(listing, "workflow", str(made.quote.id))
    assert "state failed" in row(listing, "workflow", str(made.deploy.id))


async def test_the_workflows_page_lists_runs_newest_first_a_page_at_a_time(store: Store) -> None:
    made = await graphs(store)
    async with client(create_app(store)) as c:
        page = (await c.get("/workflows")).text
    assert rows(page, "workflow") == [str(made.deploy.id), str(made.quote.id)]
    quote = row(page, "workflow", str(made.quote.id))
    assert f'href="/workflow/{made.quote.id}">quote</a>' in quote
    assert '<td class="num">4</td>' in quote and "state running" in quote
    assert rows(quote, "state") == ["waiting", "pending", "acked"]
    assert "2 waiting" in quote and 'rel="next"' not in page

    ids = [made.deploy.id]
    for n in range(30):
        wf = store.workflow(f"batch-{n}")
        wf.step("only", "batch", n)
        ids.append((await wf.enqueue()).id)
    seen: list[int] = []
    url: str | None = "/workflows?limit=25"
    async with client(create_app(store)) as c:
        while url is not None:
            page = (await c.get(url)).text
            seen += [int(i) for i in rows(page, "workflow")]
            nxt = re.search(r'rel="next" href="([^"]+)"', page)
            url = html.unescape(nxt.group(1)) if nxt else None
    assert seen == sorted([made.quote.id, *ids], reverse=True)  # 25, then 7


async def test_the_job_page_links_dependencies_and_dependents(store: Store) -> None:
    made = await graphs(store)
    a, b, c_id = made.chain
    async with client(create_app(store)) as c:
        middle = (await c.get(f"/job/{b}")).text
        first = (await c.get(f"/job/{a}")).text
    assert "<h1>Job" in middle and '<span class="state waiting">waiting</span>' in middle
    waits = middle.split('id="dependencies"', 1)[1].split("</ul>", 1)[0]
    waited = middle.split('id="dependents"', 1)[1].split("</ul>", 1)[0]
    assert rows(waits, "related") == [str(a)] and f'<a href="/job/{a}">{a}</a>' in waits
    assert 'class="state pending"' in waits
    assert rows(waited, "related") == [str(c_id)] and f'<a href="/job/{c_id}">' in waited
    assert 'class="state waiting"' in waited
    assert 'id="workflow-link"' not in middle and 'id="result"' not in middle
    assert 'id="dependencies"' not in first and f'<a href="/job/{b}">' in first


async def test_the_job_page_looks_up_the_first_50_dependencies(store: Store) -> None:
    q = store.queue("parts")
    parts = await q.enqueue_batch(list(range(52)))
    merge = await q.enqueue("merge", depends_on=parts)
    async with client(create_app(store)) as c:
        page = (await c.get(f"/job/{merge}")).text
    waits = page.split('id="dependencies"', 1)[1].split("</ul>", 1)[0]
    assert rows(waits, "related") == [str(i) for i in parts]
    items = re.findall(r"<li [^>]*>(.*?)</li>", waits)
    assert all('class="state pending"' in item for item in items[:50])
    assert all("state" not in item for item in items[50:]) and len(items) == 52


async def test_the_job_page_shows_its_result_and_workflow_step(store: Store) -> None:
    made = await graphs(store)
    ids = made.quote.job_ids
    async with client(create_app(store)) as c:
        tea = (await c.get(f"/job/{ids['tea']}")).text
        total = (await c.get(f"/job/{ids['total']}")).text
        mail = (await c.get(f"/job/{ids['mail']}")).text
    result = re.search(r'<pre class="json" id="result">(.*?)</pre>', tea, re.S)
    assert result is not None and "&lt;b&gt;bold" in result.group(1)
    assert '"price": 4' in html.unescape(result.group(1))
    assert f'id="workflow-link" href="/workflow/{made.quote.id}">' in tea
    assert "step <strong>tea</strong>" in tea
    waits = total.split('id="dependencies"', 1)[1].split("</ul>", 1)[0]
    assert rows(waits, "related") == [str(ids["tea"]), str(ids["cups"])]
    assert re.findall(r'class="state (\w+)"', waits) == ["acked", "pending"]
    other_queue = mail.split('id="dependencies"', 1)[1].split("</ul>", 1)[0]
    assert "in tasks" in other_queue  # a dependency in another queue says which


async def test_the_job_page_says_why_a_failed_dependency_cancelled_it(store: Store) -> None:
    made = await graphs(store)
    build, ship = made.deploy.job_ids["build"], made.deploy.job_ids["ship"]
    async with client(create_app(store)) as c:
        page = (await c.get(f"/job/{ship}")).text
    assert '<span class="state cancelled">cancelled</span>' in page
    assert f"dependency job {build} died (failed)" in page
    assert 'class="state dead"' in page.split('id="dependencies"', 1)[1].split("</ul>", 1)[0]


async def test_the_queue_pages_count_waiting_jobs(store: Store) -> None:
    made = await graphs(store)
    async with client(create_app(store)) as c:
        overview = (await c.get("/")).text
        queue = (await c.get("/queue", params={"name": "reports"})).text
        waiting = (await c.get("/queue", params={"name": "reports", "state": "waiting"})).text
    counts = dict(re.findall(r'data-count="(\w+)">(?:<a[^>]*>)?(\d+)', row(overview, "queue",
                                                                              "reports")))
    assert counts["waiting"] == "2" and counts["ready"] == "1"
    summary = queue.split('id="queue-summary"', 1)[1]
    assert re.search(r'data-count="waiting"><a href="/queue\?name=reports&amp;state=waiting">2<',
                     summary)  # fmt: skip
    assert rows(waiting, "job") == [str(i) for i in made.chain[1:]]


async def test_the_json_overview_counts_waiting_jobs_as_watch_json_does(store: Store) -> None:
    await graphs(store)
    async with client(create_app(store)) as c:
        doc = (await c.get("/api/overview")).json()
    queues = {q["name"]: q for q in doc["queues"]}
    assert {n: q["waiting"] for n, q in queues.items()} == {
        "deploys": 0, "mail": 1, "reports": 2, "tasks": 1,
    }  # fmt: skip
    assert list(queues["reports"])[3:6] == ["ready", "scheduled", "waiting"]


async def test_unknown_and_bad_workflow_ids(store: Store) -> None:
    await graphs(store)
    async with client(create_app(store)) as c:
        missing = await c.get("/workflow/424242")
        assert missing.status_code == 404 and "no workflow 424242" in missing.text
        assert (await c.get("/workflow/0")).status_code == 400
        assert (await c.get("/workflow/abc")).status_code == 404  # no such route
        assert (await c.get("/workflows?before=x")).status_code == 400
        assert (await c.get("/workflows?limit=7")).status_code == 400
        live = await c.get("/live", params={"view": "workflow", "id": "424242"})
        assert live.status_code == 404 and "no workflow" in live.json()["error"]


async def test_names_are_shown_escaped(store: Store) -> None:
    evil = '<img src=x onerror="alert(1)">'
    wf = store.workflow(evil)
    first = wf.step(evil, "q", {"x": evil})
    wf.step("then", "q", None, after=[first])
    run = await wf.enqueue()
    async with client(create_app(store)) as c:
        pages = [(await c.get(p)).text for p in ("/workflows", f"/workflow/{run.id}",
                                                  f"/job/{run.job_ids['then']}")]  # fmt: skip
    for page in pages:
        assert "<img src=x" not in page
    assert "&lt;img src=x" in pages[0] and "&lt;img src=x" in pages[1]


async def test_the_live_endpoint_renders_the_workflow_pages(store: Store) -> None:
    made = await graphs(store)
    async with client(create_app(store)) as c:
        first = (await c.get("/live", params={"view": "workflow", "id": made.quote.id})).json()
        job = await store.queue("tasks").claim_one("w")
        assert job is not None and await job.ack(result=12)
        second = (await c.get("/live", params={"view": "workflow", "id": made.quote.id})).json()
        listing = (await c.get("/live", params={"view": "workflows"})).json()
    assert sorted(first["fragments"]) == ["clock", "workflow"]
    assert 'class="state pending"' in row(first["fragments"]["workflow"], "step", "cups")
    assert 'class="state acked"' in row(second["fragments"]["workflow"], "step", "cups")
    assert 'class="state pending"' in row(second["fragments"]["workflow"], "step", "total")
    assert sorted(listing["fragments"]) == ["clock", "workflows"]
    assert rows(listing["fragments"]["workflows"], "workflow") == [
        str(made.deploy.id), str(made.quote.id),
    ]  # fmt: skip


async def test_a_waiting_workflow_page_answers_when_a_step_finishes(store: Store) -> None:
    """With a refresh interval of 60 s, only a wake can answer within the
    bound below: the ack of a step nothing waits for, which wakes no
    worker (it releases nothing), wakes the page."""
    made = await graphs(store)
    params = {"view": "workflow", "id": str(made.deploy.id)}
    answered: list[dict[str, Any]] = []
    async with client(create_app(store, refresh=60)) as c:
        await c.get("/live", params=params)  # learns the channels

        async def wait() -> None:
            answered.append((await c.get("/live", params={**params, "wait": "1"})).json())

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                await anyio.sleep(0.3)
                assert answered == []  # still waiting
                job = await store.queue("deploys").claim_one("w")
                assert job is not None and job.id == made.deploy.job_ids["cleanup"]
                await anyio.sleep(0.3)
                assert answered == []  # a claim wakes nobody
                assert await job.ack(result=12)
    fragment = answered[0]["fragments"]["workflow"]
    assert 'class="state acked"' in row(fragment, "step", "cleanup")


async def test_the_navigation_links_to_the_workflows(store: Store) -> None:
    made = await graphs(store)
    async with client(create_app(store)) as c:
        overview = (await c.get("/")).text
        listing = (await c.get("/workflows")).text
        one = (await c.get(f"/workflow/{made.quote.id}")).text
    assert '<a href="/workflows">Workflows</a>' in overview
    for page in (listing, one):
        assert '<a href="/workflows" class="current">Workflows</a>' in page


# -- the cancel action ---------------------------------------------------------------------


async def test_cancel_a_workflow(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    made = await graphs(store)
    caplog.set_level(logging.INFO, "alkstore.dashboard")
    page_path = f"/workflow/{made.quote.id}"
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c, page_path)
        unticked = await post(c, "/action/workflow/cancel", {"id": str(made.quote.id)}, csrf=csrf)
        assert unticked.status_code == 303
        assert "tick the confirmation box" in (await c.get(unticked.headers["location"])).text
        assert not (await made.quote.status()).finished
        response = await post(
            c, "/action/workflow/cancel", {"id": str(made.quote.id), "confirm": "yes"}, csrf=csrf
        )
        assert response.status_code == 303 and response.headers["location"] == page_path
        page = (await c.get(page_path)).text
        assert f"cancelled workflow {made.quote.id} (&#39;quote&#39;): 3 step(s)" in page
        assert "Cancel workflow" not in page  # finished: nothing left to cancel
        again = await post(
            c, "/action/workflow/cancel", {"id": str(made.quote.id), "confirm": "yes"}, csrf=csrf
        )
        assert "has finished: nothing to cancel" in (await c.get(again.headers["location"])).text
        gone = await post(c, "/action/workflow/cancel", {"id": "424242", "confirm": "yes"},
                          csrf=csrf)  # fmt: skip
        assert "no workflow 424242" in (await c.get(gone.headers["location"])).text
    status = await made.quote.status()
    assert status.by_state() == {"acked": ["tea"], "cancelled": ["cups", "total", "mail"]}
    logged = [r.getMessage() for r in caplog.records if r.name == "alkstore.dashboard"]
    assert any(m.startswith("workflow/cancel by anonymous: cancelled workflow") for m in logged)


async def test_the_cancel_buttons_show_only_with_actions(store: Store) -> None:
    made = await graphs(store)
    b = made.chain[1]
    async with client(create_app(store)) as c:
        assert "Cancel workflow" not in (await c.get(f"/workflow/{made.quote.id}")).text
        assert "Cancel job" not in (await c.get(f"/job/{b}")).text
    async with client(create_app(store, allow_actions=True)) as c:
        assert "Cancel workflow" in (await c.get(f"/workflow/{made.quote.id}")).text
        csrf = await token(c, f"/job/{b}")
        response = await post(c, "/action/job/cancel", {"id": str(b)}, csrf=csrf)
        assert "cancelled job" in (await c.get(response.headers["location"])).text
    states = [(await store.get_job(i)) for i in made.chain]
    assert [s.state if s else None for s in states] == ["pending", "cancelled", "cancelled"]
