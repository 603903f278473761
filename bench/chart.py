"""Draw a ``bench/suite.py`` result as a PNG.

    bench/.peers/bin/python bench/chart.py RESULT.json RESULT.png

Run by the suite under the peers' interpreter, which has matplotlib (pinned in
``bench/peers.txt``). One row of panels per engine: throughput per workload
(jobs/s, log scale, the median with the range as an error bar), the latency
p50/p99 (ms), the idle worker's CPU (% of a core, log scale) and the worker's
resident set after the memory workload (MB).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ENGINES = (("sqlite", "SQLite"), ("postgres", "PostgreSQL"))
ORDER = (
    "alkstore trio",
    "alkstore asyncio",
    "floor",
    "honker",
    "huey",
    "huey-normal",
    "pgqueuer",
    "procrastinate",
)
COLORS = {
    "alkstore trio": "#1f5fa8",
    "alkstore asyncio": "#5b9bd5",
    "floor": "#9a9a9a",
    "honker": "#d9822b",
    "huey": "#7aa33c",
    "huey-normal": "#b5d77f",  # huey at alkstore's durability (synchronous=NORMAL)
    "pgqueuer": "#b0413e",
    "procrastinate": "#8064a2",
}
ROWS = (
    "enqueue-single",
    "enqueue-concurrent",
    "enqueue-batch",
    "process",
    "process x4",
    "process-batch",
    "process-batch x4",
    "process-sleep",
)


def grouped(
    ax: Any,
    groups: list[str],
    cells: dict[tuple[str, str, str], Any],
    metric_rows: Any,
    systems: list[str],
    log: bool,
) -> None:
    width = 0.8 / max(1, len(systems))
    for k, system in enumerate(systems):
        xs, ys, lo, hi = [], [], [], []
        for i, (row, metric) in enumerate(metric_rows):
            c = cells.get((system, row, metric))
            if not c or c["median"] is None:
                continue
            xs.append(i - 0.4 + width * (k + 0.5))
            ys.append(c["median"])
            lo.append(c["median"] - c["min"])
            hi.append(c["max"] - c["median"])
        if xs:
            ax.bar(
                xs,
                ys,
                width,
                yerr=[lo, hi],
                capsize=2,
                label=system,
                color=COLORS.get(system),
                error_kw={"elinewidth": 0.8},
            )
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    data = json.loads(src.read_text())
    meta = data.get("meta", {})
    engines = [(e, t) for e, t in ENGINES if any(c["engine"] == e for c in data["cells"])]
    fig, axes = plt.subplots(
        len(engines),
        4,
        figsize=(19, 4.8 * len(engines)),
        gridspec_kw={"width_ratios": [3, 1, 0.7, 0.7]},
        squeeze=False,
    )
    for (engine, title), (left, right, idle, memory) in zip(engines, axes, strict=True):
        cells = {
            (c["system"], c["row"], c["metric"]): c for c in data["cells"] if c["engine"] == engine
        }
        systems = [s for s in ORDER if any(k[0] == s for k in cells)]
        rows = [r for r in ROWS if any(k[1] == r and k[2] == "rate" for k in cells)]
        grouped(left, rows, cells, [(r, "rate") for r in rows], systems, log=True)
        left.set_title(f"{title}: throughput (jobs/s, log scale; median, range)")
        lat = [("latency", "p50_ms"), ("latency", "p99_ms")]
        grouped(right, ["p50", "p99"], cells, lat, systems, log=True)
        right.set_title(f"{title}: latency at 50% load (ms)")
        grouped(idle, ["idle"], cells, [("idle", "cpu_pct")], systems, log=True)
        idle.set_title(f"{title}: idle worker CPU\n(% of a core, log scale)", fontsize=10)
        memory_jobs = data["settings"].get("memory_jobs", 0)
        grouped(memory, ["memory"], cells, [("memory", "rss_end_mb")], systems, log=False)
        memory.set_title(f"{title}: worker RSS (MB)\nafter {memory_jobs:,} jobs", fontsize=10)
    dirty = " + uncommitted" if meta.get("uncommitted_files") else ""
    fig.suptitle(
        f"alkstore benchmarks, {meta.get('date', '')[:10]}, {meta.get('commit', '')}"
        f"{dirty}; {data['settings']['jobs']:,} jobs, {data['settings']['rounds']}"
        " round(s)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(dst, dpi=90)


if __name__ == "__main__":
    main()
