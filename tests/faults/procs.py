"""Subprocesses for the fault tests: started from the repository root with the
interpreter running the tests, always killed and reaped when the block ends."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]
# Starting a Python process that imports trio and alkstore can take seconds
# on a loaded machine: bounds that include a process start are generous.
STARTUP = 30.0


def env() -> dict[str, str]:
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), out.get("PYTHONPATH")]))
    return out


@asynccontextmanager
async def process(
    argv: list[str], *, stdin: int = subprocess.DEVNULL, stdout: int | None = None
) -> AsyncIterator[trio.Process]:
    """``sys.executable argv...``, killed and reaped when the block ends."""
    proc = await trio.lowlevel.open_process(
        [sys.executable, *argv], cwd=ROOT, env=env(), stdin=stdin, stdout=stdout
    )
    try:
        yield proc
    finally:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    await stream.aclose()


async def read_line(stream: trio.abc.ReceiveStream, timeout: float = STARTUP) -> str:
    """One line from a process's stdout (bytes up to the first newline)."""
    data = b""
    with trio.fail_after(timeout):
        while not data.endswith(b"\n"):
            chunk = await stream.receive_some(1)
            if not chunk:
                raise EOFError(f"stream ended after {data!r}")
            data += chunk
    return data.decode().strip()


def alkstore_threads() -> list[str]:
    """Names of alkstore's own threads (writer slots) still alive."""
    return [t.name for t in threading.enumerate() if t.name.startswith("alkstore")]


@contextmanager
def no_thread_leak() -> Iterator[None]:
    """The block leaves no alkstore thread behind."""
    before = set(alkstore_threads())
    yield
    assert set(alkstore_threads()) <= before, alkstore_threads()
