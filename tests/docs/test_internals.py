"""docs/internals.md names only things that exist.

Its rules table cites tests as ``tests/<file>.py`` followed by the names of
test functions in that file, and names the rule fragments and the model's
and the core's functions. A renamed or deleted test, fragment or function
fails here, so the table cannot silently point at nothing; and every rule
of ``alkstore/engines/rules.py`` must appear in it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

from alkstore.engines.rules import Rules
from alkstore.protocol.plans import claim, housekeeping, locks, queues, schedule, streams, worker
from alkstore.testing import invariants
from tests import model

from .blocks import blocks

ROOT = Path(__file__).resolve().parents[2]
# Fenced code blocks out: their triple backticks would pair with inline ones.
DOC = re.sub(r"```.*?```", "", (ROOT / "docs" / "internals.md").read_text(), flags=re.S)
TICKED = re.compile(r"`([^`]+)`")


@functools.cache
def functions_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def cited_tests() -> list[tuple[str, str]]:
    """(file, test name) for every test the page cites, in order."""
    cited = []
    current: str | None = None
    for token in TICKED.findall(DOC):
        path, _, name = token.partition("::")
        if path.startswith("tests/") and path.endswith(".py"):
            current = path
            if name:
                cited.append((path, name))
        elif re.fullmatch(r"test_\w+", token):
            assert current is not None, f"{token} is cited before any test file"
            cited.append((current, token))
    return cited


def test_every_cited_test_exists() -> None:
    cited = cited_tests()
    assert len(cited) > 80
    missing = []
    for path, name in cited:
        file = ROOT / path
        if not file.is_file() or name not in functions_in(file):
            missing.append(f"{path}::{name}")
    assert not missing, missing


def test_every_rule_fragment_is_in_the_table() -> None:
    rules = {
        name
        for name, value in vars(Rules).items()
        if not name.startswith("_") and (name.isupper() or inspect.isfunction(value))
    }
    assert len(rules) > 30
    named = {word for token in TICKED.findall(DOC) for word in re.findall(r"\w+", token)}
    assert rules - named == set()


def test_the_model_and_core_functions_named_exist() -> None:
    owners = {
        "LiveJob": model.LiveJob,
        "QueueModel": model.QueueModel,
        "LockModel": model.LockModel,
        "LockState": model.LockState,
        "ScheduleState": model.ScheduleState,
        "StreamModel": model.StreamModel,
        "Ledger": invariants.Ledger,
        "claim": claim,
        "schedule": schedule,
        "queues": queues,
        "streams": streams,
        "locks": locks,
        "housekeeping": housekeeping,
        "worker": worker,
    }
    checked = 0
    for token in TICKED.findall(DOC):
        owner, dot, attr = token.partition(".")
        if dot and owner in owners and attr.isidentifier() and attr != "py":
            assert hasattr(owners[owner], attr), token
            checked += 1
    assert checked > 15


def test_the_plan_shown_is_the_cores_own() -> None:
    """The plan the page drives by hand is ``claim.release`` as written (its
    docstring aside), so the page cannot show a plan the core no longer has."""
    (block,) = [b for b in blocks(ROOT / "docs" / "internals.md") if b.lang == "python"]

    def release_of(source: str) -> str:
        tree = ast.parse(source)
        (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "release"]
        if ast.get_docstring(node) is not None:
            node.body = node.body[1:]
        return ast.dump(node)

    core = (ROOT / "alkstore" / "protocol" / "plans" / "claim.py").read_text()
    assert release_of(block.code) == release_of(core)
