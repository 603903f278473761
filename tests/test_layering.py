"""The architecture's rules, checked on the source.

- protocol/ and engines/ are pure: they import no IO, async or clock module;
- imports point down: protocol imports neither engines nor drivers, engines
  import no driver;
- drivers and shared runners hold no SQL text: every statement is the engine's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "alkstore"
FORBIDDEN_IN_PURE = {
    "trio", "asyncio", "sqlite3", "psycopg", "psycopg_pool", "anyio",
    "threading", "socket", "time", "select", "selectors", "subprocess",
}  # fmt: skip
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|PRAGMA)\b")


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imported_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            names.add(prefix)
    return names


@pytest.mark.parametrize("package", ["protocol", "engines"])
def test_pure_layers_import_no_io(package: str) -> None:
    offenders = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in modules(package)
        for name in imported_names(p)
        if name.split(".")[0] in FORBIDDEN_IN_PURE
    }
    assert not offenders


def test_protocol_imports_nothing_above_it() -> None:
    for path in modules("protocol"):
        for name in imported_names(path):
            assert not re.match(r"^\.\.+(engines|runner|api|io_)", name), (path, name)
            assert not name.startswith("alkstore.") or name.startswith("alkstore.protocol"), (
                path,
                name,
            )


def test_engines_import_no_driver_or_facade() -> None:
    for path in modules("engines"):
        for name in imported_names(path):
            assert not re.search(r"(runner|api|io_trio|io_asyncio)", name), (path, name)


@pytest.mark.parametrize("package", ["io_trio", "io_asyncio", "runner", "api"])
def test_no_sql_outside_engines(package: str) -> None:
    offenders = []
    for path in modules(package):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and SQL.search(node.value)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value[:60]!r}")
    assert not offenders
