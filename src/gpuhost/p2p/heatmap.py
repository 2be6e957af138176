"""Bandwidth and latency matrices as one PNG (``--heatmap FILE.png``).

matplotlib is optional (``pip install 'gpuhost[plot]'``) and imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost.errors import UsageError
from gpuhost.p2p.evidence import Evidence, PairEvidence

if TYPE_CHECKING:
    from gpuhost.p2p.outcome import Outcome

#: (title, figures, attribute, colour map, unit): panels of one unit share one colour scale
PANELS: list[tuple[str, str, str, str, str]] = [
    ("peer one-way", "p2p", "uni_gbps", "viridis", "GB/s"),
    ("peer both ways", "p2p", "bidi_gbps", "viridis", "GB/s"),
    ("peer 16-byte latency", "p2p", "latency_us", "magma_r", "µs"),
    ("staged one-way", "staged", "uni_gbps", "viridis", "GB/s"),
    ("staged 16-byte latency", "staged", "latency_us", "magma_r", "µs"),
]
#: edge colour of a judged pair's cell, by the pair's level
MARKS = {"FAIL": "red", "WARN": "orange"}


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


def _cell_text(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def write_heatmap(
    ev: Evidence,
    path: str | Path,
    title: str,
    *,
    marks: dict[tuple[int, int], str] | None = None,
    subtitle: str | None = None,
) -> Path:
    """Draw every matrix that has values (:func:`heatmap_figure`); returns the file written."""
    fig = heatmap_figure(ev, title, marks=marks, subtitle=subtitle)
    out = Path(path)
    fig.savefig(out, dpi=110)
    _load_matplotlib().close(fig)
    return out


def heatmap_figure(
    ev: Evidence,
    title: str,
    *,
    marks: dict[tuple[int, int], str] | None = None,
    subtitle: str | None = None,
) -> Any:
    """The matplotlib figure of every matrix that has values.

    Panels of one unit (GB/s, µs) share one colour scale from zero, named on each colour bar, so a colour means
    the same figure in every panel. ``marks``: (source, destination) → FAIL or WARN, drawn as a coloured frame
    around that pair's cells. ``subtitle`` identifies the run (node, source, time)."""
    idx = sorted({g.index for g in ev.gpus} | {p.src for p in ev.pairs} | {p.dst for p in ev.pairs})
    panels = []
    for name, attr_path, attr, cmap, unit in PANELS:
        grid = [[float("nan")] * len(idx) for _ in idx]
        found = False
        for p in ev.pairs:
            v = _value(p, attr_path, attr)
            if v is not None and p.src in idx and p.dst in idx:
                grid[idx.index(p.src)][idx.index(p.dst)] = v
                found = True
        if found:
            panels.append((name, grid, cmap, unit))
    if not panels:
        raise UsageError("--heatmap: there are no peer or staged matrices to draw (one GPU, or status only)")
    top: dict[str, float] = {}
    for _name, grid, _cmap, unit in panels:
        finite = [v for row in grid for v in row if v == v]
        top[unit] = max([top.get(unit, 0.0), *finite])
    plt = _load_matplotlib()
    from matplotlib.patches import Rectangle

    n = len(panels)
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    side = max(4.2, 0.55 * len(idx) + 1.8)  # inches a panel: about half an inch a GPU keeps 10 x 10 figures legible
    fig, axes = plt.subplots(rows, cols, figsize=(side * cols * 1.12, side * rows + 0.9), squeeze=False)
    cell_font = 8 if len(idx) <= 6 else 7
    marks = marks or {}
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_visible(False)
            continue
        name, grid, cmap, unit = panels[k]
        # from zero, so that a 0.1 % spread does not paint like a 2x one; one top per unit across panels
        image = ax.imshow(grid, cmap=cmap, vmin=0.0, vmax=top[unit] or 1.0)
        ax.set_title(f"{name} ({unit})", fontsize=10)
        labels = [str(i) for i in idx]
        ax.set_xticks(range(len(idx)), labels, fontsize=8)
        ax.set_yticks(range(len(idx)), labels, fontsize=8)
        ax.set_xlabel("destination GPU", fontsize=9)
        ax.set_ylabel("source GPU", fontsize=9)
        for r, row in enumerate(grid):
            for c, v in enumerate(row):
                if v == v:  # not NaN
                    ax.text(
                        c,
                        r,
                        _cell_text(v),
                        ha="center",
                        va="center",
                        fontsize=cell_font,
                        color="black",
                        bbox={"boxstyle": "round,pad=0.12", "facecolor": "white", "alpha": 0.75, "lw": 0},
                    )
        for (src, dst), level in marks.items():
            if src in idx and dst in idx and level in MARKS:
                ax.add_patch(
                    Rectangle(
                        (idx.index(dst) - 0.5, idx.index(src) - 0.5),
                        1,
                        1,
                        fill=False,
                        edgecolor=MARKS[level],
                        linewidth=2.5,
                    )
                )
        fig.colorbar(image, ax=ax, shrink=0.8, label=unit)
    verdict_colour = next((MARKS[w] for w in ("FAIL", "WARN") if w in title.split()), "black")
    fig.suptitle(title, fontsize=12, color=verdict_colour, fontweight="bold")
    legend = [f"{colour} frame: a {level} pair" for level, colour in MARKS.items() if level in marks.values()]
    legend.append("blank: no figure (the diagonal, or no peer copy)")
    footer = "   ".join([*([subtitle] if subtitle else []), *legend])
    fig.text(0.5, 0.01, footer, ha="center", va="bottom", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    return fig


def write_outcome_heatmap(outcome: Outcome, path: str | Path, *, now: float | None = None) -> Path:
    """The heatmap of one ``verify p2p``: titled with the target and the verdict, each FAIL or WARN pair framed, and
    the run identified underneath (what the figures came from, when they were judged)."""
    import time

    assert outcome.evidence is not None
    marks = outcome_marks(outcome)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() if now is None else now))
    subtitle = f"{outcome.target} · {outcome.evidence.source} · judged {when}"
    return write_heatmap(outcome.evidence, path, f"{outcome.target}: {outcome.word}", marks=marks, subtitle=subtitle)


def outcome_marks(outcome: Outcome) -> dict[tuple[int, int], str]:
    """(source, destination) → FAIL or WARN for each pair the verdict did not pass."""
    return {
        (pv.src, pv.dst): pv.level.word
        for pv in (outcome.verdict.pairs if outcome.verdict is not None else [])
        if pv.level.word in MARKS
    }
