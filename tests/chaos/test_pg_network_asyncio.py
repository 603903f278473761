"""The same rule as ``test_pg_network.py`` on the asyncio driver, whose
runtime waits on sockets its own way: a mute listening connection is
replaced within the probe bound, with the reconnect wake, and an operation
on a mute pooled connection fails within response_timeout and writes
nothing."""

from __future__ import annotations

import asyncio
import time

from alkstore import LISTENER_RECONNECTED, DatabaseError, Wake
from alkstore.io_asyncio import PostgresOptions, open_postgres
from tests.backends import PG_DSN
from tests.postgres.pg import fresh_schema, sql

from .proxy import faulty_proxy
from .test_pg_network import RECOVERED, RESPONSE, chaos_options


def test_a_mute_path_is_noticed_and_replaced_on_asyncio() -> None:
    schema = fresh_schema()

    async def main() -> None:
        with faulty_proxy(PG_DSN) as proxy:
            options = chaos_options(schema)
            direct = PostgresOptions(schema=schema, pool_size=1)
            async with (
                open_postgres(proxy.dsn(PG_DSN), options=options) as store,
                open_postgres(PG_DSN, options=direct) as other,
                store.listen("ch") as rx,
            ):
                q = store.queue("q")
                await q.enqueue("warm")
                proxy.blackhole()
                started = time.monotonic()
                try:
                    await asyncio.wait_for(q.enqueue("lost"), RESPONSE + 10)
                except DatabaseError as exc:
                    assert "response_timeout" in str(exc)
                else:
                    raise AssertionError("an enqueue on a mute connection succeeded")
                assert time.monotonic() - started < RESPONSE + 5
                assert await rx.recv_timeout(RECOVERED) == Wake(LISTENER_RECONNECTED)
                await asyncio.wait_for(q.enqueue("after"), RECOVERED)
                await other.notify("ch")
                while (wake := await rx.recv_timeout(RECOVERED)) == Wake(LISTENER_RECONNECTED):
                    pass
                assert wake == Wake("ch")
                rows = sql(f'SELECT payload FROM "{schema}".jobs ORDER BY id')
                assert [r[0] for r in rows] == ['"warm"', '"after"']

    asyncio.run(main())
