"""How values read on a page: instants, ages, durations, payloads, and the
throughput chart (an SVG drawn here, so the page needs no script for it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import orjson

from ..protocol.values.names import outbox_of
from ..protocol.values.timeconv import human_duration
from ..protocol.values.types import Throughput
from ..readouts import shown_state

# Spans as ``3d 4h``, ``12m 5s``, ``0.4s``: one formatter for the CLI and the dashboard.
duration = human_duration


def span(value: timedelta | None) -> str:
    return "-" if value is None else duration(value.total_seconds())


def when(at: datetime | None) -> str:
    """An instant in UTC, to the second: ``2026-12-03 07:45:00``."""
    return "-" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def iso(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def ago(at: datetime | None, now: datetime) -> str:
    """``5m 2s ago`` or ``in 3s``."""
    if at is None:
        return "-"
    delta = (now - at).total_seconds()
    return f"{duration(delta)} ago" if delta >= 0 else f"in {duration(-delta)}"


def brief_json(value: Any, limit: int = 80) -> str:
    shown = orjson.dumps(value).decode()
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def pretty_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def first_line(text: str | None, limit: int = 80) -> str:
    if not text:
        return ""
    line = text.splitlines()[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def queue_label(name: str) -> str:
    """A queue as operators know it: an outbox's queue by the outbox's name."""
    outbox = outbox_of(name)
    return name if outbox is None else f"{outbox} (outbox)"


def href(base: str, path: str, **query: object) -> str:
    """A link inside the dashboard (``base``: where it is mounted); query
    values that are None are left out."""
    params = {k: v for k, v in query.items() if v is not None and v != ""}
    return f"{base}{path}" + (f"?{urlencode(params)}" if params else "")


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    width: float
    finished_y: float
    finished_h: float
    dead_y: float
    dead_h: float
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    """A throughput chart's geometry: stacked bars (finished below, dead on
    top) in a ``width`` x ``height`` box."""

    width: int
    height: int
    bars: tuple[Bar, ...]
    peak: int
    total_finished: int
    total_dead: int
    label: str
    # The axes: the first bar's start and the last bar's end.
    since: datetime | None = None
    until: datetime | None = None


def chart(t: Throughput, width: int = 240, height: int = 40) -> Chart:
    n = t.buckets
    totals = [f + d for f, d in zip(t.finished, t.dead, strict=True)]
    peak = max(totals, default=0)
    slot = width / n if n else width
    bars = []
    for i, (f, d) in enumerate(zip(t.finished, t.dead, strict=True)):
        fh = 0.0 if peak == 0 else height * f / peak
        dh = 0.0 if peak == 0 else height * d / peak
        start = t.since + t.bucket * i
        title = f"{when(start)}: {f} finished, {d} dead"
        bars.append(
            Bar(
                x=round(i * slot + 0.5, 2),
                width=round(max(1.0, slot - 1.0), 2),
                finished_y=round(height - fh, 2),
                finished_h=round(fh, 2),
                dead_y=round(height - fh - dh, 2),
                dead_h=round(dh, 2),
                title=title,
            )
        )
    return Chart(
        width=width,
        height=height,
        bars=tuple(bars),
        peak=peak,
        total_finished=sum(t.finished),
        total_dead=sum(t.dead),
        label=f"last {duration((t.until - t.since).total_seconds())}, "
        f"per {duration(t.bucket.total_seconds())}",
        since=t.since,
        until=t.until,
    )


FILTERS = {
    "duration": duration,
    "span": span,
    "when": when,
    "iso": iso,
    "brief_json": brief_json,
    "pretty_json": pretty_json,
    "first_line": first_line,
    "queue_label": queue_label,
    "shown_state": shown_state,
}
