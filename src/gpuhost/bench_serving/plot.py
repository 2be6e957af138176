"""The sweep plot: throughput against concurrency on top, each GPU's mean watts (and its limit) below."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _x(doc: dict[str, Any]) -> tuple[list[float], list[str], str]:
    levels = doc["levels"]
    if levels and all(lv["concurrency"] is not None for lv in levels):
        return [float(lv["concurrency"]) for lv in levels], [str(lv["concurrency"]) for lv in levels], "concurrency"
    return [float(n) for n in range(len(levels))], [lv["label"] for lv in levels], "level"


def plot_sweep(doc: dict[str, Any], path: Path) -> Path:
    """Write the PNG (matplotlib Agg, no display) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, ticks, xlabel = _x(doc)
    fig, (ax_t, ax_w) = plt.subplots(2, 1, figsize=(9, 7.5), sharex=True, constrained_layout=True)
    for key, label, style in (
        ("output_throughput_tok_s", "output tok/s", "o-"),
        ("total_throughput_tok_s", "total tok/s", "s--"),
    ):
        ys = [lv["figures"].get(key) for lv in doc["levels"]]
        pts = [(x, y) for x, y in zip(xs, ys, strict=False) if isinstance(y, (int, float))]
        if pts:
            ax_t.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ax_t.set_ylabel("tokens / s")
    ax_t.set_title("Throughput and GPU power per concurrency level")
    ax_t.grid(True, alpha=0.3)
    ax_t.legend(loc="upper left")

    gpu_ids = sorted({g["index"] for lv in doc["levels"] for g in lv["gpus"]})
    limit = None
    for gid in gpu_ids:
        pts = []
        for x, lv in zip(xs, doc["levels"], strict=False):
            for g in lv["gpus"]:
                if g["index"] == gid and g["power_mean_w"] is not None:
                    pts.append((x, g["power_mean_w"]))
                    limit = max(limit or 0.0, g["power_limit_w"] or 0.0) or limit
        if pts:
            ax_w.plot([p[0] for p in pts], [p[1] for p in pts], ".-", label=f"GPU{gid}")
    if limit:
        ax_w.axhline(limit, color="red", linestyle=":", label=f"power limit {limit:.0f} W")
        ax_w.set_ylim(0, limit * 1.08)
    ax_w.set_ylabel("mean power draw (W)")
    ax_w.set_xlabel(xlabel)
    ax_w.grid(True, alpha=0.3)
    if gpu_ids or limit:
        ax_w.legend(loc="center left", ncol=min(5, len(gpu_ids) + 1), fontsize="small")
    else:
        ax_w.text(0.5, 0.5, "no GPU samples", transform=ax_w.transAxes, ha="center")
    if xlabel == "concurrency" and len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax_w.set_xscale("log", base=2)
    ax_w.set_xticks(xs)
    ax_w.set_xticklabels(ticks)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
