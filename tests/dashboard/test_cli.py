"""``alkstore dashboard``: the real command, as a subprocess, on a real
SQLite file and on the real Postgres server. It serves, answers pages,
keeps to its safety settings, and stops cleanly (exit 0) on SIGTERM."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import trio

from tests.backends import BACKENDS, PG_DSN, selected_backends

from .support import Server, child_env, dashboard, fill

pytestmark = pytest.mark.slow

ENGINES = sorted({BACKENDS[n].engine for n in selected_backends(driver="trio")})


def database(engine: str, tmp_path: Path) -> tuple[str, list[str]]:
    """A filled database of ``engine`` and the command's options naming it."""
    backend = BACKENDS[f"{engine}-trio"]
    location = backend.new_location(tmp_path)

    async def filled() -> None:
        async with backend.open(location) as store:
            await fill(store)

    trio.run(filled)
    if engine == "sqlite":
        return location, ["--db", location]
    return location, ["--dsn", PG_DSN, "--schema", location]


@pytest.mark.parametrize("engine", ENGINES)
def test_serves_read_only_and_stops_on_sigterm(engine: str, tmp_path: Path) -> None:
    _, args = database(engine, tmp_path)
    with dashboard([*args, "--refresh", "1"], tmp_path / "dashboard.log") as server:
        with httpx.Client(base_url=server.url, timeout=10) as c:
            page = c.get("/queue", params={"name": "emails"})
            assert page.status_code == 200 and 'data-count="dead"' in page.text
            assert "read-only" in page.text
            # A read-only store listens for wakes as any store does.
            live = c.get("/live", params={"view": "queue", "name": "emails", "wait": "1"})
            assert live.status_code == 200 and "queue_summary" in live.json()["fragments"]
            assert c.get("/static/live.js").status_code == 200
            refused = c.post("/action/queue/pause", data={"name": "emails"},
                             headers={"origin": server.url})  # fmt: skip
            assert refused.status_code == 403
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0, server.text()
    text = server.text()
    assert "alkstore dashboard on http://127.0.0.1:" in text and "read-only" in text
    assert "received SIGTERM: stopping" in text


@pytest.mark.parametrize("engine", ENGINES)
def test_actions_with_auth_from_the_environment(engine: str, tmp_path: Path) -> None:
    _, args = database(engine, tmp_path)
    auth = {"ALKSTORE_DASHBOARD_AUTH": "ops:pa55"}
    with dashboard([*args, "--allow-actions"], tmp_path / "log", wait=False, env=auth) as server:
        with httpx.Client(base_url=server.url, timeout=10) as anonymous:
            _wait_for_401(anonymous, server)
        with httpx.Client(base_url=server.url, timeout=10, auth=("ops", "pa55")) as c:
            page = c.get("/queue", params={"name": "emails"}).text
            token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
            assert token is not None
            done = c.post(
                "/action/queue/pause",
                data={"name": "emails", "csrf_token": token.group(1)},
                headers={"origin": server.url},
            )  # fmt: skip
            assert done.status_code == 303
            assert 'data-paused="yes"' in c.get(done.headers["location"]).text
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=30) == 0, server.text()
    assert "queue/pause by ops: paused queue 'emails'" in server.text()


def _wait_for_401(c: httpx.Client, server: Server) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert server.process.poll() is None, server.text()
        try:
            response = c.get("/")
        except httpx.TransportError:
            time.sleep(0.1)
            continue
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == 'Basic realm="alkstore"'
        return
    raise AssertionError(f"the dashboard did not answer:\n{server.text()}")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alkstore", "dashboard", *args],
        capture_output=True, text=True, env=child_env(), timeout=60,
    )  # fmt: skip


def test_refuses_an_open_host_without_auth_and_other_bad_settings(tmp_path: Path) -> None:
    db = str(tmp_path / "app.db")
    open_host = run("--db", db, "--host", "0.0.0.0")
    assert open_host.returncode == 2 and "--allow-unauthenticated" in open_host.stderr
    bad_auth = run("--db", db, "--auth", "nocolon")
    assert bad_auth.returncode == 2 and "user:password" in bad_auth.stderr
    missing = run("--db", db)
    assert missing.returncode == 2 and "no such database file" in missing.stderr
    assert not Path(db).exists()  # read-only: never created
    missing_rw = run("--db", db, "--allow-actions")
    assert missing_rw.returncode == 2 and "no such database file" in missing_rw.stderr
    assert not Path(db).exists()  # nor with actions allowed: a typo is not a database
    wildcard = run("--db", db, "--host", "0.0.0.0", "--auth", "ops:pw")
    assert wildcard.returncode == 2 and "--trusted-host" in wildcard.stderr
    bad_host = run("--db", db, "--trusted-host", "a/b")
    assert bad_host.returncode == 2 and "--trusted-host" in bad_host.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Not the server's traceback, nor the "on http://..." line of a
    dashboard that never listened."""
    import socket

    db = str(tmp_path / "app.db")
    assert subprocess.run([sys.executable, "-m", "alkstore", "migrate", "--db", db],
                          env=child_env(), capture_output=True).returncode == 0  # fmt: skip
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("--db", db, "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"alkstore: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_foreign_host_header_is_refused_before_any_page(engine: str, tmp_path: Path) -> None:
    """The DNS-rebinding sequence against the real command on loopback with
    actions and no auth: the first GET under the rebinding name is a 400
    without a cookie, its POST a 400, and the queue stays running; the names
    it serves (127.0.0.1, localhost, a --trusted-host) answer."""
    location, args = database(engine, tmp_path)
    served = [*args, "--allow-actions", "--trusted-host", "dash.internal"]
    with dashboard(served, tmp_path / "log") as server:
        port = server.url.rsplit(":", 1)[1]
        rebind = {"host": f"rebind.evil.example:{port}"}
        with httpx.Client(base_url=server.url, timeout=10) as c:
            page = c.get("/job/1", headers=rebind)
            assert page.status_code == 400 and "set-cookie" not in page.headers
            pause = c.post("/action/queue/pause", data={"name": "emails"},
                           headers={**rebind, "origin": f"http://{rebind['host']}"})  # fmt: skip
            assert pause.status_code == 400
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"dash.internal:{port}"):
                assert c.get("/", headers={"host": host}).status_code == 200, host
    paused: list[bool] = []

    async def check() -> None:
        async with BACKENDS[f"{engine}-trio"].open(location) as store:
            paused.append(await store.queue("emails").is_paused())

    trio.run(check)
    assert paused == [False]
