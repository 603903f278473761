from __future__ import annotations

import pytest

# Filled by the exhaustive tests; printed at the end of the run.
EXPLORED: dict[str, str] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--alkstore-seed",
        type=int,
        default=None,
        help="replay one simulation seed exactly (printed by a failing simulation)",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if EXPLORED:
        terminalreporter.section("alkstore exhaustive exploration")
        for name, line in sorted(EXPLORED.items()):
            terminalreporter.write_line(f"{name}: {line}")
