"""The soak's picture: client throughput, each replica's resident memory,
and the faults, on one time axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: A colour per fault kind.
COLOURS = {"rolling_restart": "tab:blue", "kill_replica": "tab:red",
           "kill_master": "tab:purple", "stop_master": "tab:orange",
           "kill_redis_replica": "tab:pink", "cut_connections": "tab:green",
           "restart_cluster": "tab:brown"}


def _faults(ax: Any, report: Dict[str, Any], label: bool) -> None:
    t0 = report["started"]
    seen = set()
    for f in report["faults"]:
        kind = f["kind"]
        ax.axvspan(f["t0"] - t0, max(f["t1"] - t0, f["t0"] - t0 + 1), alpha=0.25,
                   color=COLOURS[kind], label=kind if label and kind not in seen else None)
        seen.add(kind)
    for i, w in enumerate(report.get("quiet_windows", [])):
        ax.axvspan(w["t0"] - t0, w["t1"] - t0, fill=False, hatch="//", color="grey",
                   label="metrics compared" if label and i == 0 else None)


def draw(report: Dict[str, Any], path: Path) -> None:
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(11, 9), sharex=True)
    t0 = report["started"]
    step = report["throughput"]["step"]
    for method, points in sorted(report["throughput"]["series"].items()):
        xs = [b * step for b, _ in points]
        if method in ("Chunk", "Dedup"):
            top.plot(xs, [v / 2**20 for _, v in points], label=method)
        else:
            middle.plot(xs, [v for _, v in points], label=method)
    top.set_ylabel("client MiB/s")
    middle.set_ylabel("calls/s")
    for life, s in sorted(report["series"].items()):
        if s["role"] != "chunkd" or not s["samples"]:
            continue
        bottom.plot([x[0] - t0 for x in s["samples"]], [x[1] / 2**20 for x in s["samples"]],
                    label=life, linewidth=1)
    bottom.set_ylabel("chunkd RSS (MiB)")
    bottom.set_xlabel("seconds")
    for ax, label in ((top, True), (middle, False), (bottom, False)):
        _faults(ax, report, label)
    top.legend(loc="upper left", fontsize=7, ncol=4)
    middle.legend(loc="upper left", fontsize=7, ncol=4)
    bottom.legend(loc="upper left", fontsize=6, ncol=6)
    checks = report["checks"]
    calls = checks["no_failed_calls"]
    fig.suptitle(f"chunkd fleet soak, {report['minutes']:g} min, {report['machine']}: "
                 f"{calls['calls']} calls, {calls['failed']} failed, "
                 f"{len(report['faults'])} faults; all checks "
                 f"{'passed' if report['ok'] else 'NOT passed'}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
