"""Draw a ``bench/soak.py`` result as a PNG.

    bench/.peers/bin/python bench/soak_chart.py SOAK.json SOAK.png

Run by the soak under the peers' interpreter, which has matplotlib. Three
panels over time: jobs finished per second (and offered), the claim latency
p50/p99 (ms, log scale), and the sizes: on Postgres each alkstore table's
``pg_total_relation_size`` with the jobs table's dead tuples on a second
axis, on SQLite the file, the WAL's peak and the free pages.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

MIB = 2**20


def draw(result: dict[str, Any], out: Path) -> None:
    c = result["config"]
    fig, (rate_ax, lat_ax, size_ax) = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    engine = {"postgres": "PostgreSQL", "sqlite": "SQLite"}[result["engine"]]
    fig.suptitle(
        f"alkstore soak on {engine}: {result['finished']:,} jobs, "
        f"{c['workers']} worker processes ({result['commit']})"
    )
    windows = [w for w in result["windows"] if w["done"] or w["offered"]]
    mid = [w["start_s"] + c["sample"] / 2 for w in windows]
    rate_ax.plot(mid, [w["rate"] for w in windows], marker="o", label="finished")
    rate_ax.plot(mid, [w["offered"] / c["sample"] for w in windows], ls="--", label="offered")
    rate_ax.set_ylabel("jobs/s")
    rate_ax.set_ylim(bottom=0)
    rate_ax.legend(loc="lower left")
    with_lat = [w for w in windows if w["claim_p50_ms"] is not None]
    at = [w["start_s"] + c["sample"] / 2 for w in with_lat]
    lat_ax.plot(at, [w["claim_p50_ms"] for w in with_lat], marker="o", label="p50")
    lat_ax.plot(at, [w["claim_p99_ms"] for w in with_lat], marker="o", label="p99")
    lat_ax.set_yscale("log")
    lat_ax.set_ylabel("claim latency (ms)")
    lat_ax.legend(loc="upper left")
    samples = result["samples"]
    t = [s["t"] for s in samples]
    if result["engine"] == "postgres":
        names = sorted(
            {n for s in samples for n in s["tables"]},
            key=lambda n: -max(s["tables"].get(n, {}).get("bytes", 0) for s in samples),
        )
        for name in names[:6]:
            size_ax.plot(
                t, [s["tables"].get(name, {}).get("bytes", 0) / MIB for s in samples], label=name
            )
        dead_ax = size_ax.twinx()
        dead_ax.plot(
            t,
            [s["tables"].get("jobs", {}).get("dead", 0) or 0 for s in samples],
            color="grey",
            ls=":",
            label="jobs: dead tuples",
        )
        dead_ax.set_ylabel("dead tuples (jobs)")
        dead_ax.set_ylim(bottom=0)
        dead_ax.legend(loc="upper right")
        size_ax.set_ylabel("total relation size (MiB)")
    else:
        size_ax.plot(t, [s["file_bytes"] / MIB for s in samples], label="database file")
        size_ax.plot(t, [s["wal_peak_bytes"] / MIB for s in samples], label="WAL (peak)")
        free_ax = size_ax.twinx()
        free_ax.plot(
            t, [s["free_pages"] for s in samples], color="grey", ls=":", label="free pages"
        )
        free_ax.set_ylabel("free pages")
        free_ax.set_ylim(bottom=0)
        free_ax.legend(loc="upper right")
        size_ax.set_ylabel("MiB")
    size_ax.set_ylim(bottom=0)
    size_ax.legend(loc="upper left", fontsize="small")
    size_ax.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    draw(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
