from __future__ import annotations

from datetime import timedelta

from ..protocol.values.timeconv import check_seconds


def check_timeout(seconds: float | timedelta) -> float:
    return check_seconds(seconds, "timeout", allow_zero=True)
