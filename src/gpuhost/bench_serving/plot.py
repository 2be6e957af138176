"""The sweep plot: throughput, latency and each GPU's mean watts (and its limit) against concurrency.

Legends sit outside the axes (they never cover a point); the title names the run (target, when, verdict, where
the figures came from), so the PNG stands alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: (figure key, legend label, line style) of the latency panel: the medians and the tails of what a user waits for
LATENCY = (
    ("median_ttft_ms", "TTFT p50", "o-"),
    ("p99_ttft_ms", "TTFT p99", "o:"),
    ("median_tpot_ms", "TPOT p50", "s-"),
    ("p99_tpot_ms", "TPOT p99", "s:"),
    ("median_itl_ms", "ITL p50", "^-"),
    ("p99_itl_ms", "ITL p99", "^:"),
)
THROUGHPUT = (
    ("output_throughput_tok_s", "output tok/s", "o-"),
    ("total_throughput_tok_s", "total tok/s", "s--"),
)


def _x(doc: dict[str, Any]) -> tuple[list[float], list[str], str]:
    levels = doc["levels"]
    if levels and all(lv["concurrency"] is not None for lv in levels):
        return [float(lv["concurrency"]) for lv in levels], [str(lv["concurrency"]) for lv in levels], "concurrency"
    return [float(n) for n in range(len(levels))], [lv["label"] for lv in levels], "level"


def run_title(doc: dict[str, Any]) -> str:
    """What identifies the run: its target (or the file read), when, and the verdict."""
    what = doc.get("target") or doc.get("source_file") or "benchmark"
    when = str(doc.get("created") or "")[:16].replace("T", " ")
    parts = [f"gpuhost bench sglang: {what}", f"{when} UTC" if when else "", str(doc.get("verdict") or "")]
    return " · ".join(p for p in parts if p)


def _lines(ax: Any, xs: list[float], doc: dict[str, Any], series: tuple[tuple[str, str, str], ...]) -> int:
    drawn = 0
    for key, label, style in series:
        ys = [lv["figures"].get(key) for lv in doc["levels"]]
        pts = [(x, y) for x, y in zip(xs, ys, strict=False) if isinstance(y, (int, float))]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
            drawn += 1
    return drawn


def _outside_legend(ax: Any, **kw: Any) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small", **kw)


def plot_sweep(doc: dict[str, Any], path: Path) -> Path:
    """Write the PNG (matplotlib Agg, no display) and return its path."""
    import matplotlib.pyplot as plt

    fig = sweep_figure(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def sweep_figure(doc: dict[str, Any]) -> Any:
    """The figure of :func:`plot_sweep`: throughput, latency and power panels over the levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs, ticks, xlabel = _x(doc)
    fig, (ax_t, ax_l, ax_w) = plt.subplots(3, 1, figsize=(10, 10), sharex=True, constrained_layout=True)
    fig.suptitle(run_title(doc), fontsize=11)
    if _lines(ax_t, xs, doc, THROUGHPUT):
        _outside_legend(ax_t)
    ax_t.set_ylabel("tokens / s")
    ax_t.set_title("throughput", fontsize=10)
    ax_t.grid(True, alpha=0.3)

    if _lines(ax_l, xs, doc, LATENCY):
        _outside_legend(ax_l)
        values = [y for line in ax_l.get_lines() for y in line.get_ydata()]
        if values and min(values) > 0:  # seconds to the first token and milliseconds a token, both readable
            ax_l.set_yscale("log")
    else:
        ax_l.text(0.5, 0.5, "no latency figures", transform=ax_l.transAxes, ha="center")
    ax_l.set_ylabel("milliseconds (log)" if ax_l.get_yscale() == "log" else "milliseconds")
    ax_l.set_title("latency: time to first token, time per output token, inter-token", fontsize=10)
    ax_l.grid(True, alpha=0.3)

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
    ax_w.set_title("GPU power", fontsize=10)
    ax_w.set_xlabel(xlabel)
    ax_w.grid(True, alpha=0.3)
    if gpu_ids or limit:
        _outside_legend(ax_w, ncol=1 if len(gpu_ids) <= 8 else 2)
    else:
        ax_w.text(0.5, 0.5, "no GPU samples", transform=ax_w.transAxes, ha="center")
    if xlabel == "concurrency" and len(xs) > 1 and min(xs) > 0 and max(xs) / min(xs) >= 8:
        ax_w.set_xscale("log", base=2)
    ax_w.set_xticks(xs)
    ax_w.set_xticklabels(ticks)
    return fig
