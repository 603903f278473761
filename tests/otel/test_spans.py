"""``alkstore.otel``'s spans, on every backend: what each operation makes,
its kind, attributes and parent, and the counters and histograms recorded
with it (docs/observability.md lists them)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import alkstore.otel
from alkstore import InvalidArgument, Job, ManualClock, Store, UsageError
from tests.contract import aio
from tests.contract.helpers import wait_until

from .conftest import Capture

MESSAGING = {"messaging.system": "alkstore"}


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def linked(span: ReadableSpan) -> set[int]:
    return {link.context.span_id for link in span.links}


async def run_worker(
    store: Store, capture: Capture, queue: str, handler: Any, until: Any, **options: Any
) -> None:
    """``queue``'s worker runs ``handler`` until ``until()`` holds."""
    q = store.queue(queue)

    async def worker(task_status: Any = None) -> None:
        await q.work(handler, task_status=task_status, **options)

    async with aio.open_task_group() as group:
        await group.start(worker)
        await wait_until(until)
        group.cancel()


async def test_the_handler_continues_the_trace_of_the_code_that_enqueued(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """enqueue (PRODUCER, under the caller's span) -> claim (CLIENT, a trace
    of its own) -> process (CONSUMER, child of the enqueue span, linked to
    the claim; the handler's own spans under it) -> ack (a settle round
    linked to the run)."""
    with capture.tracer.start_as_current_span("checkout") as checkout:
        job_id = await store.queue("orders").enqueue({"n": 1})

    async def handler(job: Job) -> None:
        with capture.tracer.start_as_current_span("charge"):
            pass

    await run_worker(store, capture, "orders", handler, lambda: capture.spans("ack orders"),
                     worker_id="w1")  # fmt: skip

    enqueue = capture.span("enqueue orders")
    assert enqueue.kind is SpanKind.PRODUCER
    assert parent_of(enqueue) == checkout.get_span_context().span_id
    assert attrs(enqueue) == {
        **MESSAGING, "messaging.operation.type": "send", "messaging.operation.name": "enqueue",
        "messaging.destination.name": "orders", "messaging.message.id": str(job_id),
    }  # fmt: skip

    claim = capture.span("claim orders")
    assert claim.kind is SpanKind.CLIENT and claim.parent is None
    assert attrs(claim) == {
        **MESSAGING, "messaging.operation.type": "receive", "messaging.operation.name": "claim",
        "messaging.destination.name": "orders", "messaging.client.id": "w1",
        "messaging.batch.message_count": 1,
    }  # fmt: skip

    process = capture.span("process orders")
    assert process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == enqueue.context.trace_id
    assert parent_of(process) == enqueue.context.span_id
    assert linked(process) == {claim.context.span_id}
    assert attrs(process) == {
        **MESSAGING, "messaging.operation.type": "process", "messaging.operation.name": "process",
        "messaging.destination.name": "orders", "messaging.message.id": str(job_id),
        "messaging.client.id": "w1", "alkstore.job.attempt": 1,
    }  # fmt: skip
    assert process.status.status_code is StatusCode.UNSET
    assert parent_of(capture.span("charge")) == process.context.span_id

    ack = capture.span("ack orders")
    assert ack.kind is SpanKind.CLIENT and ack.parent is None
    assert linked(ack) == {process.context.span_id}
    assert attrs(ack)["messaging.operation.type"] == "settle"
    assert attrs(ack)["messaging.batch.message_count"] == 1
    assert attrs(ack)["alkstore.jobs.acked"] == 1

    for metric in ("alkstore.jobs.enqueued", "alkstore.jobs.claimed", "alkstore.jobs.acked"):
        assert capture.value(metric, queue="orders") == 1, metric
    assert capture.value("alkstore.job.duration", queue="orders") == 1  # one run recorded


async def test_a_failing_handler_records_its_error_and_the_retry_and_burial(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """A handler that raises: its run's span has status ERROR, the
    exception and ``error.type``; the worker's retry is a span under the
    run (not under the span the worker was started in); on the last attempt
    it is a burial, counted dead with its reason. The duration histogram
    keeps the error type."""
    q = store.queue("flaky", max_attempts=2, visibility_timeout=30)
    await q.enqueue(None, max_attempts=1)

    async def handler(job: Job) -> None:
        raise ValueError("no luck")

    # Started under a span of the application's, which the retry must not join.
    with capture.tracer.start_as_current_span("app main"):
        await run_worker(store, capture, "flaky", handler, lambda: capture.spans("retry flaky"))
    process = capture.span("process flaky")
    assert process.status.status_code is StatusCode.ERROR
    assert attrs(process)["error.type"] == "ValueError"
    assert [e.name for e in process.events] == ["exception"]
    retry = capture.span("retry flaky")
    assert parent_of(retry) == process.context.span_id
    assert attrs(retry)["alkstore.job.owned"] is True
    assert attrs(retry)["alkstore.job.dead_reason"] == "max_attempts"
    assert capture.value("alkstore.jobs.dead", queue="flaky", reason="max_attempts") == 1
    assert capture.value("alkstore.jobs.retried", queue="flaky") is None
    assert capture.value("alkstore.job.duration", queue="flaky", error="ValueError") == 1


async def test_settling_by_hand_makes_settle_spans_and_counts(
    store: Store, clock: ManualClock, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """``ack``, ``retry``, ``fail`` and ``release`` on claimed jobs, and
    ``claim_batch``/``ack_batch``: a span each, under the caller's span,
    with whether the job was still owned; the counters count what changed."""
    q = store.queue("q", max_attempts=3)
    ids = await q.enqueue_batch([1, 2, 3, 4, 5])
    with capture.tracer.start_as_current_span("by hand") as outer:
        jobs = await q.claim_batch("w", 4)
        a, b, c, d = jobs
        assert await a.ack() is True
        assert await a.ack() is False  # not owned any more: changed nothing
        assert await b.retry(delay=0) is True
        assert await c.fail("bad") is True
        assert await d.release() is True
        (e,) = await q.claim_batch("w", 1)  # the released one comes back first
        assert await q.ack_batch([e.id], "w") == 1

    claim = capture.spans("claim q")[0]
    assert parent_of(claim) == outer.get_span_context().span_id
    assert attrs(claim)["messaging.batch.message_count"] == 4
    acks = capture.spans("ack q")
    assert [attrs(s)["alkstore.job.owned"] for s in acks[:2]] == [True, False]
    assert attrs(acks[2])["alkstore.jobs.acked"] == 1
    assert attrs(acks[2])["messaging.batch.message_count"] == 1
    for name, job in (("retry q", b), ("fail q", c), ("release q", d)):
        span = capture.span(name)
        assert parent_of(span) == outer.get_span_context().span_id
        assert attrs(span)["messaging.message.id"] == str(job.id)
        assert attrs(span)["messaging.operation.type"] == "settle"
        assert attrs(span)["messaging.client.id"] == "w"
    assert attrs(capture.span("fail q"))["alkstore.job.owned"] is True
    assert capture.value("alkstore.jobs.claimed", queue="q") == 5
    assert capture.value("alkstore.jobs.acked", queue="q") == 2
    assert capture.value("alkstore.jobs.retried", queue="q") == 1
    assert capture.value("alkstore.jobs.dead", queue="q", reason="failed") == 1
    assert capture.value("alkstore.jobs.enqueued", queue="q") == len(ids)


async def test_batches_transactions_and_the_outbox_carry_the_trace_context(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """Every job of ``enqueue_batch`` continues its one span; an enqueue in a
    transaction, and an outbox message, carry the context of the code that
    enqueued them to their delivery."""
    q = store.queue("b")
    await q.enqueue_batch(["x", "y"])
    batch = capture.span("enqueue b")
    assert attrs(batch)["messaging.batch.message_count"] == 2
    jobs = await q.claim_batch("w", 2)
    for job in jobs:
        context = alkstore.otel.job_context(job)
        assert trace.get_current_span(context).get_span_context().span_id == (
            batch.context.span_id
        )
    ob = store.outbox("mail")
    with capture.tracer.start_as_current_span("signup"):
        async with store.transaction() as tx:
            await tx.enqueue("t", "in tx")
            await tx.outbox_enqueue("mail", {"to": "a@b"})
    tx_enqueue = capture.span("enqueue t")
    (job,) = await store.queue("t").claim_batch("w", 1)
    assert trace.get_current_span(alkstore.otel.job_context(job)).get_span_context().span_id == (
        tx_enqueue.context.span_id
    )
    delivered: list[Any] = []

    async def deliver(payload: Any) -> None:
        delivered.append(payload)

    assert await ob.run_once(deliver) == 1
    enqueue = capture.span(f"enqueue {ob.queue.name}")
    process = capture.span(f"process {ob.queue.name}")
    assert parent_of(process) == enqueue.context.span_id
    assert process.context.trace_id == capture.span("signup").context.trace_id
    assert capture.value("alkstore.jobs.acked", queue=ob.queue.name) == 1


async def test_a_job_enqueued_without_a_trace_starts_its_own(
    store: Store, capture: Capture
) -> None:
    """A job enqueued before the store was instrumented has no headers:
    ``job_context`` is empty and its run is the root of a new trace, even
    under a worker started inside some span of the application's (whose
    claims start traces of their own too)."""
    q = store.queue("plain")
    await q.enqueue(1)
    telemetry = alkstore.otel.instrument(
        store, tracer_provider=capture.tracer_provider, meter_provider=capture.meter_provider
    )
    try:
        (job,) = await q.claim_batch("w", 1)
        assert not trace.get_current_span(alkstore.otel.job_context(job)).get_span_context(
        ).is_valid  # fmt: skip
        assert await job.release() is True

        async def handler(job: Job) -> None:
            pass

        with capture.tracer.start_as_current_span("app main"):
            await run_worker(
                store, capture, "plain", handler, lambda: capture.spans("process plain")
            )
        assert capture.span("process plain").parent is None
        assert capture.spans("claim plain")[-1].parent is None
    finally:
        telemetry.close()


async def test_publish_and_subscriber_delivery(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """A publish is a PRODUCER span with the event's offset; a subscriber's
    read that brings events is a ``receive`` span with the consumer, the
    count and the offsets (reads that bring nothing make no span)."""
    s = store.stream("events")
    offsets = [await s.publish({"i": i}) for i in range(3)]
    publishes = capture.spans("publish events")
    assert [attrs(p)["messaging.message.id"] for p in publishes] == [str(o) for o in offsets]
    assert all(p.kind is SpanKind.PRODUCER for p in publishes)
    async with s.subscribe("billing") as events:
        got = [await events.recv() for _ in range(3)]
        assert [e.offset for e in got if e is not None] == offsets
        assert await events.recv_timeout(0.01) is None
    (receive,) = capture.spans("receive events")
    assert receive.kind is SpanKind.CLIENT
    assert attrs(receive) == {
        **MESSAGING, "messaging.operation.type": "receive", "messaging.operation.name": "receive",
        "messaging.destination.name": "events", "messaging.consumer.group.name": "billing",
        "messaging.batch.message_count": 3, "alkstore.stream.first_offset": offsets[0],
        "alkstore.stream.last_offset": offsets[-1],
    }  # fmt: skip


async def test_lock_acquisition_spans(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """``try_lock``: a span with the name, owner, whether it was acquired and
    the fencing token; ``hold_lock`` makes one span for its whole wait."""
    lock = await store.try_lock("report", "a", 30)
    assert lock is not None
    assert await store.try_lock("report", "b", 30) is None
    await lock.release()
    async with store.hold_lock("report", "b", 30) as held:
        pass
    spans = capture.spans("acquire lock")
    assert [attrs(s)["alkstore.lock.acquired"] for s in spans] == [True, False, True]
    assert [attrs(s)["alkstore.lock.owner"] for s in spans] == ["a", "b", "b"]
    assert attrs(spans[0])["alkstore.lock.token"] == lock.token
    assert attrs(spans[2])["alkstore.lock.token"] == held.token
    assert "alkstore.lock.token" not in attrs(spans[1])
    assert all(attrs(s)["alkstore.lock.name"] == "report" for s in spans)


async def test_an_operation_that_fails_records_its_error(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    """An error raised by a round trip is on its span, and raised as it came."""
    stranger = await store.try_lock("x", "a", 30)
    assert stranger is not None
    await store.aclose()
    with pytest.raises(alkstore.Closed):
        await store.queue("q").enqueue(1)
    span = capture.span("enqueue q")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "alkstore.Closed"  # the name users import
    assert capture.value("alkstore.jobs.enqueued", queue="q") is None


async def test_instrument_refuses_bad_arguments_and_a_second_time(
    store: Store, capture: Capture
) -> None:
    telemetry = alkstore.otel.instrument(store, tracer_provider=capture.tracer_provider)
    with pytest.raises(UsageError):
        alkstore.otel.instrument(store)
    telemetry.close()
    telemetry.close()  # idempotent
    assert telemetry.closed
    with pytest.raises(alkstore.Closed):
        await telemetry.refresh()
    for bad in (
        {"refresh_interval": 0},
        {"queues": "q"},
        {"queues": ["__alkstore_x"]},
        {"consumers": [("s",)]},
    ):
        with pytest.raises((InvalidArgument, alkstore.ReservedName)):
            alkstore.otel.instrument(store, **bad)
    with pytest.raises(InvalidArgument):
        alkstore.otel.instrument("not a store")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        alkstore.otel.job_context("not a job")  # type: ignore[arg-type]
    # Closed: no more spans from the store.
    await store.queue("q").enqueue(1)
    assert capture.spans() == []
    # And it can be instrumented again.
    again = alkstore.otel.instrument(store, tracer_provider=capture.tracer_provider)
    await store.queue("q").enqueue(2)
    assert len(capture.spans("enqueue q")) == 1
    again.close()



async def test_a_unique_enqueue_carries_the_trace_context_and_its_span(
    store: Store, capture: Capture, instrumented: alkstore.otel.Telemetry
) -> None:
    """``enqueue_unique`` (single, batch, in a transaction) goes through the
    enqueue span like ``enqueue``: the new job carries the producer's trace,
    and a duplicate inserts nothing under its own span."""
    q = store.queue("uniq")
    with capture.tracer.start_as_current_span("producer") as producer:
        first = await q.enqueue_unique(1, "k")
        assert (await q.enqueue_unique(2, "k")).duplicate
        batch = await q.enqueue_batch_unique([("j", 3), ("k", 4)])
        async with store.transaction() as tx:
            inside = await tx.enqueue_unique(q, 5, "i")
    assert [r.duplicate for r in batch] == [False, True] and not inside.duplicate
    assert len(capture.spans("enqueue uniq")) == 4
    jobs = await q.claim_batch("w", 10)
    assert sorted(j.id for j in jobs) == sorted([first.id, batch[0].id, inside.id])
    for job in jobs:
        context = trace.get_current_span(alkstore.otel.job_context(job)).get_span_context()
        assert context.trace_id == producer.get_span_context().trace_id


async def test_a_dependents_run_links_to_the_runs_of_its_dependencies(
    store: Store, instrumented: alkstore.otel.Telemetry, capture: Capture
) -> None:
    # Each finish records its run's context; the dependent's run links to both.
    q = store.queue("wf")
    a = await q.enqueue("a")
    b = await q.enqueue("b")
    c = await q.enqueue("c", depends_on=[a, b])

    async def handler(job: Job) -> str:
        return f"{job.payload}!"

    await run_worker(store, capture, "wf", handler,
                     lambda: len(capture.spans("process wf")) == 3)  # fmt: skip
    runs = {attrs(s)["messaging.message.id"]: s for s in capture.spans("process wf")}
    dependent = runs[str(c)]
    pointed = {
        (link.context.span_id, dict(link.attributes or {}).get("messaging.message.id"))
        for link in dependent.links
    }
    assert (runs[str(a)].context.span_id, str(a)) in pointed
    assert (runs[str(b)].context.span_id, str(b)) in pointed
    # The dependencies' own runs wait on nothing: no such links.
    assert not any(dict(link.attributes or {}) for link in runs[str(a)].links)
