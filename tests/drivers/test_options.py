"""Engine options and driver choice are checked before anything is opened.

Invariant: an option of the wrong type or out of range raises
``InvalidArgument`` when the options object is made and again when a store
is opened with it (fields can change in between), never hangs or fails
later; a driver used under the other async library raises ``UsageError``
naming the module to use.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import trio

from alkstore import InvalidArgument, UsageError, io_asyncio, io_trio
from alkstore.io_trio import ListenerOptions, PostgresOptions, SqliteOptions, WatcherOptions
from tests.backends import PG_DSN


@pytest.mark.parametrize(
    "kwargs",
    [
        {"busy_timeout": -1},
        {"busy_timeout": "5"},
        {"busy_timeout": float("nan")},
        {"pragmas": {"bogus": "1"}},
        {"pragmas": {"synchronous": "SOMETIMES"}},
        {"pragmas": {"journal_mode": "DELETE"}},
        {"pragmas": {"busy_timeout": 10}},
        {"pragmas": {"cache_size": True}},
        {"pragmas": {"cache_size": "1; DROP TABLE x"}},
        {"pragmas": "synchronous=FULL"},
        {"pragmas": [("synchronous", "FULL")]},
        {"watcher": {"backstop": 1}},
        {"notification_retention": 0},
        {"housekeeping_interval": -5},
        {"housekeeping_interval": 0},
        {"readers": 0},
        {"readers": 1.5},
        {"readers": True},
    ],
)
def test_bad_sqlite_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        SqliteOptions(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fastest": 0},
        {"backstop": -1},
        {"use_inotify": "yes"},
        {"growth": 0.5},
        {"window": -1},
        {"give_up_after": float("inf")},
    ],
)
def test_bad_watcher_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        WatcherOptions(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pool_size": 0},
        {"pool_size": -3},
        {"pool_size": True},
        {"pool_size": 2.0},
        {"schema": "Bad-Schema"},
        {"schema": ""},
        {"schema": 5},
        {"connect_timeout": 0},
        {"commit_timeout": -1},
        {"dead_peer_timeout": 0},
        {"dead_peer_timeout": "10"},
        {"response_timeout": -1},
        {"response_timeout": float("nan")},
        {"listener": {"connect_timeout": 1}},
        {"housekeeping_interval": 0},
        {"housekeeping_interval": "10"},
    ],
)
def test_bad_postgres_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        PostgresOptions(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"connect_timeout": 0},
        {"reconnect_base": -1},
        {"reconnect_base": 2, "reconnect_cap": 1},
        {"probe_interval": 0},
        {"probe_timeout": -1},
        {"probe_timeout": None},
    ],
)
def test_bad_listener_options_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        ListenerOptions(**kwargs)


def test_good_overrides_are_accepted() -> None:
    SqliteOptions(pragmas={"synchronous": "FULL", "cache_size": -20000, "foreign_keys": "on"})
    SqliteOptions(busy_timeout=0, readers=1)
    PostgresOptions(pool_size=1, schema="my_app_queue")


async def test_options_changed_after_construction_are_checked_at_open(tmp_path: Path) -> None:
    """``PostgresOptions(pool_size=0)`` used to hang ``open_postgres`` forever."""
    pg = PostgresOptions()
    pg.pool_size = 0
    with trio.fail_after(5), pytest.raises(InvalidArgument):
        async with io_trio.open_postgres(PG_DSN, options=pg):
            pass
    sq = SqliteOptions()
    sq.busy_timeout = -1
    with pytest.raises(InvalidArgument):
        async with io_trio.open_sqlite(str(tmp_path / "a.db"), options=sq):
            pass
    assert not (tmp_path / "a.db").exists(), "a refused open created the file"


async def test_options_of_the_wrong_type_are_refused(tmp_path: Path) -> None:
    for opener, options in [
        (lambda o: io_trio.open_sqlite(str(tmp_path / "b.db"), options=o), {"busy_timeout": 1}),
        (lambda o: io_trio.open_sqlite(str(tmp_path / "b.db"), options=o), PostgresOptions()),
        (lambda o: io_trio.open_postgres(PG_DSN, options=o), SqliteOptions()),
        (lambda o: io_trio.open_postgres(PG_DSN, options=o), {"pool_size": 1}),
    ]:
        with pytest.raises(InvalidArgument):
            async with opener(options):
                pass
    with pytest.raises(InvalidArgument):
        async with io_trio.open_sqlite(5):  # type: ignore[arg-type]
            pass
    with pytest.raises(InvalidArgument):
        async with io_trio.open_postgres(5):  # type: ignore[arg-type]
            pass


def test_the_trio_driver_under_asyncio_says_which_module_to_use(tmp_path: Path) -> None:
    async def main() -> None:
        async with io_trio.open_sqlite(str(tmp_path / "c.db")):
            pass

    with pytest.raises(UsageError, match=r"use alkstore\.io_asyncio"):
        asyncio.run(main())


def test_the_asyncio_driver_under_trio_says_which_module_to_use(tmp_path: Path) -> None:
    async def main() -> None:
        async with io_asyncio.open_postgres(PG_DSN):
            pass

    with pytest.raises(UsageError, match=r"use alkstore\.io_trio"):
        trio.run(main)
