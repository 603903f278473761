"""What the dashboard's tests share: a store filled with something of every
kind, an httpx client on the ASGI app, the CSRF dance a browser does, and
the real ``alkstore dashboard`` command as a child process."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from alkstore import Queue, Store

ROOT = Path(__file__).resolve().parents[2]
BASE = "http://localhost"
# Starting a Python process that imports alkstore can take seconds on a
# loaded machine.
STARTUP = 30.0


@dataclass
class Filled:
    """The ids and names ``fill`` made."""

    dead: list[int]
    pending: list[int]
    processing: list[int]
    acked: list[int]


def smtp_error() -> ValueError:
    """A mail handler's error as a worker reports it: raised, so it carries
    its stack trace (the job page shows it)."""
    try:
        _send_email()
    except ValueError as exc:
        return exc
    raise AssertionError("unreachable")


def _send_email() -> None:
    raise ValueError("SMTP 550: mailbox unavailable")


async def fill(store: Store) -> Filled:
    """A bit of everything: a queue with every state (and history), a
    paused queue, an outbox, a stream with consumers, schedules, a lock."""
    q = store.queue("emails", max_attempts=1)
    await q.set_retention(history=3600, dead=None)
    ids = await q.enqueue_batch([{"to": f"user{i}@example.com"} for i in range(12)])
    acked = []
    for job in await q.claim_batch("web-1", 4):
        assert await job.ack()
        acked.append(job.id)
    dead = []
    for job in await q.claim_batch("web-1", 3):
        assert await job.fail(smtp_error())
        dead.append(job.id)
    processing = [job.id for job in await q.claim_batch("web-2", 2)]
    pending = [i for i in ids if i not in acked + dead + processing]
    reports = store.queue("reports")
    await reports.enqueue({"report": "weekly"})
    await reports.pause()
    await store.outbox("webhooks").enqueue({"order": 7})
    orders = store.stream("orders")
    for i in range(1, 8):
        await orders.publish({"order": i, "event": "created"})
    await orders.save_offset("billing", 7)
    await orders.save_offset("shipping", 3)
    await store.schedule("cleanup", "reports", "@every 10m", {"task": "cleanup"})
    await store.schedule("digest", "emails", "0 7 * * *", {"kind": "digest"})
    assert await store.try_lock("nightly-report", "host-1", 600) is not None
    return Filled(dead, pending, processing, acked)


@asynccontextmanager
async def client(app: Any, **kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE, **kwargs) as c:
        yield c


TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]+)"')


async def token(c: httpx.AsyncClient, page: str = "/") -> str:
    """Load ``page`` (which sets the CSRF cookie) and read its forms' token."""
    response = await c.get(page)
    assert response.status_code == 200, response.text
    found = TOKEN.search(response.text)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


async def post(
    c: httpx.AsyncClient,
    path: str,
    data: dict[str, Any],
    *,
    csrf: str | None,
    origin: str | None = BASE,
) -> httpx.Response:
    """A POST as a page of the dashboard sends it."""
    headers = {} if origin is None else {"origin": origin}
    body = dict(data)
    if csrf is not None:
        body["csrf_token"] = csrf
    return await c.post(path, data=body, headers=headers)


# -- the real command ------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)  # the tree under test, not whichever copy is installed
    env.pop("ALKSTORE_DASHBOARD_AUTH", None)
    return env


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def wait_until_serving(server: Server, timeout: float = STARTUP) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"the dashboard exited early:\n{server.text()}")
        try:
            with urllib.request.urlopen(server.url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"the dashboard did not answer in {timeout} s:\n{server.text()}")


@contextmanager
def dashboard(
    args: list[str], log: Path, *, wait: bool = True, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """``alkstore dashboard ARGS`` on a free port, killed and reaped when
    the block ends (if it has not exited by then)."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "alkstore", "dashboard", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, env={**child_env(), **(env or {})},
            cwd=log.parent,
        )  # fmt: skip
    server = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        if wait:
            wait_until_serving(server)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)


async def showcase(store: Store, clock: Any) -> None:
    """A store that looks lived in, for the screenshots: half an hour of
    work (``clock``, a ManualClock, starts 30 minutes ago and is moved
    along), then ``fill``'s queues, streams, schedules and lock."""
    import random

    rng = random.Random(7)
    emails = store.queue("emails", max_attempts=2)
    await emails.set_retention(history=86_400, dead=None)
    for minute in range(30):
        await emails.enqueue_batch(
            [{"to": f"user{minute}-{i}@example.com", "template": "welcome"} for i in range(30)]
        )
        for job in await emails.claim_batch(f"web-{minute % 3 + 1}:4242", rng.randint(8, 26)):
            if rng.random() < 0.04:
                await job.retry(delay=rng.randint(30, 90), error=smtp_error())
            else:
                await job.ack()
        # Ten minutes ago, one job's two attempts (34 s of the minute).
        clock.advance(60 - (await twice_failed(emails, clock) if minute == 20 else 0))
    await fill(store)
    await workflows(store)


async def twice_failed(emails: Queue, clock: Any) -> float:
    """A job whose first attempt timed out and whose second was refused:
    the dead letter the job page's screenshot shows (priority 9: claimed
    before the backlog). Returns the seconds it moved the clock on."""
    job_id = await emails.enqueue({"to": "ops@example.org", "template": "digest"}, priority=9)
    job = await emails.claim_one("web-2:4242")
    assert job is not None and job.id == job_id
    clock.advance(2.4)
    try:
        raise TimeoutError("SMTP server did not answer within 2s")
    except TimeoutError as exc:
        assert await job.retry(delay=30, error=exc)
    clock.advance(30)
    job = await emails.claim_one("web-3:4242")
    assert job is not None and job.id == job_id
    clock.advance(0.8)
    assert await job.fail(smtp_error())
    return 2.4 + 30 + 0.8


async def workflows(store: Store) -> None:
    """Three workflow runs, for the screenshots: a finished fan-out and
    fan-in, a deploy whose build died, and an order under way."""
    wf = store.workflow("nightly-report")
    parts = [wf.step(f"extract-{region}", "analytics", {"region": region})
             for region in ("eu", "us", "apac")]  # fmt: skip
    merge = wf.step("merge", "analytics", {"do": "merge"}, after=parts)
    wf.step("publish", "analytics", {"do": "publish"}, after=[merge])
    await wf.enqueue()
    await _work(store, "analytics", 5, lambda job: {"rows": 1200 + job.id})
    wf = store.workflow("deploy")
    build = wf.step("build", "deploys", {"rev": "4f2a9c1"}, max_attempts=1)
    test = wf.step("test", "deploys", {"suite": "full"}, after=[build])
    wf.step("ship", "deploys", {"to": "prod"}, after=[test])
    wf.step("cleanup", "deploys", {"do": "cleanup"}, after=[build], on_dependency_failure="run")
    await wf.enqueue()
    job = await store.queue("deploys").claim_one("ci-1:4242")
    assert job is not None and await job.fail(RuntimeError("compiler crashed: out of memory"))
    wf = store.workflow("fulfil-order")
    pick = wf.step("pick", "warehouse", {"order": 7})
    charge = wf.step("charge", "payments", {"order": 7, "amount": 4200})
    ship = wf.step("ship", "warehouse", {"order": 7}, after=[pick, charge])
    wf.step("invoice", "payments", {"order": 7}, after=[charge])
    wf.step("notify", "emails", {"order": 7, "template": "shipped"}, after=[ship])
    await wf.enqueue()
    await _work(store, "payments", 1, lambda job: {"charge_id": "ch_3Nq8"})
    assert await store.queue("warehouse").claim_one("web-1:4242") is not None


async def _work(store: Store, queue: str, n: int, result: Any) -> None:
    """Ack ``n`` jobs of ``queue`` one at a time (a released job is claimable
    at once), each with ``result(job)``."""
    for _ in range(n):
        job = await store.queue(queue).claim_one("web-1:4242")
        assert job is not None and await job.ack(result=result(job))
