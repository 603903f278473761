"""The safety rules, through the ASGI app on every backend: actions are
refused unless allowed, a POST needs a valid CSRF token and to come from
the dashboard's own pages, auth is asked of every request, and no input
reaches the database as anything but a name or a number."""

from __future__ import annotations

import base64
import logging

import httpx
import pytest

from alkstore import InvalidArgument, Store, UsageError
from alkstore.dashboard import create_app

from .support import BASE, client, fill, post, token

ACTIONS = [
    ("/action/queue/pause", {"name": "emails"}),
    ("/action/queue/resume", {"name": "reports"}),
    ("/action/dead/requeue", {"name": "emails", "which": "all"}),
    ("/action/dead/purge", {"name": "emails", "which": "all", "confirm": "yes"}),
    ("/action/job/cancel", {"id": "1"}),
    ("/action/job/requeue", {"id": "5"}),
    ("/action/job/purge", {"id": "5"}),
    ("/action/workflow/cancel", {"id": "1", "confirm": "yes"}),
    ("/action/schedule/pause", {"name": "cleanup"}),
    ("/action/schedule/resume", {"name": "cleanup"}),
]


async def snapshot(store: Store) -> tuple[object, ...]:
    """Everything an action could change."""
    return (
        await store.list_queues(),
        await store.queue("emails").list_jobs(limit=1000),
        await store.list_schedules(),
    )


@pytest.mark.parametrize(("path", "data"), ACTIONS, ids=[a[0] for a in ACTIONS])
async def test_every_action_is_refused_without_allow_actions(
    store: Store, path: str, data: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    await fill(store)
    before = await snapshot(store)
    caplog.set_level(logging.INFO, "alkstore.dashboard")
    async with client(create_app(store)) as c:
        page = (await c.get("/")).text
        assert "csrf_token" not in page  # a read-only dashboard shows no form at all
        response = await post(c, path, data, csrf="0" * 64)
    assert response.status_code == 403
    assert "read-only" in response.text
    assert await snapshot(store) == before
    assert any("refused" in r.getMessage() for r in caplog.records)


async def test_a_read_only_store_cannot_have_actions(backend: object, location: str) -> None:
    from tests.backends import Backend

    assert isinstance(backend, Backend)
    async with backend.open(location) as writer:
        await writer.queue("q").enqueue(1)
    async with backend.open(location, read_only=True) as store:
        with pytest.raises(UsageError):
            create_app(store, allow_actions=True)
        async with client(create_app(store)) as c:  # it can show what it holds
            assert (await c.get("/queue?name=q")).status_code == 200


@pytest.mark.parametrize(
    "csrf",
    [None, "", "0" * 64, "not-hex", "a" * 10_000],
    ids=["missing", "empty", "wrong", "garbage", "huge"],
)
async def test_a_post_without_a_valid_csrf_token_is_refused(store: Store, csrf: str | None) -> None:
    await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        await token(c)
        response = await post(c, "/action/queue/pause", {"name": "emails"}, csrf=csrf)
    assert response.status_code == 403 and "CSRF" in response.text
    assert not await store.queue("emails").is_paused()


async def test_a_token_only_works_with_the_cookie_it_was_made_for(store: Store) -> None:
    await fill(store)
    app = create_app(store, allow_actions=True)
    async with client(app) as mine, client(app) as theirs:
        stolen = await token(theirs)
        await token(mine)  # my own cookie
        assert stolen != await token(mine)
        response = await post(mine, "/action/queue/pause", {"name": "emails"}, csrf=stolen)
        assert response.status_code == 403
        fresh = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
        async with fresh:  # no cookie at all
            response = await post(fresh, "/action/queue/pause", {"name": "emails"}, csrf=stolen)
        assert response.status_code == 403
    # Another process (another secret) does not take this one's tokens either.
    async with client(app) as c:
        csrf = await token(c)
        other = create_app(store, allow_actions=True)
        c._transport = httpx.ASGITransport(app=other)
        response = await post(c, "/action/queue/pause", {"name": "emails"}, csrf=csrf)
        assert response.status_code == 403
    assert not await store.queue("emails").is_paused()


@pytest.mark.parametrize(
    "headers",
    [{}, {"origin": "http://evil.example"}, {"origin": "null"},
     {"referer": "http://evil.example/queue"}, {"origin": "http://localhost.evil.example"},
     {"origin": "https://localhost:8443"}],
    ids=["none", "foreign-origin", "null-origin", "foreign-referer", "lookalike", "other-port"],
)  # fmt: skip
async def test_a_post_from_another_origin_is_refused(
    store: Store, headers: dict[str, str]
) -> None:
    await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c)
        response = await c.post(
            "/action/queue/pause", data={"name": "emails", "csrf_token": csrf}, headers=headers
        )
    assert response.status_code == 403 and "cross-origin" in response.text
    assert not await store.queue("emails").is_paused()


async def test_a_same_origin_referer_and_trusted_origins_are_accepted(store: Store) -> None:
    await fill(store)
    app = create_app(store, allow_actions=True, trusted_origins=["https://admin.example"])
    async with client(app) as c:
        csrf = await token(c)
        by_referer = await c.post(
            "/action/queue/pause", data={"name": "emails", "csrf_token": csrf},
            headers={"referer": f"{BASE}/queue?name=emails"},
        )  # fmt: skip
        assert by_referer.status_code == 303
        trusted = await post(c, "/action/queue/resume", {"name": "emails"}, csrf=csrf,
                             origin="https://admin.example")  # fmt: skip
        assert trusted.status_code == 303
    assert not await store.queue("emails").is_paused()


def basic(user: str, password: str) -> dict[str, str]:
    raw = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {raw}"}


WRONG = [
    basic("ops", "wrong"), basic("other", "s3cret:with-colon"),
    {"authorization": "Bearer s3cret:with-colon"}, {"authorization": "Basic !!!"},
    {"authorization": "Basic"},
]  # fmt: skip
PATHS = ["/", "/queue?name=emails", "/static/dashboard.css", "/live?view=overview",
         "/api/overview", "/nope"]  # fmt: skip


async def test_basic_auth_is_asked_of_every_request(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    await fill(store)
    app = create_app(store, allow_actions=True, auth="ops:s3cret:with-colon")
    async with client(app) as c:
        for path in PATHS:
            response = await c.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == 'Basic realm="alkstore"'
            for headers in WRONG:
                assert (await c.get(path, headers=headers)).status_code == 401, (path, headers)
        response = await post(c, "/action/queue/pause", {"name": "emails"}, csrf=None)
        assert response.status_code == 401  # before anything else
    caplog.set_level(logging.INFO, "alkstore.dashboard")
    async with client(app, headers=basic("ops", "s3cret:with-colon")) as c:
        for path in PATHS[:-1]:
            assert (await c.get(path)).status_code == 200, path
        page = (await c.get("/")).text
        assert "signed in as ops" in page
        csrf = await token(c)
        response = await post(c, "/action/queue/pause", {"name": "emails"}, csrf=csrf)
        assert response.status_code == 303
    assert "queue/pause by ops: paused queue 'emails'" in [r.getMessage() for r in caplog.records]


async def test_a_bearer_token_is_asked_of_every_request(store: Store) -> None:
    await store.queue("emails").enqueue(1)  # so that its pages exist
    app = create_app(store, auth="bearer:tok-123")
    async with client(app) as c:
        for path in PATHS:
            response = await c.get(path)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == 'Bearer realm="alkstore"'
            for value in ("Bearer tok-12", "Bearer tok-1234", "bearer", "Basic dG9rLTEyMw=="):
                assert (await c.get(path, headers={"authorization": value})).status_code == 401
    async with client(app, headers={"authorization": "Bearer tok-123"}) as c:
        for path in PATHS[:-1]:
            assert (await c.get(path)).status_code == 200, path


@pytest.mark.parametrize("auth", ["nocolon", ":pw", "user:", "bearer:", ""])
async def test_a_malformed_auth_setting_is_refused(store: Store, auth: str) -> None:
    with pytest.raises(InvalidArgument):
        create_app(store, auth=auth)


SQL = "emails'; DROP TABLE __alkstore_jobs; --"
XSS = '<script>alert("x")</script>'


async def test_names_and_parameters_are_data_never_sql_or_markup(store: Store) -> None:
    """A queue named like SQL is a queue with that name; a name or payload
    like markup is shown escaped; nothing a page takes is SQL."""
    made = await fill(store)
    await store.queue(SQL).enqueue({"note": XSS})
    await store.queue(XSS).enqueue({"img": '<img src=x onerror="alert(1)">'})
    await store.stream(XSS).publish({"x": XSS})
    async with client(create_app(store)) as c:
        overview = (await c.get("/")).text
        sql_page = await c.get("/queue", params={"name": SQL})
        xss_page = await c.get("/queue", params={"name": XSS})
        stream = await c.get("/stream", params={"name": XSS})
        union = await c.get("/queue", params={"name": "x' UNION SELECT * FROM __alkstore_meta --"})
        where = await c.get("/queue", params={"name": "emails", "state": "dead OR 1=1"})
        job = await c.get("/job/1 OR 1=1")
    for text in (overview, sql_page.text, xss_page.text, stream.text):
        assert "<script>alert" not in text and "<img src=x" not in text
    assert sql_page.status_code == 200 and 'data-count="ready">1<' in sql_page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in xss_page.text
    assert union.status_code == 404 and "no queue named" in union.text  # no such queue
    assert where.status_code == 400 and job.status_code == 404
    # The tables are all there, and hold what they held.
    assert [j.id for j in await store.queue("emails").list_jobs(state="dead")] == made.dead
    assert {q.name for q in await store.list_queues()} >= {"emails", SQL, XSS}


# -- Host names: a DNS-rebinding page never gets a page or a token ----------------------

REBIND = "rebind.evil.example:8765"


async def test_the_rebinding_sequence_is_refused_at_the_first_get(store: Store) -> None:
    """A page on a domain that resolves to 127.0.0.1 sends its own name as
    ``Host``: its first GET is refused before a page, a cookie or a token is
    made, and its POST (with its own Origin, same-origin to the browser)
    changes nothing."""
    made = await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        page = await c.get(f"/job/{made.dead[0]}", headers={"host": REBIND})
        assert page.status_code == 400
        assert "set-cookie" not in page.headers and "csrf" not in page.text
        assert "rebind" not in page.text  # the name is not echoed back
        csrf = await token(c)  # even with a token taken from a real page
        pause = await c.post(
            "/action/queue/pause", data={"name": "emails", "csrf_token": csrf},
            headers={"host": REBIND, "origin": f"http://{REBIND}"},
        )  # fmt: skip
        assert pause.status_code == 400
        for path in ("/", "/live?view=overview", "/api/overview", "/static/live.js"):
            assert (await c.get(path, headers={"host": REBIND})).status_code == 400, path
    assert not await store.queue("emails").is_paused()


@pytest.mark.parametrize(
    ("host", "status"),
    [("localhost", 200), ("localhost:8765", 200), ("127.0.0.1:8765", 200), ("[::1]:8765", 200),
     ("LOCALHOST.", 200), ("rebind.evil.example", 400), ("localhost.evil.example", 400),
     ("127.0.0.1.nip.io", 400), ("evil.example:80@localhost", 400), ("", 400)],
)  # fmt: skip
async def test_by_default_only_the_loopback_names_are_served(
    store: Store, host: str, status: int
) -> None:
    async with client(create_app(store)) as c:
        assert (await c.get("/", headers={"host": host})).status_code == status


async def test_trusted_hosts_name_what_is_served(store: Store) -> None:
    app = create_app(store, trusted_hosts=["admin.example.com", "*.corp.example"])
    async with client(app) as c:
        for host, status in [("admin.example.com", 200), ("ops.corp.example:443", 200),
                             ("corp.example", 400), ("localhost", 400),
                             ("admin.example.com.evil.example", 400)]:  # fmt: skip
            assert (await c.get("/", headers={"host": host})).status_code == status, host
    async with client(create_app(store, trusted_hosts=["*"])) as c:
        assert (await c.get("/", headers={"host": REBIND})).status_code == 200


@pytest.mark.parametrize("bad", [["a/b"], ["ex*ample.com"], [""], "localhost", [7]])
async def test_bad_trusted_hosts_are_refused(store: Store, bad: object) -> None:
    with pytest.raises(InvalidArgument, match="trusted"):
        create_app(store, trusted_hosts=bad)  # type: ignore[arg-type]


async def test_a_post_must_come_from_an_allowed_host_s_page(store: Store) -> None:
    """Origin is checked against the allowed hosts, not the request's Host
    alone: with every Host answered (``*``), a POST still needs an Origin
    that is its own Host; by default one from another served name is refused."""
    await fill(store)
    async with client(create_app(store, allow_actions=True)) as c:
        csrf = await token(c)
        other_name = await post(c, "/action/queue/pause", {"name": "emails"}, csrf=csrf,
                                origin="http://127.0.0.1")  # fmt: skip
        assert other_name.status_code == 403  # Host is localhost: another origin
    assert not await store.queue("emails").is_paused()
    async with client(create_app(store, allow_actions=True, trusted_hosts=["*"])) as c:
        csrf = await token(c)
        host = {"host": "dash.example"}
        foreign = await c.post("/action/queue/pause", data={"name": "emails", "csrf_token": csrf},
                               headers={**host, "origin": "http://evil.example"})  # fmt: skip
        assert foreign.status_code == 403
        own = await c.post("/action/queue/pause", data={"name": "emails", "csrf_token": csrf},
                           headers={**host, "origin": "http://dash.example"})  # fmt: skip
        assert own.status_code == 303
    assert await store.queue("emails").is_paused()


async def test_mounted_in_another_app_it_refuses_foreign_hosts_on_its_own_paths(
    store: Store,
) -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    async def hello(request: object) -> PlainTextResponse:
        return PlainTextResponse("hello")

    made = await fill(store)
    app = Starlette(routes=[
        Route("/hello", hello),
        Mount("/admin/alkstore", create_app(store, allow_actions=True)),
    ])  # fmt: skip
    async with client(app) as c:
        assert (await c.get("/hello", headers={"host": REBIND})).text == "hello"  # not ours
        refused = await c.get(f"/admin/alkstore/job/{made.dead[0]}", headers={"host": REBIND})
        assert refused.status_code == 400 and "set-cookie" not in refused.headers
        assert (await c.get("/admin/alkstore/", headers={"host": "localhost"})).status_code == 200
