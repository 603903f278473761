from __future__ import annotations

import pytest

from .pg import fresh_schema


@pytest.fixture
def schema() -> str:
    """A fresh Postgres schema for this test (dropped at session end)."""
    return fresh_schema()
