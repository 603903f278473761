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


# -- who may import whom ----------------------------------------------------------------
# The layers, bottom to top (docs/internals.md, "Layers"): a module imports
# only modules of its own layer and of the layers below it. Every other
# package (cli, dashboard, otel, testing, sync, shapes, demo) is the top.
# Function-level and TYPE_CHECKING imports count: a cycle through them is
# a cycle all the same.
LAYERS = [
    ("protocol",),
    ("engines",),
    ("runner",),
    ("api.core",),
    ("services",),
    ("api",),
    ("open",),
    ("io_trio", "io_asyncio"),
]


def _module_graph() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (a package's
    ``__init__`` neither imports nor is imported here: it re-exports)."""
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        if p.name == "__init__.py":
            continue
        base = m.split(".")[:-1]
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    b = base[: len(base) - (node.level - 1)]
                    mod = ".".join(b + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
            for target in targets:
                if target.split(".")[0] != "alkstore":
                    continue
                r = resolve(target)
                if r and r != m and mods[r].name != "__init__.py":
                    edges[m].add(r)
    return edges


def _layer(module: str) -> int:
    """The rank of ``module``'s layer: the longest package it is in (api.core
    is not api); the top for any other."""
    rest = module.removeprefix("alkstore.")
    found = [
        (len(package), rank)
        for rank, packages in enumerate(LAYERS)
        for package in packages
        if rest == package or rest.startswith(package + ".")
    ]
    return max(found)[1] if found else len(LAYERS)


def test_imports_point_down_the_layers() -> None:
    """Nothing below the public ``Store`` imports ``Store``, runner imports no
    api, the openers are the only ones that know runner, api and services
    together, ... : every import goes to its own layer or below."""
    offenders = sorted(
        f"{a} -> {b}"
        for a, targets in _module_graph().items()
        for b in targets
        if _layer(b) > _layer(a)
    )
    assert offenders == []


def test_no_import_cycles() -> None:
    """No module imports, through any chain, a module that imports it back."""
    edges = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    assert cycles == []


def test_the_layers_named_exist() -> None:
    for packages in LAYERS:
        for package in packages:
            assert (ROOT / package.replace(".", "/")).is_dir(), package
