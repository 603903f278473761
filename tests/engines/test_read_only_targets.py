"""Rule: a read-only store's connections are read-only before any statement
runs: SQLite opens ``mode=ro`` URIs, whatever form the path came in;
Postgres sessions start with ``default_transaction_read_only`` on, beside
whatever ``options`` the DSN sets; and their set-up never writes."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from psycopg.conninfo import conninfo_to_dict

from alkstore.engines.sqlite import control
from alkstore.runner.postgres.opening import read_only_sessions
from alkstore.runner.sqlite.file import file_path, read_only_uri


@pytest.mark.parametrize(
    "target",
    ["app.db", "/data/my app?#.db", "file:/data/app.db", "file:/data/app.db?cache=shared&mode=rwc"],
)
def test_every_sqlite_target_opens_mode_ro_on_the_same_file(target: str) -> None:
    uri = read_only_uri(target)
    parts = urlsplit(uri)
    assert uri.startswith("file:") and parse_qs(parts.query)["mode"] == ["ro"]
    plain = target.removeprefix("file:").split("?")[0] if target.startswith("file:") else target
    assert file_path(uri) == os.path.abspath(plain)
    if "cache=shared" in target:
        assert parse_qs(parts.query)["cache"] == ["shared"]


def test_the_read_only_set_up_leaves_the_journal_mode_and_refuses_writes(tmp_path: Path) -> None:
    statements = control.setup_statements(1.0, {"synchronous": "FULL"}, read_only=True)
    assert not any("journal_mode" in s for s in statements)
    assert control.QUERY_ONLY in statements and "PRAGMA synchronous = FULL" in statements
    assert any("journal_mode" in s for s in control.setup_statements(1.0, {}))
    path = tmp_path / "plain.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    ro = sqlite3.connect(read_only_uri(str(path)), uri=True, isolation_level=None)
    try:
        for statement in statements:
            ro.execute(statement)
        with pytest.raises(sqlite3.OperationalError):
            ro.execute("INSERT INTO t VALUES (1)")
    finally:
        ro.close()
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["plain.db"]


@pytest.mark.parametrize(
    ("dsn", "kept"),
    [
        ("postgresql://app@db/app", None),
        ("host=db dbname=app options='-c search_path=app'", "-c search_path=app"),
        ("postgresql://app@db/app?options=-c%20statement_timeout%3D5s", "-c statement_timeout=5s"),
    ],
)
def test_postgres_sessions_start_read_only_and_keep_the_dsns_options(
    dsn: str, kept: str | None
) -> None:
    got = conninfo_to_dict(read_only_sessions(dsn))
    assert got["options"].endswith("-c default_transaction_read_only=on")
    assert got["host"] == "db" and got["dbname"] == "app"
    if kept is not None:
        assert got["options"].startswith(kept)
