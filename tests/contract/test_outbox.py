"""Outbox: delivery with retries, backoff and dead letters over a reserved queue."""

from __future__ import annotations

import logging

import pytest

from alkstore import Backoff, ManualClock, QueueStats, ReservedName, Store

from .helpers import at

EXACT = Backoff.of(base=2.0, cap=100.0, jitter=0.0)


class Recorder:
    """A deliver callable that records payloads and fails on demand."""

    def __init__(self, fail_on: list[object] | None = None) -> None:
        self.fail_on = fail_on or []
        self.calls: list[object] = []

    async def __call__(self, payload: object) -> None:
        self.calls.append(payload)
        if payload in self.fail_on:
            raise ConnectionError(f"cannot deliver {payload}")


@pytest.mark.producer
async def test_run_once_delivers_in_order_and_returns_the_count(store: Store) -> None:
    ob = store.outbox("mail")
    for i in range(3):
        await ob.enqueue(f"m{i}")
    deliver = Recorder()
    assert await ob.run_once(deliver) == 3
    assert deliver.calls == ["m0", "m1", "m2"]
    assert await ob.stats() == QueueStats(0, 0, 0, 0)
    assert await ob.run_once(deliver) == 0
    assert deliver.calls == ["m0", "m1", "m2"]


@pytest.mark.producer
async def test_run_once_honours_enqueue_options(store: Store, clock: ManualClock) -> None:
    ob = store.outbox("mail")
    await ob.enqueue("later", delay=10)
    await ob.enqueue("urgent", priority=5)
    await ob.enqueue("normal")
    deliver = Recorder()
    assert await ob.run_once(deliver) == 2
    assert deliver.calls == ["urgent", "normal"]
    clock.advance(10)
    assert await ob.run_once(deliver) == 1
    assert deliver.calls[-1] == "later"


async def test_run_once_respects_the_batch_size(store: Store) -> None:
    ob = store.outbox("mail")
    for i in range(5):
        await ob.enqueue(i)
    deliver = Recorder()
    assert await ob.run_once(deliver, batch=2) == 2
    assert deliver.calls == [0, 1]
    assert await ob.stats() == QueueStats(3, 0, 0, 0)


async def test_failures_are_retried_with_backoff(store: Store, clock: ManualClock) -> None:
    ob = store.outbox("mail", max_attempts=3, backoff=EXACT)
    await ob.enqueue("flaky")
    await ob.enqueue("fine")
    deliver = Recorder(fail_on=["flaky"])
    assert await ob.run_once(deliver) == 1
    assert deliver.calls == ["flaky", "fine"]
    assert await ob.stats() == QueueStats(0, 1, 0, 0)
    clock.advance(1.999)  # backoff after the first failure: 2 s
    assert await ob.run_once(deliver) == 0
    assert deliver.calls == ["flaky", "fine"]
    clock.advance(0.001)
    deliver.fail_on.clear()
    assert await ob.run_once(deliver) == 1
    assert deliver.calls == ["flaky", "fine", "flaky"]
    assert await ob.stats() == QueueStats(0, 0, 0, 0)
    assert await ob.dead_letters() == []


@pytest.mark.producer
async def test_exhausted_messages_are_dead_lettered_and_can_be_requeued(
    store: Store, clock: ManualClock
) -> None:
    ob = store.outbox("mail", max_attempts=2, backoff=EXACT)
    msg_id = await ob.enqueue({"to": "x"})
    deliver = Recorder()

    async def always_fail(payload: object) -> None:
        raise ConnectionError("down")

    assert await ob.run_once(always_fail) == 0
    clock.advance(2)
    assert await ob.run_once(always_fail) == 0
    assert await ob.stats() == QueueStats(0, 0, 0, 1)
    dead = await ob.dead_letters()
    assert [d.id for d in dead] == [msg_id]
    assert dead[0].dead_reason == "max_attempts"
    assert dead[0].last_error == "ConnectionError: down"
    assert dead[0].attempts == 2
    assert dead[0].payload == {"to": "x"}
    clock.advance(3600)
    assert await ob.run_once(always_fail) == 0  # dead letters are never retried

    assert await ob.requeue_dead(msg_id) is True
    assert await ob.dead_letters() == []
    assert await ob.run_once(deliver) == 1
    assert deliver.calls == [{"to": "x"}]


async def test_purge_dead_on_an_outbox(store: Store, clock: ManualClock) -> None:
    ob = store.outbox("mail", max_attempts=1)
    await ob.enqueue("a")

    async def fail(payload: object) -> None:
        raise RuntimeError("no")

    assert await ob.run_once(fail) == 0
    assert (await ob.stats()).dead == 1
    assert await ob.purge_dead(before=at(clock, -1)) == 0
    assert await ob.purge_dead() == 1
    assert await ob.dead_letters() == []


async def test_outboxes_are_independent_of_each_other_and_of_queues(store: Store) -> None:
    mail = store.outbox("mail")
    sms = store.outbox("sms")
    await mail.enqueue("m")
    plain = store.queue("mail")
    assert await plain.claim_one("w") is None  # an outbox is not the queue of that name
    assert await sms.stats() == QueueStats(0, 0, 0, 0)
    deliver = Recorder()
    assert await sms.run_once(deliver) == 0
    assert await mail.run_once(deliver) == 1
    assert deliver.calls == ["m"]


@pytest.mark.producer
async def test_the_backing_queue_name_is_reserved(store: Store) -> None:
    with pytest.raises(ReservedName):
        store.queue("__alkstore_outbox:mail")
    with pytest.raises(ReservedName):
        store.outbox("__alkstore_outbox:mail")
    with pytest.raises(ReservedName):
        async with store.transaction() as tx:
            await tx.enqueue("__alkstore_outbox:mail", "sneaky")
    assert await store.outbox("mail").stats() == QueueStats(0, 0, 0, 0)


@pytest.mark.producer
async def test_tx_outbox_enqueue_with_a_handle_uses_its_options(store: Store) -> None:
    ob = store.outbox("mail", max_attempts=1)
    async with store.transaction() as tx:
        await tx.outbox_enqueue(ob, "x")

    async def fail(payload: object) -> None:
        raise RuntimeError("no")

    assert await ob.run_once(fail) == 0
    assert (await ob.stats()).dead == 1  # max_attempts=1 came from the handle


async def test_a_delivery_that_raises_does_not_stop_the_batch(store: Store) -> None:
    ob = store.outbox("mail")
    for i in range(4):
        await ob.enqueue(i)
    deliver = Recorder(fail_on=[1, 2])
    assert await ob.run_once(deliver) == 2
    assert deliver.calls == [0, 1, 2, 3]
    assert await ob.stats() == QueueStats(0, 2, 0, 0)


async def test_run_once_acks_a_message_only_while_its_own_claim_holds(
    store: Store, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Rule: a run acks a delivered message only while that run's claim on it
    holds, by claim number as the worker acks: not when the claim lapsed and
    the message was claimed again meanwhile, even under the same worker id
    (that claim is left whole). The refused ack is logged as the worker's are."""
    ob = store.outbox("mail", visibility_timeout=10)
    await ob.enqueue("m0")
    again = []

    async def deliver(payload: object) -> None:
        clock.advance(11)  # the run's claim lapses while it delivers ...
        again.extend(await ob.queue.claim_batch("w", 1))  # ... and "w" claims it again

    caplog.set_level(logging.WARNING, logger="alkstore.worker")
    assert await ob.run_once(deliver, worker_id="w") == 0
    assert "refused: claim lost" in caplog.text
    [job] = again
    assert await job.ack() is True
    assert await ob.stats() == QueueStats(0, 0, 0, 0)
