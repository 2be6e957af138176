"""The tune report's plot: output tok/s per variant on top, mean watts per GPU below; failed variants marked."""

from __future__ import annotations

from pathlib import Path

from gpuhost.bench_serving.tune import Measured


def plot_tune(tried: list[Measured], best: Measured, path: Path, power_limit_w: float | None = None) -> Path:
    """Write the PNG (matplotlib Agg, no display) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(len(tried)))
    fig, (ax_t, ax_w) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True, constrained_layout=True)
    colours = ["tab:green" if m.key == best.key else ("tab:blue" if m.ok else "tab:red") for m in tried]
    measured = [m.tok_s for m in tried if m.tok_s is not None]
    stub = 0.04 * max(measured) if measured else 1.0  # a failed variant: a short red bar with its status
    tok = [m.tok_s if m.tok_s is not None else stub for m in tried]
    ax_t.bar(xs, tok, color=colours, hatch=["" if m.ok else "//" for m in tried])
    for x, m in zip(xs, tried, strict=True):
        text = f"{m.tok_s:.0f}" if m.ok and m.tok_s is not None else m.status
        ax_t.annotate(text, (x, tok[x]), ha="center", va="bottom", fontsize="small")
    ax_t.set_ylabel("output tokens / s (mean over levels)")
    ax_t.set_title("gpuhost tune sglang: each variant (green: kept, red: failed or refused)")
    ax_t.grid(True, axis="y", alpha=0.3)
    watts = [m.watts if m.watts is not None else 0.0 for m in tried]
    ax_w.bar(xs, watts, color=colours)
    if power_limit_w:
        ax_w.axhline(power_limit_w, color="red", linestyle=":", label=f"power limit {power_limit_w:.0f} W")
        ax_w.legend(loc="upper left", fontsize="small")
    ax_w.set_ylabel("mean power draw per GPU (W)")
    ax_w.grid(True, axis="y", alpha=0.3)
    ax_w.set_xticks(xs)
    ax_w.set_xticklabels([f"{m.axis}\n{_short(m.step or m.label)}" for m in tried], fontsize="x-small")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(label: str) -> str:
    """A tick label: one change a line, the flags' leading dashes left out."""
    parts = [p.replace("--", "") for p in label.split(", ")]
    return "\n".join(p if len(p) <= 26 else p[:23] + "..." for p in parts)
