from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from alkstore.api.store import Store
from alkstore.runner.runtime import ManualClock, SystemClock

from .backends import BACKENDS, Backend, selected_backends


@pytest.fixture(params=selected_backends())
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
