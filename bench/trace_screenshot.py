"""Make docs/img/trace.png: a real alkstore trace, in a real trace viewer.

    python bench/trace_screenshot.py [--out docs/img/trace.png] [--keep]

What it does: starts Arize Phoenix (an OpenTelemetry trace viewer, from
PyPI) on loopback ports with a fresh working directory; runs a *producer*
process (an HTTP handler's span, ``POST /signup``, that enqueues a job into
``emails``) and then a *worker* process (``Queue.work``, whose handler makes
``render`` and ``smtp`` spans) on one SQLite file, each exporting its spans to
Phoenix over OTLP/HTTP with a service name of its own; then screenshots
Phoenix's view of that trace with Playwright driving the system's Chromium.

Not run in CI. It needs, in one environment (a virtualenv of its own is
best: Phoenix brings many dependencies)::

    pip install -e . arize-phoenix playwright opentelemetry-exporter-otlp-proto-http
    apt-get install chromium        # Playwright drives it; no `playwright install`

``--keep`` leaves Phoenix running afterwards (its URL is printed) to look
around; otherwise everything it started is stopped.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
PROJECT = "alkstore"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# -- the two processes whose spans make the trace ------------------------------------
def tracer_provider(service: str, endpoint: str):  # type: ignore[no-untyped-def]
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    resource = Resource.create(
        {"service.name": service, "openinference.project.name": PROJECT}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider


def produce(db: str, endpoint: str) -> None:
    """The web process: a request that writes and enqueues a welcome email."""
    import trio

    import alkstore.otel
    from alkstore.io_trio import open_sqlite

    provider = tracer_provider("shop-web", endpoint)
    tracer = provider.get_tracer("shop.web")

    async def main() -> None:
        async with open_sqlite(db) as store:
            alkstore.otel.instrument(store, tracer_provider=provider)
            with tracer.start_as_current_span("POST /signup") as request:
                request.set_attribute("http.request.method", "POST")
                request.set_attribute("http.route", "/signup")
                with tracer.start_as_current_span("validate form"):
                    await trio.sleep(0.004)
                async with store.transaction() as tx:
                    await tx.execute("CREATE TABLE IF NOT EXISTS users (email TEXT)")
                    await tx.execute("INSERT INTO users VALUES (?)", ["ada@example.com"])
                    await tx.enqueue("emails", {"to": "ada@example.com", "template": "welcome"})
                await trio.sleep(0.002)

    trio.run(main)
    provider.shutdown()


def work(db: str, endpoint: str) -> None:
    """The worker process: sends the email, then stops."""
    import trio

    import alkstore.otel
    from alkstore import Job
    from alkstore.io_trio import open_sqlite

    provider = tracer_provider("shop-worker", endpoint)
    tracer = provider.get_tracer("shop.worker")

    async def main() -> None:
        async with open_sqlite(db) as store:
            alkstore.otel.instrument(store, tracer_provider=provider)
            done = trio.Event()

            async def send_email(job: Job) -> None:
                with tracer.start_as_current_span("render") as render:
                    render.set_attribute("email.template", job.payload["template"])
                    await trio.sleep(0.006)
                with tracer.start_as_current_span("smtp") as smtp:
                    smtp.set_attribute("server.address", "smtp.example.com")
                    await trio.sleep(0.018)
                done.set()

            async with trio.open_nursery() as nursery:
                await nursery.start(
                    functools.partial(store.queue("emails").work, worker_id="mailer-1"), send_email
                )
                await done.wait()
                await trio.sleep(0.2)  # the ack round
                nursery.cancel_scope.cancel()

    trio.run(main)
    provider.shutdown()


# -- Phoenix and the screenshot ------------------------------------------------------
def wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def screenshot(base: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 900}, device_scale_factor=1)
        page.goto(f"{base}/projects", wait_until="networkidle")
        page.get_by_text(PROJECT, exact=True).first.click()
        page.wait_for_timeout(3000)
        # The spans table: open the trace whose root is the request.
        page.get_by_text("POST /signup").first.click()
        page.wait_for_timeout(3000)
        # Select the handler's run, so its attributes show beside the tree,
        # and take the pointer away from the tree (no tooltip).
        page.get_by_text("process emails").first.click()
        page.wait_for_timeout(2000)
        page.mouse.move(1590, 880)
        page.wait_for_timeout(800)
        out.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(out))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "trace.png"))
    parser.add_argument("--keep", action="store_true", help="leave Phoenix running")
    parser.add_argument("role", nargs="?", choices=["produce", "work"], help=argparse.SUPPRESS)
    parser.add_argument("db", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("endpoint", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "produce":
        return produce(args.db, args.endpoint)
    if args.role == "work":
        return work(args.db, args.endpoint)

    tmp = Path(tempfile.mkdtemp(prefix="alkstore-trace-"))
    port, grpc = free_port(), free_port()
    env = dict(os.environ)
    env.update(PHOENIX_WORKING_DIR=str(tmp / "phoenix"), PHOENIX_HOST="127.0.0.1",
               PHOENIX_PORT=str(port), PHOENIX_GRPC_PORT=str(grpc))  # fmt: skip
    log = open(tmp / "phoenix.log", "w")  # noqa: SIM115
    phoenix = subprocess.Popen(
        [sys.executable, "-m", "phoenix.server.main", "serve"], env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, timeout=120)
        db, endpoint = str(tmp / "shop.db"), f"{base}/v1/traces"
        me = [sys.executable, str(Path(__file__).resolve())]
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        subprocess.run([*me, "produce", db, endpoint], check=True, env=child_env, timeout=120)
        time.sleep(0.3)  # a moment between the request and the worker picking it up
        subprocess.run([*me, "work", db, endpoint], check=True, env=child_env, timeout=120)
        time.sleep(2)  # Phoenix ingests in the background
        screenshot(base, Path(args.out))
        print(f"wrote {args.out}")
        if args.keep:
            print(f"Phoenix is at {base} (pid {phoenix.pid}); stop it when done")
            return
    finally:
        log.close()
        if not args.keep:
            phoenix.terminate()
            phoenix.wait(timeout=30)
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
