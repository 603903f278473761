"""What the worker and the queue log: anything a user must act on is at
WARNING or above, with the job and its attempt (a failure to be retried at
WARNING, a job going dead at ERROR with its reason); nothing at INFO."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

from alkstore import Backoff, Job, Store
from tests.backends import BACKENDS, Backend, selected_backends

SOON = 5.0


@pytest.fixture(params=selected_backends(driver="trio"))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
async def store(backend: Backend, location: str) -> Any:
    async with backend.open(location, clock=None) as s:
        yield s


def records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("alkstore")]


async def run_until(store: Store, q: Any, handler: Any, done: trio.Event) -> None:
    with trio.fail_after(SOON):
        async with trio.open_nursery() as nursery:
            await nursery.start(lambda task_status: q.work(handler, task_status=task_status,
                                                             poll_interval=0.05))  # fmt: skip
            await done.wait()
            await trio.sleep(0.05)  # let the settle finish
            nursery.cancel_scope.cancel()


async def test_a_retried_failure_warns_and_a_burial_is_an_error(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="alkstore")
    # Retries are due at once with a zero backoff.
    q = store.queue("q", max_attempts=2, backoff=Backoff.of(base=0.0))
    job_id = await q.enqueue(1)
    tries: list[int] = []
    done = trio.Event()

    async def handler(job: Job) -> None:
        tries.append(job.attempts)
        if len(tries) == 2:
            done.set()
        raise RuntimeError(f"boom {job.attempts}")

    await run_until(store, q, handler, done)
    got = records(caplog)
    warnings = [r for r in got if r.levelno == logging.WARNING and "retrying" in r.getMessage()]
    errors = [r for r in got if r.levelno == logging.ERROR]
    assert len(warnings) == 1
    assert f"job {job_id}" in warnings[0].getMessage()
    assert "attempt 1 of 2" in warnings[0].getMessage()
    assert "boom 1" in warnings[0].getMessage()
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert f"job {job_id}" in message and "dead letters (max_attempts)" in message
    assert "attempt 2 of 2" in message and "boom 2" in message
    assert not [r for r in got if r.levelno == logging.INFO]
    info = await q.get_job(job_id)
    assert info is not None and info.state == "dead"


async def test_a_handler_that_fails_its_job_logs_an_error(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="alkstore")
    q = store.queue("q")
    job_id = await q.enqueue(1)
    done = trio.Event()

    async def handler(job: Job) -> None:
        await job.fail("bad input")
        done.set()

    await run_until(store, q, handler, done)
    errors = [r for r in records(caplog) if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert f"job {job_id}" in errors[0].getMessage()
    assert "(failed)" in errors[0].getMessage() and "bad input" in errors[0].getMessage()


async def test_the_sweep_logs_what_it_buries_and_why(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="alkstore")
    q = store.queue("q")
    job_id = await q.enqueue(1, expires=0.01)
    await trio.sleep(0.05)
    assert await q.sweep_expired() == 1
    errors = [r for r in records(caplog) if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "expired: 1" in errors[0].getMessage() and str(job_id) in errors[0].getMessage()
    assert await q.sweep_expired() == 0
    assert len([r for r in records(caplog) if r.levelno == logging.ERROR]) == 1


async def test_outbox_delivery_failures_warn(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="alkstore")
    ob = store.outbox("hooks")
    msg_id = await ob.enqueue({"url": "x"})

    async def deliver(payload: Any) -> None:
        raise ConnectionError("down")

    assert await ob.run_once(deliver) == 0
    warnings = [r for r in records(caplog) if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert f"job {msg_id}" in warnings[0].getMessage() and "down" in warnings[0].getMessage()
