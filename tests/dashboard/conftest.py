"""Browser tests drive Debian's Chromium (``/usr/bin/chromium``, installed by
``.ci/run``): Playwright's own browser download is not reachable here."""

from __future__ import annotations

from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": CHROMIUM}
