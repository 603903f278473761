from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from alkstore import ManualClock, Store, SystemClock

from .backends import BACKENDS, PG_DSN, PG_TEST_SCHEMA_PREFIX, Backend, selected_backends


def _drop_test_schemas(*, only_pid: int | None) -> None:
    """Drop this process's test schemas, or those of test runs no longer alive."""
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
            (PG_TEST_SCHEMA_PREFIX.replace("_", r"\_") + "%",),
        ).fetchall()
        for (name,) in rows:
            pid_text = name[len(PG_TEST_SCHEMA_PREFIX) :].split("_", 1)[0]
            pid = int(pid_text) if pid_text.isdigit() else None
            if only_pid is not None and pid != only_pid:
                continue
            if only_pid is None and pid is not None and _alive(pid):
                continue
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.fixture(scope="session", autouse=True)
def _postgres_test_schemas() -> Iterator[None]:
    """Each Postgres test works in a schema of its own; drop them all around
    the session. A missing server fails here, loudly: never a skip."""
    if not any(BACKENDS[b].engine == "postgres" for b in selected_backends()):
        yield
        return
    _drop_test_schemas(only_pid=None)
    yield
    _drop_test_schemas(only_pid=os.getpid())


@pytest.fixture(params=selected_backends(sync=True))
def backend(request: pytest.FixtureRequest) -> Backend:
    return BACKENDS[request.param]


@pytest.fixture
def location(backend: Backend, tmp_path: Path) -> str:
    """A fresh database location for this test on this backend."""
    return backend.new_location(tmp_path)


@pytest.fixture
def clock() -> ManualClock:
    """A clock the test moves by hand; starts at the real current time."""
    return ManualClock(SystemClock().now_us())


@pytest.fixture
async def store(backend: Backend, location: str, clock: ManualClock) -> AsyncIterator[Store]:
    """A store on a fresh database whose time is ``clock``."""
    async with backend.open(location, clock=clock) as s:
        yield s


# -- tests on an asyncio backend ---------------------------------------------------------
#
# pytest-trio's trio_mode runs every async test and async fixture under trio.
# A test whose ``backend`` is an asyncio one runs on an asyncio event loop of
# its own instead, with the asyncio driver: its ``trio`` mark comes off, its
# async fixtures (``store``) are set up on that loop, and the loop must end
# with no task, thread or file descriptor left over. Sync fixtures are shared.


def _on_asyncio(node: Any) -> bool:
    callspec = getattr(node, "callspec", None)
    name = callspec.params.get("backend") if callspec is not None else None
    return isinstance(name, str) and BACKENDS[name].driver == "asyncio"


def _on_sync(node: Any) -> bool:
    callspec = getattr(node, "callspec", None)
    name = callspec.params.get("backend") if callspec is not None else None
    return isinstance(name, str) and BACKENDS[name].driver == "sync"


def _producer_case(item: pytest.Item) -> bool:
    """Marked ``producer``, and not one of the parameters the mark's
    ``exclude`` names (the cases of a parametrised test that call what only
    the async stores have)."""
    mark = item.get_closest_marker("producer")
    if mark is None:
        return False
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return not any(isinstance(v, str) and v in mark.kwargs.get("exclude", ()) for v in params)


@pytest.hookimpl(trylast=True)  # after pytest-trio has marked every async test
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The blocking backends (``*-sync``) run the tests marked ``producer`` only.
    dropped = {i for i in items if _on_sync(i) and not _producer_case(i)}
    if dropped:
        config.hook.pytest_deselected(items=[i for i in items if i in dropped])
        items[:] = [i for i in items if i not in dropped]
    for item in items:
        if _on_asyncio(item):
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]


class _AsyncFixture:
    """An async fixture of a test on an asyncio backend: set up on the test's loop."""

    def __init__(self, func: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self.func = func
        self.kwargs = kwargs
        self.value: Any = None
        self.ready = False

    async def setup(self, stack: AsyncExitStack) -> Any:
        if not self.ready:
            kwargs = {name: await _resolve(v, stack) for name, v in self.kwargs.items()}
            result = self.func(**kwargs)
            if inspect.isasyncgen(result):
                self.value = await result.__anext__()
                stack.push_async_callback(_finish, result)
            else:
                self.value = await result
            self.ready = True
        return self.value


async def _resolve(value: Any, stack: AsyncExitStack) -> Any:
    return await value.setup(stack) if isinstance(value, _AsyncFixture) else value


async def _finish(gen: Any) -> None:
    try:
        await gen.__anext__()
    except StopAsyncIteration:
        return
    raise RuntimeError("an async fixture yielded twice")


@pytest.hookimpl(tryfirst=True)  # before pytest-trio, which would claim async fixtures
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Any:
    if not _on_asyncio(request.node):
        return None
    func, name = fixturedef.func, fixturedef.argname
    kwargs = {arg: request.getfixturevalue(arg) for arg in fixturedef.argnames}
    if not (inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)):
        if any(isinstance(v, _AsyncFixture) for v in kwargs.values()):
            raise RuntimeError(f"sync fixture {name!r} cannot use an async fixture here")
        return None  # pytest's own setup
    if fixturedef.scope != "function":
        raise RuntimeError(f"async fixture {name!r} must be function-scoped")
    fixture = _AsyncFixture(func, kwargs)
    fixturedef.cached_result = (fixture, fixturedef.cache_key(request), None)
    return fixture


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not _on_asyncio(pyfuncitem):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    _run_on_asyncio(pyfuncitem.obj, kwargs)
    return True


def _open_fds() -> set[str]:
    # Linux (this project's CI); elsewhere the descriptor check is left out.
    return set(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else set()


def _run_on_asyncio(test: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
    threads = set(threading.enumerate())
    fds = _open_fds()
    loop_errors: list[dict[str, Any]] = []
    with asyncio.Runner() as runner:  # closing it joins the default executor's threads
        runner.get_loop().set_exception_handler(lambda _, context: loop_errors.append(context))
        runner.run(_fixtures_and_test(test, kwargs))
    assert not loop_errors, f"the event loop reported: {loop_errors}"
    left = [t for t in threading.enumerate() if t not in threads]
    assert not left, f"threads left running after the test: {left}"
    opened = sorted(_open_fds() - fds)
    assert not opened, f"file descriptors left open after the test: {opened}"


async def _fixtures_and_test(test: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
    async with AsyncExitStack() as stack:
        await test(**{name: await _resolve(v, stack) for name, v in kwargs.items()})
    this = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not this]
    assert not left, f"tasks left running after the test and its fixtures: {left}"
