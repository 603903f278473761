"""The public surface is seven modules and their ``__all__``, as docs/api.md
lists them; everything else is internal.

- each public module's ``__all__`` is exactly the list in docs/api.md, and
  every name in it imports;
- every class, function, method and property reachable from those names
  has a docstring (what it promises);
- the README, the docs, the examples and the tests that use alkstore as a
  user would import it only through the six modules, and only names of
  their ``__all__``. The tests of internals (the folders below, and the
  white-box imports listed in ``WHITE_BOX``) may reach further.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.blocks import blocks as doc_blocks
from tests.docs.blocks import pages as doc_pages

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
PUBLIC = (
    "alkstore", "alkstore.io_trio", "alkstore.io_asyncio", "alkstore.sync", "alkstore.testing",
    "alkstore.otel", "alkstore.dashboard",
)  # fmt: skip

# Test folders whose subject is the internals themselves: the pure core, the
# engines, the model and property tests, the simulation, the fuzz targets.
INTERNAL_TEST_DIRS = {"protocol", "engines", "property", "simulation", "fuzz"}
# Tests elsewhere that reach into one internal module on purpose, by file name
# (so a file keeps its entry wherever it moves) -> the modules it may import.
WHITE_BOX: dict[str, set[str]] = {
    # the command line's entry point, run in-process
    "test_demo.py": {"alkstore.cli", "alkstore.demo"},
    # the docs' `alkstore ...` commands, parsed by the real click commands
    "test_commands.py": {"alkstore.cli"},
    # what the CLI and the dashboard derive alike, bounds included
    "test_readouts.py": {"alkstore.readouts"},
    # every command, in-process, through its failure modes
    "test_no_traceback.py": {"alkstore.cli"},
    # the reference model: an oracle over the core's value types and rules
    "model.py": {
        "alkstore.protocol.values.backoff", "alkstore.protocol.values.codec",
        "alkstore.protocol.values.timeconv", "alkstore.protocol.values.types",
        "alkstore.protocol.values.attempts",
    },
    # an upgrade test builds its old database from the released migration
    "test_store.py": {"alkstore.engines.sqlite", "alkstore.engines.postgres"},
    # plays the next release: this code with its claim generation one higher
    "newer.py": {"alkstore.protocol.values.generation"},
    # the runtime seam itself, on both drivers
    "test_shield.py": {"alkstore.io_trio.runtime", "alkstore.io_asyncio.runtime"},
    "test_runtime_delivery.py": {"alkstore.io_trio.runtime", "alkstore.io_asyncio.runtime"},
    # docs/internals.md cites internal rules, plans and tests: they must exist
    "test_internals.py": {
        "alkstore.engines.rules",
        "alkstore.protocol.plans.claim", "alkstore.protocol.plans.schedule",
        "alkstore.testing.invariants", "alkstore.protocol.plans.housekeeping",
        "alkstore.protocol.plans.locks", "alkstore.protocol.plans.queues",
        "alkstore.protocol.plans.streams", "alkstore.protocol.plans.worker",
    },
    # a read plan of the history table, which no API returns rows of
    "history.py": {"alkstore.protocol.values.codec", "alkstore.protocol.plan"},
    # wrap the worker's batch ack to log or record what it acked
    "test_work.py": {"alkstore.services.worker.settler"},
    "test_cross_process.py": {"alkstore.services.worker.settler"},
    "helper.py": {"alkstore.services.worker.settler"},
    "crash_worker.py": {"alkstore.services.worker.settler"},
    # deafen the worker's cancel channel, so only its heartbeat can find the cancel
    "test_cancel_running.py": {"alkstore.services.worker.worker"},
    # the watcher's own connection and its busy timeout
    "test_watcher.py": {
        "alkstore.runner.sqlite.conn", "alkstore.runner.sqlite.watcher",
        "alkstore.runner.sqlite.opening", "alkstore.runner.sqlite.inotify",
    },
    # the autocheckpoint size the WAL is bounded by
    "test_wal_bounded.py": {"alkstore.engines.sqlite.control"},
    # libpq pipelining and LISTEN on one raw connection
    "test_pipeline.py": {"alkstore.protocol.plan", "alkstore.runner.postgres.conn"},
    # the worker's one-statement claim against its step-by-step claim
    "test_claim_at_once.py": {
        "alkstore.protocol.plans.worker", "alkstore.protocol.values.timeconv",
    },
    # the prepared-statement bookkeeping, and one-statement plans on a raw connection
    "test_prepared.py": {
        "alkstore.protocol.plan", "alkstore.runner.postgres.conn",
        "alkstore.runner.postgres.prepared",
    },
    "test_listen_race.py": {"alkstore.runner.postgres.conn"},
    # a cancelled round trip on one raw connection, before the pool drops it
    "test_cancellation.py": {
        "alkstore.io_trio.runtime", "alkstore.protocol.plan", "alkstore.runner.postgres.conn",
    },
    # the channel identifier mapping
    "test_names.py": {"alkstore.engines.postgres.names"},
    # a probe on a stream's internal wake channel
    "test_reconnect.py": {"alkstore.protocol.values.names"},
    # a fixed claim-ahead, so a drain finds jobs waiting for a slot
    "test_drain.py": {"alkstore.protocol.machines.worker"},
    # the grace periods the shielded settles and releases add
    "test_settle_bound.py": {"alkstore.protocol.plans.locks", "alkstore.protocol.machines.worker"},
    # what `alkstore worker --metrics-port` serves, served and scraped
    "test_prometheus.py": {"alkstore.cli.metrics"},
}  # fmt: skip
# Outside tests/: what must use the public surface only.
USER_CODE = [ROOT / "fuzz" / "fuzz_api.py"]


def documented() -> dict[str, list[str]]:
    """docs/api.md's names per module: ``- `name`: ...`` lines under a
    ``## `module``` heading."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in API_DOC.read_text().splitlines():
        heading = re.match(r"^## `([\w.]+)`$", line)
        if heading:
            current = out.setdefault(heading.group(1), [])
        elif line.startswith("## "):
            current = None
        elif current is not None and (item := re.match(r"^- `(\w+)`: \S", line)):
            current.append(item.group(1))
    return out


def test_api_md_lists_exactly_each_modules_all() -> None:
    doc = documented()
    assert sorted(doc) == sorted(PUBLIC)
    for name in PUBLIC:
        module = importlib.import_module(name)
        listed = doc[name]
        assert len(listed) == len(set(listed)), f"{name}: a name listed twice"
        assert len(module.__all__) == len(set(module.__all__)), f"{name}.__all__ repeats a name"
        assert sorted(module.__all__) == sorted(listed), name


@pytest.mark.parametrize("module_name", PUBLIC)
def test_every_name_in_all_imports(module_name: str) -> None:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        namespace: dict[str, object] = {}
        exec(f"from {module_name} import {name}", namespace)
        assert namespace[name] is getattr(module, name)


def _slug(heading: str) -> str:
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_api_md_links_reach_a_page_and_heading() -> None:
    for target, anchor in re.findall(r"\]\(([\w.-]+\.md)(?:#([\w-]+))?\)", API_DOC.read_text()):
        page = ROOT / "docs" / target
        assert page.exists(), target
        if anchor:
            headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{target}#{anchor}"


# -- docstrings ----------------------------------------------------------------


def _own_doc(obj: object) -> str | None:
    if isinstance(obj, property):
        return obj.fget.__doc__ if obj.fget is not None else None
    if isinstance(obj, staticmethod | classmethod):
        return obj.__func__.__doc__
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__")
        # A dataclass without a docstring gets its signature as one.
        if doc and doc.startswith(f"{obj.__name__}("):
            return None
        return doc
    return getattr(obj, "__doc__", None)


def _documented(cls: type, attr: str) -> object:
    """``cls.attr`` as the nearest class in its MRO that documents it
    defines it: an override keeps the promise of the method it overrides."""
    owners = [k for k in cls.__mro__ if attr in vars(k)]
    for klass in owners:
        if (_own_doc(vars(klass)[attr]) or "").strip():
            return vars(klass)[attr]
    return vars(owners[0])[attr]


def _public_api() -> dict[str, object]:
    """Every class and function of the surface, and the public methods and
    properties of its classes (those alkstore defines, inherited ones
    included), by qualified name."""
    found: dict[str, object] = {}
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue  # constants: documented in docs/api.md
            found[f"{module_name}.{name}"] = obj
            if not inspect.isclass(obj):
                continue
            for klass in obj.__mro__:
                if not klass.__module__.startswith("alkstore"):
                    continue
                for attr, member in vars(klass).items():
                    if attr.startswith("_"):
                        continue
                    if inspect.isfunction(member) or isinstance(
                        member, property | staticmethod | classmethod
                    ):
                        found.setdefault(f"{module_name}.{name}.{attr}", _documented(obj, attr))
    return found


def test_every_public_class_function_method_and_property_has_a_docstring() -> None:
    api = _public_api()
    assert len(api) > 150  # the walk still reaches the classes' members
    missing = sorted(name for name, obj in api.items() if not (_own_doc(obj) or "").strip())
    assert missing == []


# -- imports of alkstore outside the internals ----------------------------------


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _alkstore_imports(tree: ast.AST) -> list[tuple[str, str | None]]:
    """(module, name) for every import of alkstore; name None for ``import m``.
    ``from package import submodule`` counts as importing the submodule."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names if a.name.split(".")[0] == "alkstore"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "alkstore":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.append((sub, None) if _is_module(sub) else (node.module, alias.name))
    return out


def _violations(tree: ast.AST, allowed: set[str]) -> list[str]:
    bad = []
    for module_name, name in _alkstore_imports(tree):
        if module_name in allowed:
            continue
        if module_name not in PUBLIC:
            bad.append(f"imports internal module {module_name}")
        elif name is not None and name != "*":
            module: ModuleType = importlib.import_module(module_name)
            if name not in module.__all__:
                bad.append(f"imports {name} from {module_name}, not in its __all__")
    return bad


def _user_test_files() -> list[Path]:
    files = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        parts = path.relative_to(ROOT / "tests").parts
        if len(parts) > 1 and parts[0] in INTERNAL_TEST_DIRS:
            continue
        files.append(path)
    return files


def test_tests_of_the_contract_import_only_the_public_surface() -> None:
    files = _user_test_files()
    assert any(p.parent.name == "contract" for p in files)
    bad = [
        f"{path.relative_to(ROOT)}: {problem}"
        for path in files
        for problem in _violations(ast.parse(path.read_text()), WHITE_BOX.get(path.name, set()))
    ]
    assert bad == []


def test_examples_and_fuzz_api_import_only_the_public_surface() -> None:
    files = [*USER_CODE, *sorted((ROOT / "examples").rglob("*.py"))]
    bad = [
        f"{path.relative_to(ROOT)}: {problem}"
        for path in files
        for problem in _violations(ast.parse(path.read_text()), set())
    ]
    assert bad == []


# The blocks of the docs about internals on purpose: docs/testing.md builds a
# broken engine, docs/internals.md drives a plan by hand; nothing else may.
DOC_WHITE_BOX = {
    "testing.md": {"alkstore.engines.sqlite", "alkstore.protocol.plan"},
    "internals.md": {
        "alkstore.engines.sqlite",
        "alkstore.protocol.dialect",
        "alkstore.protocol.plan",
        "alkstore.protocol.values.types",
    },
}


def _parse_snippet(code: str) -> ast.AST:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        return compile(code, "<doc>", "exec", flags=flags)  # type: ignore[no-any-return]
    except SyntaxError:
        # A fragment (an elided body, say): its import lines alone.
        lines = [ln.strip() for ln in code.splitlines() if re.match(r"\s*(from|import) ", ln)]
        return ast.parse("\n".join(lines))


def test_readme_and_docs_import_only_the_public_surface() -> None:
    bad = []
    seen = 0
    for page in doc_pages():
        for block in doc_blocks(page):
            if block.lang != "python":
                continue
            tree = _parse_snippet(block.code)
            seen += len(_alkstore_imports(tree))
            allowed = DOC_WHITE_BOX.get(page.name, set())
            bad += [f"{page.relative_to(ROOT)}: {p}" for p in _violations(tree, allowed)]
    assert seen > 10  # the snippets are found and parsed
    assert bad == []


def test_lock_errors_belong_to_the_taxonomy() -> None:
    import alkstore

    assert issubclass(alkstore.LockLost, alkstore.AlkstoreError)
    assert issubclass(alkstore.LockTimeout, alkstore.AlkstoreError)
    assert issubclass(alkstore.LockTimeout, TimeoutError)  # except TimeoutError still works
    errors = [
        getattr(alkstore, n)
        for n in alkstore.__all__
        if inspect.isclass(getattr(alkstore, n)) and issubclass(getattr(alkstore, n), Exception)
    ]
    assert all(issubclass(e, alkstore.AlkstoreError) for e in errors)
    assert all(e.__module__ == "alkstore" for e in errors)  # as users import them
    assert {e.__name__ for e in errors} <= set(vars(importlib.import_module(
        "alkstore.protocol.values.errors")))  # one home: the taxonomy's module


def test_errors_and_handles_report_the_module_users_import() -> None:
    """A traceback names ``alkstore.DatabaseError``, not the internal module
    that defines it; the values (dataclasses) keep theirs, and every public
    class's annotations still resolve (``typing.get_type_hints``, which
    FastAPI and pydantic call on them)."""
    import dataclasses
    import typing

    import alkstore

    for name in alkstore.__all__:
        obj = getattr(alkstore, name)
        if not isinstance(obj, type):
            continue
        typing.get_type_hints(obj)
        if dataclasses.is_dataclass(obj):
            continue
        assert obj.__module__ == "alkstore", name
    assert repr(alkstore.DatabaseError) == "<class 'alkstore.DatabaseError'>"
