"""Bandwidth and latency matrices as one PNG (``--heatmap FILE.png``).

matplotlib is optional (``pip install 'gpuhost[plot]'``) and imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuhost.errors import UsageError
from gpuhost.p2p.evidence import Evidence, PairEvidence

PANELS: list[tuple[str, str, str, str]] = [
    ("peer one-way (GB/s)", "p2p", "uni_gbps", "viridis"),
    ("peer both ways (GB/s)", "p2p", "bidi_gbps", "viridis"),
    ("peer 16-byte latency (us)", "p2p", "latency_us", "magma_r"),
    ("staged one-way (GB/s)", "staged", "uni_gbps", "viridis"),
    ("staged 16-byte latency (us)", "staged", "latency_us", "magma_r"),
]


def _value(p: PairEvidence, path: str, attr: str) -> float | None:
    figures = getattr(p, path)
    return getattr(figures, attr) if figures is not None else None


def _load_matplotlib() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UsageError("--heatmap needs matplotlib, which is not installed: pip install 'gpuhost[plot]'") from exc
    return plt


def write_heatmap(ev: Evidence, path: str | Path, title: str) -> Path:
    """Draw every matrix that has values; returns the file written."""
    idx = sorted({g.index for g in ev.gpus} | {p.src for p in ev.pairs} | {p.dst for p in ev.pairs})
    panels = []
    for name, attr_path, attr, cmap in PANELS:
        grid = [[float("nan")] * len(idx) for _ in idx]
        found = False
        for p in ev.pairs:
            v = _value(p, attr_path, attr)
            if v is not None and p.src in idx and p.dst in idx:
                grid[idx.index(p.src)][idx.index(p.dst)] = v
                found = True
        if found:
            panels.append((name, grid, cmap))
    if not panels:
        raise UsageError("--heatmap: there are no peer or staged matrices to draw (one GPU, or status only)")
    plt = _load_matplotlib()
    n = len(panels)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 4.0), squeeze=False)
    for ax, (name, grid, cmap) in zip(axes[0], panels, strict=False):
        finite = [v for row in grid for v in row if v == v]
        # From zero, so that a 0.1 % spread does not paint like a 2x one.
        image = ax.imshow(grid, cmap=cmap, vmin=0.0, vmax=max(finite) if finite else 1.0)
        ax.set_title(name, fontsize=10)
        ax.set_xticks(range(len(idx)), [f"GPU{i}" for i in idx], fontsize=8)
        ax.set_yticks(range(len(idx)), [f"GPU{i}" for i in idx], fontsize=8)
        ax.set_xlabel("destination")
        ax.set_ylabel("source")
        for r, row in enumerate(grid):
            for c, v in enumerate(row):
                if v == v:  # not NaN
                    ax.text(
                        c,
                        r,
                        f"{v:.1f}" if v >= 10 else f"{v:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black",
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.7, "lw": 0},
                    )
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
