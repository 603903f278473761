"""The dashboard in a real browser: Chromium driven by Playwright, against
the real ``alkstore dashboard`` command on each engine. Every page loads
without a script error and goes live; a dead letter requeued moves; a
queue paused shows paused; numbers change without a reload when the store
changes. ``test_screenshots`` writes docs/img/dashboard-*.png, which
docs/dashboard.md shows.

Chromium comes from Debian (``python -m tests``, the README's test command,
installs it; Playwright's own browser download is not reachable here);
these tests run in the normal run. Where no Chromium can be had they skip
with one line saying how to get one, and under ``CI=true`` they fail
instead (``tests/machine.py``).

The browser is this module's own fixture, not pytest-playwright's: its
session-scoped ``playwright`` fixture keeps Playwright's asyncio loop marked
running in the worker's thread until the session ends, and every asyncio
test that runs after it on the same worker then fails ("Runner.run()
cannot be called from a running event loop"). Scoped to this module,
Playwright stops as soon as the worker moves on to another module's tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from alkstore import ManualClock, Store, SystemClock
from tests import machine
from tests.backends import BACKENDS, PG_DSN, selected_backends

from .support import ROOT, Filled, Server, dashboard, fill, showcase

pytestmark = pytest.mark.slow

ENGINES = sorted({BACKENDS[n].engine for n in selected_backends(driver="trio")})
SOON = 15_000  # ms: how long an expectation may take to come true
PAGES = {
    "overview": "/",
    "queue": "/queue?name=emails",
    "dead": "/queue/dead?name=emails",
    "job": None,  # a dead letter's page, its id known once the data is made
    "streams": "/streams",
    "stream": "/stream?name=orders",
    "schedules": "/schedules",
    "locks": "/locks",
    "workflows": "/workflows",
}


class Served:
    def __init__(self, server: Server, engine: str, location: str, filled: Filled) -> None:
        self.server = server
        self.engine = engine
        self.location = location
        self.filled = filled

    def url(self, path: str) -> str:
        return self.server.url + path

    def run(self, work: object) -> None:
        """``work(store)`` on a store of the test's own on the same database."""
        backend = BACKENDS[f"{self.engine}-trio"]

        async def main() -> None:
            async with backend.open(self.location) as store:
                await work(store)  # type: ignore[operator]

        trio.run(main)


def serve(engine: str, tmp_path: Path, *, lived_in: bool = False) -> Iterator[Served]:
    backend = BACKENDS[f"{engine}-trio"]
    location = backend.new_location(tmp_path)
    if lived_in and engine == "sqlite":
        location = str(tmp_path / "app.db")  # the header shows it: `--db app.db`
    made: list[Filled] = []

    async def filled() -> None:
        if lived_in:
            clock = ManualClock(SystemClock().now_us() - 30 * 60 * 1_000_000)
            async with backend.open(location, clock=clock) as store:
                await showcase(store, clock)
        async with backend.open(location) as store:
            made.append(await fill(store) if not lived_in else Filled([], [], [], []))

    trio.run(filled)
    db = Path(location).name if lived_in else location  # the server runs in tmp_path
    args = ["--db", db] if engine == "sqlite" else ["--dsn", PG_DSN, "--schema", location]
    with dashboard([*args, "--allow-actions", "--refresh", "1"], tmp_path / "log") as server:
        yield Served(server, engine, location, made[0])


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    missing = machine.chromium_missing()
    if missing is not None:
        if machine.ci():
            pytest.fail(f"CI=true: {missing}", pytrace=False)
        pytest.skip(missing)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=machine.chromium_path())
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(params=ENGINES)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    yield from serve(request.param, tmp_path)


@pytest.fixture
def errors(page: Page) -> list[str]:
    """Script errors and failed requests the page reports."""
    found: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            found.append(message.text)

    page.on("console", console)
    page.on("pageerror", lambda exc: found.append(str(exc)))
    return found


def test_every_page_loads_and_goes_live(served: Served, page: Page, errors: list[str]) -> None:
    for name, path in PAGES.items():
        path = path or f"/job/{served.filled.dead[0]}"
        response = page.goto(served.url(path))
        assert response is not None and response.status == 200, name
        expect(page.locator("h1").first).to_be_visible()
        # The live script ran and its first answer came back.
        expect(page.locator("#live-state")).to_have_attribute("data-state", "ok", timeout=SOON)
    assert errors == []


# What reaches past 800 px, for the message of a page that does.
WIDEST = """[...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > 801).slice(0, 8)
  .map(e => `${e.tagName}.${e.className}#${e.id} ${Math.round(e.getBoundingClientRect().right)}`)"""


def test_every_page_holds_at_800_px(served: Served, page: Page, errors: list[str]) -> None:
    """At 800 px wide, no page scrolls sideways (a wide table scrolls in its
    own box) and the state tabs stay one row."""
    page.set_viewport_size({"width": 800, "height": 700})
    for name, path in PAGES.items():
        path = path or f"/job/{served.filled.dead[0]}"
        page.goto(served.url(path))
        expect(page.locator("h1").first).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 800, f"{name}: the page is {width} px wide: {page.evaluate(WIDEST)}"
        tabs = page.locator("nav.tabs")
        if tabs.count():
            rows = page.evaluate(
                "new Set([...document.querySelectorAll('nav.tabs a')].map(a => a.offsetTop)).size"
            )
            assert rows == 1, f"{name}: the tabs wrap onto {rows} rows"
    assert errors == []


def test_requeue_a_dead_letter_and_see_it_move(
    served: Served, page: Page, errors: list[str]
) -> None:
    job_id = served.filled.dead[0]
    page.goto(served.url("/queue/dead?name=emails"))
    rows = page.locator("table#dead tbody tr")
    expect(rows).to_have_count(3)
    page.locator(f'input[name="id"][value="{job_id}"]').check()
    page.locator("#requeue-selected").click()
    expect(page.locator(".notice")).to_contain_text("requeued 1 dead letter(s) of 'emails'")
    expect(rows).to_have_count(2)
    expect(page.locator(f'tr[data-job="{job_id}"]')).to_have_count(0)
    expect(page.locator('#queue-summary [data-count="dead"]')).to_have_text("2")
    page.goto(served.url(f"/job/{job_id}"))
    expect(page.locator("h1")).to_contain_text("pending")
    # Its death stays on its page: the attempt, its trace (open, the newest)
    # and the timeline's line.
    death = page.locator("table#attempts tr.attempt")
    expect(death).to_have_count(1)
    expect(death.locator("td").nth(1)).to_have_text("failed")
    trace = page.locator("table#attempts details pre.trace")
    expect(trace).to_be_visible()
    expect(trace).to_contain_text("in _send_email")
    page.locator("table#attempts details summary").click()
    expect(trace).to_be_hidden()
    expect(page.locator("ol.timeline")).to_contain_text("dead (failed), requeued later")
    # A live refresh (another job enqueued wakes the page) keeps it closed.
    page.evaluate("document.querySelector('[data-live=job] h1').setAttribute('data-old', '')")

    async def enqueue(store: object) -> None:
        await store.queue("emails").enqueue({"to": "late@example.com"})  # type: ignore[attr-defined]

    served.run(enqueue)
    expect(page.locator("[data-live=job] h1[data-old]")).to_have_count(0, timeout=SOON)
    expect(trace).to_be_hidden()
    page.goto(served.url("/queue?name=emails&state=pending"))
    expect(page.locator(f'tr[data-job="{job_id}"]')).to_have_count(1)
    assert errors == []


def test_pause_a_queue(served: Served, page: Page, errors: list[str]) -> None:
    page.goto(served.url("/"))
    row = page.locator('tr[data-queue="emails"]')
    expect(row.locator(".badge")).to_have_count(0)
    row.get_by_role("button", name="Pause").click()
    expect(page.locator(".notice")).to_contain_text("paused queue 'emails'")
    expect(page.locator('#queue-summary')).to_have_attribute("data-paused", "yes")
    page.goto(served.url("/"))
    expect(page.locator('tr[data-queue="emails"] .badge')).to_have_text("paused")
    paused: list[bool] = []

    async def check(store: object) -> None:
        paused.append(await store.queue("emails").is_paused())  # type: ignore[attr-defined]

    served.run(check)
    assert paused == [True] and errors == []


def test_cancel_selected_jobs_with_the_selection_kept_across_a_refresh(
    served: Served, page: Page, errors: list[str]
) -> None:
    pending = served.filled.pending
    page.goto(served.url("/queue?name=emails&state=pending"))
    expect(page.locator("#live-state")).to_have_attribute("data-state", "ok", timeout=SOON)
    page.locator(f'tr[data-job="{pending[0]}"] input[name="id"]').check()
    ready = page.locator('#queue-summary [data-count="ready"]')
    before = int(ready.inner_text())

    async def enqueue(store: object) -> None:
        await store.queue("emails").enqueue("one more")  # type: ignore[attr-defined]

    served.run(enqueue)  # the job list refreshes live...
    expect(ready).to_have_text(str(before + 1), timeout=SOON)
    expect(page.locator('tr[data-job] input[name="id"]')).to_have_count(len(pending) + 1)
    # ...and the box ticked before it is still ticked.
    expect(page.locator(f'tr[data-job="{pending[0]}"] input[name="id"]')).to_be_checked()
    page.locator("#cancel-selected").click()
    expect(page.locator(".notice")).to_contain_text("cancelled 1 of 1 selected job(s) of 'emails'")
    expect(page.locator(f'tr[data-job="{pending[0]}"]')).to_have_count(0)
    assert errors == []


def test_numbers_change_without_a_reload(served: Served, page: Page, errors: list[str]) -> None:
    page.goto(served.url("/queue?name=emails"))
    ready = page.locator('#queue-summary [data-count="ready"]')
    expect(ready).to_have_text("3")
    expect(page.locator("#live-state")).to_have_attribute("data-state", "ok", timeout=SOON)
    page.evaluate("window.notReloaded = true")

    async def enqueue(store: object) -> None:
        await store.queue("emails").enqueue_batch([1, 2, 3, 4])  # type: ignore[attr-defined]

    served.run(enqueue)
    expect(ready).to_have_text("7", timeout=SOON)
    assert page.evaluate("window.notReloaded") is True
    assert errors == []


def enqueue_quote(served: Served) -> tuple[int, dict[str, int]]:
    """A workflow run in the served database: tea and cups, then total
    after both; tea acked. Its id and its steps' job ids."""
    made: list[tuple[int, dict[str, int]]] = []

    async def work(store: Store) -> None:
        wf = store.workflow("quote")
        tea = wf.step("tea", "tasks", {"item": "tea"})
        cups = wf.step("cups", "tasks", {"item": "cups"})
        wf.step("total", "tasks", {"do": "total"}, after=[tea, cups])
        run = await wf.enqueue()
        job = await store.queue("tasks").claim_one("w")
        assert job is not None and job.id == run.job_ids["tea"]
        assert await job.ack(result={"price": 4})
        made.append((run.id, run.job_ids))

    served.run(work)
    return made[0]


def test_navigate_to_a_workflow_and_watch_its_steps_move(
    served: Served, page: Page, errors: list[str]
) -> None:
    workflow_id, ids = enqueue_quote(served)
    page.goto(served.url("/"))
    page.locator("header.top nav").get_by_role("link", name="Workflows").click()
    expect(page).to_have_url(served.url("/workflows"))
    expect(page.locator("header.top nav a.current")).to_have_text("Workflows")
    listed = page.locator(f'tr[data-workflow="{workflow_id}"]')
    expect(listed.locator(".state")).to_have_text("running")
    listed.get_by_role("link", name="quote").click()
    expect(page).to_have_url(served.url(f"/workflow/{workflow_id}"))
    steps = page.locator("table#steps tbody tr")
    expect(steps).to_have_count(3)
    expect(page.locator('tr[data-step="tea"] .state')).to_have_text("acked")
    expect(page.locator('tr[data-step="cups"] .state')).to_have_text("pending")
    expect(page.locator('tr[data-step="total"] .state')).to_have_text("waiting")
    expect(page.locator('tr[data-step="tea"]')).to_contain_text('{"price":4}')
    graph = page.locator("svg#workflow-graph")
    expect(graph).to_be_visible()
    expect(graph.locator("[data-node]")).to_have_count(3)
    expect(graph.locator("path.edge")).to_have_count(2)
    expect(page.locator("#live-state")).to_have_attribute("data-state", "ok", timeout=SOON)
    page.evaluate("window.notReloaded = true")

    async def ack_cups(store: Store) -> None:
        job = await store.queue("tasks").claim_one("w")
        assert job is not None and job.id == ids["cups"]
        assert await job.ack(result={"price": 12})

    served.run(ack_cups)  # total is released: its page moves without a reload
    expect(page.locator('tr[data-step="cups"] .state')).to_have_text("acked", timeout=SOON)
    expect(page.locator('tr[data-step="total"] .state')).to_have_text("pending", timeout=SOON)
    assert page.evaluate("window.notReloaded") is True
    graph.locator('[data-node="total"]').click()  # a step's box is a link to its job
    expect(page).to_have_url(served.url(f"/job/{ids['total']}"))
    expect(page.locator("h1")).to_contain_text("pending")
    assert errors == []


def test_a_job_page_links_its_dependencies_and_dependents(
    served: Served, page: Page, errors: list[str]
) -> None:
    workflow_id, ids = enqueue_quote(served)
    page.goto(served.url(f"/job/{ids['total']}"))
    expect(page.locator("h1")).to_contain_text("waiting")
    waits = page.locator("ul#dependencies li")
    expect(waits).to_have_count(2)
    expect(page.locator(f'#dependencies li[data-related="{ids["tea"]}"] .state')).to_have_text(
        "acked"
    )
    expect(page.locator(f'#dependencies li[data-related="{ids["cups"]}"] .state')).to_have_text(
        "pending"
    )
    page.locator("#dependencies").get_by_role("link", name=str(ids["tea"]), exact=True).click()
    expect(page).to_have_url(served.url(f"/job/{ids['tea']}"))
    expect(page.locator("pre#result")).to_contain_text('"price": 4')
    dependent = page.locator("#dependents").get_by_role("link", name=str(ids["total"]), exact=True)
    expect(dependent).to_be_visible()
    page.locator("#workflow-link").click()
    expect(page).to_have_url(served.url(f"/workflow/{workflow_id}"))
    page.go_back()
    page.locator("#dependents").get_by_role("link", name=str(ids["total"]), exact=True).click()
    expect(page).to_have_url(served.url(f"/job/{ids['total']}"))
    assert errors == []


def test_cancel_a_workflow_from_its_page(served: Served, page: Page, errors: list[str]) -> None:
    workflow_id, _ = enqueue_quote(served)
    page.goto(served.url(f"/workflow/{workflow_id}"))
    page.locator("#cancel-workflow").click()  # the confirmation box is required first
    expect(page).to_have_url(served.url(f"/workflow/{workflow_id}"))
    expect(page.locator('tr[data-step="cups"] .state')).to_have_text("pending")
    page.get_by_label("every unfinished step").check()
    page.locator("#cancel-workflow").click()
    expect(page.locator(".notice")).to_contain_text(f"cancelled workflow {workflow_id}")
    expect(page.locator('tr[data-step="cups"] .state')).to_have_text("cancelled")
    expect(page.locator('tr[data-step="total"] .state')).to_have_text("cancelled")
    expect(page.locator("h1 .state")).to_have_text("failed")
    expect(page.locator("#cancel-workflow")).to_have_count(0)
    assert errors == []


SHOTS = ROOT / "docs" / "img"


@pytest.mark.parametrize("engine", ["sqlite"])
def test_screenshots(engine: str, tmp_path: Path, page: Page, errors: list[str]) -> None:
    """Regenerates docs/img/dashboard-*.png from a store with half an hour
    of work in it."""
    for served in serve(engine, tmp_path, lived_in=True):
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(served.url("/queue/dead?name=emails"))
        # The letter that died on its second attempt: its page shows both.
        twice = page.locator("table#dead tbody tr", has_text="2/2")
        dead = twice.first.get_attribute("data-job")
        assert dead is not None and re.fullmatch(r"\d+", dead)
        SHOTS.mkdir(parents=True, exist_ok=True)
        for name, path in PAGES.items():
            if name == "streams":
                continue  # the stream page shows it all
            page.goto(served.url(path or f"/job/{dead}"))
            expect(page.locator("#live-state")).to_have_attribute("data-state", "ok",
                                                                  timeout=SOON)  # fmt: skip
            target = SHOTS / f"dashboard-{name}.png"
            page.screenshot(path=str(target), full_page=name != "queue")
            assert target.stat().st_size > 10_000
        page.goto(served.url("/workflows"))
        newest = page.locator("table#workflows tbody tr").first.get_attribute("data-workflow")
        assert newest is not None and re.fullmatch(r"\d+", newest)
        page.goto(served.url(f"/workflow/{newest}"))
        expect(page.locator("#live-state")).to_have_attribute("data-state", "ok", timeout=SOON)
        target = SHOTS / "dashboard-workflow.png"
        page.screenshot(path=str(target), full_page=True)
        assert target.stat().st_size > 10_000
    assert errors == []
