"""Run every mechanism of an uninstrumented store, then report which
OpenTelemetry modules got imported (``python -m tests.otel.zero_imports
ENGINE DRIVER LOCATION [--refuse]``). With ``--refuse`` OpenTelemetry
cannot be imported at all, as when the ``otel`` extra is not installed.
Prints one JSON object: the modules, and what ``import alkstore.otel`` said."""

from __future__ import annotations

import importlib.abc
import json
import sys
from typing import Any

FORBIDDEN = ("opentelemetry", "prometheus_client")


def forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


class Refuse(importlib.abc.MetaPathFinder):
    """Makes OpenTelemetry (and prometheus_client) unimportable."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if forbidden(name):
            raise ModuleNotFoundError(f"No module named {name!r} (refused)", name=name)


async def exercise(store: Any, work_until: Any, event: Any) -> None:
    """A bit of everything: enqueues (one, many, in a transaction), a
    worker's rounds with an ack and a retry, the outbox, a stream, locks,
    settling by hand, the sweep and stats."""
    q = store.queue("q")
    await q.enqueue(1)
    await q.enqueue_batch([2, 3])
    async with store.transaction() as tx:
        await tx.enqueue("q", 4)
        await tx.publish("s", "in tx")
        await tx.outbox_enqueue("mail", "hi")
    done: list[Any] = []
    all_done = event()

    async def handler(job: Any) -> None:
        done.append(job.payload)
        if len(done) >= 4:
            all_done.set()
        if job.payload == 3:
            raise ValueError("retried")

    async def deliver(payload: Any) -> None:
        done.append(payload)

    await work_until(q, handler, all_done)
    await store.outbox("mail").run_once(deliver)
    s = store.stream("s")
    await s.publish({"e": 1})
    async with s.subscribe("c") as events:
        await events.recv()
    lock = await store.try_lock("l", "me", 10)
    assert lock is not None
    await lock.release()
    async with store.hold_lock("l", "me", 10):
        pass
    await q.enqueue(5)
    job = await q.claim_one("w")
    assert job is not None
    await job.fail("done")
    await q.sweep_expired()
    await q.stats()


def main() -> None:
    engine, driver, location, *flags = sys.argv[1:]
    if "--refuse" in flags:
        sys.meta_path.insert(0, Refuse())
    import alkstore

    if driver == "trio":
        import trio

        from alkstore.io_trio import PostgresOptions, open_postgres, open_sqlite

        async def work_until(q: Any, handler: Any, done: trio.Event) -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(q.work, handler)
                await done.wait()
                nursery.cancel_scope.cancel()

        event: Any = trio.Event
        runner: Any = trio.run
    else:
        import asyncio
        import contextlib

        from alkstore.io_asyncio import PostgresOptions, open_postgres, open_sqlite

        async def work_until(q: Any, handler: Any, done: asyncio.Event) -> None:
            task = asyncio.create_task(q.work(handler))
            await done.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        event = asyncio.Event

        def runner(main: Any) -> None:
            asyncio.run(main())

    async def run() -> None:
        async with opener() as store:
            await exercise(store, work_until, event)

    from tests.backends import PG_DSN

    def opener() -> Any:
        if engine == "sqlite":
            return open_sqlite(location)
        return open_postgres(PG_DSN, options=PostgresOptions(schema=location))

    runner(run)
    loaded = sorted(m for m in sys.modules if forbidden(m) or m.startswith("alkstore.otel"))
    try:
        import alkstore.otel  # noqa: F401
    except ImportError as exc:
        said = str(exc)
    else:
        said = "imported"
    print(json.dumps({"loaded": loaded, "import alkstore.otel": said}))


if __name__ == "__main__":
    main()
