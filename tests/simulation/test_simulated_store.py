"""Virtual time with ``alkstore.testing.open_simulated`` (the docs' example)."""

from __future__ import annotations

import itertools

import trio
import trio.testing

from alkstore import Backoff, Job
from alkstore.testing import open_simulated


async def test_retries_with_minutes_of_backoff_take_no_real_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_simulated() as store:
        q = store.queue("emails", backoff=Backoff.of(base=60, cap=600, jitter=0), max_attempts=5)
        attempts: list[float] = []

        async def send(job: Job) -> None:
            attempts.append(trio.current_time())
            if len(attempts) < 3:
                raise ConnectionError("smtp down")

        await q.enqueue({"to": "a@example.com"})
        async with trio.open_nursery() as nursery:
            await nursery.start(q.work, send)
            # Poll in virtual time: each sleep is instant under the autojump clock.
            while len(attempts) < 3 or (await q.stats()).processing:  # noqa: ASYNC110
                await trio.sleep(1)
            nursery.cancel_scope.cancel()
        # Backoff doubles from 60 s: the attempts are 60 s and 120 s apart in
        # virtual time, and the job was acked on the third.
        gaps = [round(b - a) for a, b in itertools.pairwise(attempts)]
        assert gaps == [60, 120]
        assert (await q.stats()).dead == 0


async def test_visibility_timeout_and_lock_ttl_pass_in_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_simulated() as store:
        q = store.queue("q", visibility_timeout=300)
        await q.enqueue("x")
        first = await q.claim_one("crashed-worker")
        assert first is not None
        await trio.sleep(301)  # instant under the autojump clock
        again = await q.claim_one("other")
        assert again is not None and again.id == first.id and again.attempts == 2
        assert await first.ack() is False
        lock = await store.try_lock("L", "a", ttl=30)
        assert lock is not None and await store.try_lock("L", "b", ttl=30) is None
        await trio.sleep(31)
        stolen = await store.try_lock("L", "b", ttl=30)
        assert stolen is not None and stolen.token == lock.token + 1


async def test_same_seed_same_run(autojump_clock: trio.testing.MockClock) -> None:
    async def run(seed: int) -> list[float]:
        async with open_simulated(seed=seed) as store:
            q = store.queue("q", backoff=Backoff.of(base=10, jitter=1.0), max_attempts=4)
            await q.enqueue(1)
            seen: list[float] = []
            for _ in range(3):
                while (job := await q.claim_one("w")) is None:  # noqa: ASYNC110
                    await trio.sleep(0.5)
                seen.append(job.claim_expires_at.timestamp())
                await job.retry()
            return seen

    assert await run(7) == await run(7)
