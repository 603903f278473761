from __future__ import annotations

import pytest

# Filled from the exploring tests' reports; printed at the end of the run.
# The figures travel in each report's user_properties, so that under
# pytest-xdist they reach the controlling process, which prints the summary.
EXPLORED: dict[str, str] = {}
_KEY = "alkstore_explored"


def explored(request: pytest.FixtureRequest, name: str, figures: str) -> None:
    """Record what a test explored, for the run's summary."""
    request.node.user_properties.append((_KEY, (name, figures)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == _KEY and report.when == "call":
            name, figures = value
            EXPLORED[name] = figures


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
