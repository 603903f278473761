"""A busy SQLite writer process for the frozen-lock-holder test.

Run as ``python -m tests.chaos.sqlite_writer PATH LOG`` from the repository
root: it enqueues jobs in transactions of five as fast as it can, forever,
and after each commit appends ``ok <token> ...`` to LOG (one O_APPEND write
per transaction); ``ready`` first.
"""

from __future__ import annotations

import os
import sys

import trio

from alkstore.io_trio import SqliteOptions, open_sqlite

QUEUE = "frozen"


def log_line(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


async def main(path: str, log: str) -> None:
    # Long busy timeout: while the test's store holds the lock, this one
    # waits rather than fails.
    async with open_sqlite(path, options=SqliteOptions(busy_timeout=60.0)) as store:
        log_line(log, "ready")
        n = 0
        while True:
            tokens = [f"w{n + i}" for i in range(5)]
            n += 5
            async with store.transaction() as tx:
                for token in tokens:
                    await tx.enqueue(QUEUE, {"token": token, "pad": "x" * 200})
            log_line(log, "ok " + " ".join(tokens))


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2])
