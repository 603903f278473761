"""One set of environment variables (docs/operations.md#environment): the
library reads ``ALKSTORE_DSN`` as the command line does, and the old name
``ALKSTORE_PG_DSN`` still works, saying it is deprecated."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

import alkstore.sync
from tests.backends import PG_DSN, PG_TEST_SCHEMA_PREFIX


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"{PG_TEST_SCHEMA_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_open_postgres_without_a_dsn_reads_alkstore_dsn(
    monkeypatch: pytest.MonkeyPatch, schema: str
) -> None:
    monkeypatch.setenv("ALKSTORE_DSN", PG_DSN)
    monkeypatch.setenv("ALKSTORE_PG_DSN", "postgresql://nobody@127.0.0.1:1/none")  # not read
    options = alkstore.sync.PostgresOptions(schema=schema)
    with alkstore.sync.open_postgres(options=options) as store:
        assert store.queue("q").enqueue(1) >= 1


def test_the_old_name_still_works_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, schema: str
) -> None:
    monkeypatch.delenv("ALKSTORE_DSN", raising=False)
    monkeypatch.setenv("ALKSTORE_PG_DSN", PG_DSN)
    options = alkstore.sync.PostgresOptions(schema=schema)
    with (
        pytest.warns(FutureWarning, match=r"\$ALKSTORE_PG_DSN is deprecated: set \$ALKSTORE_DSN"),
        alkstore.sync.open_postgres(options=options) as store,
    ):
        assert store.queue("q").enqueue(1) >= 1
