"""What the command line's tests share: a database of each engine the run
selects, and the real ``alkstore`` command run on it in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import trio

from tests.backends import BACKENDS, PG_DSN, selected_backends

ROOT = Path(__file__).resolve().parents[2]
ENGINES = sorted({BACKENDS[n].engine for n in selected_backends(driver="trio")})


@dataclass(frozen=True)
class Db:
    engine: str
    location: str  # a file path, or a Postgres schema name

    @property
    def args(self) -> list[str]:
        if self.engine == "sqlite":
            return ["--db", self.location]
        return ["--dsn", PG_DSN, "--schema", self.location]

    def open(self, **kw: Any) -> Any:
        return BACKENDS[f"{self.engine}-trio"].open(self.location, **kw)


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def doc(self) -> Any:
        assert self.code == 0, self.err
        return orjson.loads(self.out)


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
    """``python -m alkstore ARGS`` in a subprocess, on this tree."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-m", "alkstore", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=60,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def new_db(engine: str, tmp_path: Path) -> Db:
    return Db(engine, BACKENDS[f"{engine}-trio"].new_location(tmp_path))


def make(db: Db, fill: Any) -> Db:
    async def main() -> None:
        async with db.open() as store:
            await fill(store)

    trio.run(main)
    return db


def drop(db: Db) -> None:
    if db.engine == "postgres":
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{db.location}" CASCADE')


def by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in items}


def documented(heading: str) -> Any:
    """The last JSON block under ``heading`` in docs/cli.md, parsed (a
    ``"..."`` standing for a value is a string, so the examples parse)."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text.split(f"### {heading}", 1)[1].split("\n### ", 1)[0]
    return orjson.loads(section.split("```json\n")[-1].split("```", 1)[0])
