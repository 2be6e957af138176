"""The outcome on a terminal: matrices in cuda-samples' layout, then verdicts and diagnosis.

Matrices are printed as cuda-samples prints them (``D\\D`` header, ``%6.02f`` cells) so
they can be compared side by side with ``p2pBandwidthLatencyTest``. As there, the
bandwidth diagonal is the local copy counting bytes read and written (twice the copy
rate), and the latency diagonal a 16-byte local copy.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence
from gpuhost.p2p.judge import Level, PairVerdict, Verdict
from gpuhost.p2p.links import describe_path
from gpuhost.p2p.service import Outcome

STYLE = {Level.PASS: "green", Level.INFO: "cyan", Level.WARN: "yellow", Level.FAIL: "bold red"}

Cell = Callable[[PairEvidence], float | None]
Diag = Callable[[GpuEvidence], float | None]


def matrix_text(title: str, ev: Evidence, cell: Cell, diag: Diag | None = None, label: str = "D\\D") -> str | None:
    """One matrix in cuda-samples' format, or None when no cell has a value."""
    idx = sorted({g.index for g in ev.gpus} | {p.src for p in ev.pairs} | {p.dst for p in ev.pairs})
    values: dict[tuple[int, int], float | None] = {}
    for p in ev.pairs:
        values[(p.src, p.dst)] = cell(p)
    if diag is not None:
        for g in ev.gpus:
            values[(g.index, g.index)] = diag(g)
    if not any(v is not None and (i != j) for (i, j), v in values.items()):
        return None
    lines = [title, f"{label:>6}" + "".join(f"{j:6d} " for j in idx)]
    for i in idx:
        row = f"{i:6d} "
        for j in idx:
            v = values.get((i, j))
            row += f"{v:6.02f} " if v is not None else f"{'-':>6} "
        lines.append(row.rstrip())
    return "\n".join(lines)


def _read_write(g: GpuEvidence) -> float | None:
    return 2.0 * g.d2d_gbps if g.d2d_gbps is not None else None


def matrices(ev: Evidence) -> list[str]:
    def p2p(attr: str) -> Cell:
        return lambda p: getattr(p.p2p, attr) if p.p2p else None

    def staged(attr: str) -> Cell:
        return lambda p: getattr(p.staged, attr) if p.staged else None

    specs: list[tuple[str, Cell, Diag | None, str]] = [
        ("Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)", staged("uni_gbps"), _read_write, "D\\D"),
        (f"Unidirectional P2P=Enabled Bandwidth ({ev.p2p_copy}) Matrix (GB/s)", p2p("uni_gbps"), _read_write, "D\\D"),
        ("Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)", staged("bidi_gbps"), None, "D\\D"),
        ("Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)", p2p("bidi_gbps"), None, "D\\D"),
        ("P2P=Disabled Latency Matrix (us)", staged("latency_us"), lambda g: g.d2d_latency_us, "GPU"),
        (f"P2P=Enabled Latency ({ev.p2p_copy}) Matrix (us)", p2p("latency_us"), lambda g: g.d2d_latency_us, "GPU"),
    ]
    out = []
    for title, cell, diag, label in specs:
        text = matrix_text(title, ev, cell, diag, label)
        if text:
            out.append(text)
    return out


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def gpu_table(ev: Evidence, verdict: Verdict) -> Table | None:
    if not ev.gpus or not any(g.name or g.h2d_gbps for g in ev.gpus):
        return None
    t = Table(title="GPUs", title_justify="left")
    for col in ("GPU", "name", "PCIe max", "under load", "BAR1", "mode", "H2D GB/s", "D2H GB/s", "D2D GB/s", "verdict"):
        t.add_column(col)
    for g in ev.gpus:
        mine = [f.level for f in verdict.gpu_findings if f.subject == g.label]
        level = max(mine, default=Level.PASS)
        t.add_row(
            g.label,
            g.name or "-",
            f"Gen{g.pcie_gen_max} x{g.pcie_width_max}" if g.pcie_gen_max else "-",
            f"Gen{g.pcie_gen_load} x{g.pcie_width_load}" if g.pcie_gen_load else "-",
            (f"{g.bar1_bytes >> 30} GiB" if g.bar1_bytes >= 1 << 30 else f"{g.bar1_bytes >> 20} MiB")
            if g.bar1_bytes
            else "-",
            g.virtualization or "-",
            _fmt(g.h2d_gbps),
            _fmt(g.d2h_gbps),
            _fmt(g.d2d_gbps, 0),
            Text(level.word, style=STYLE[level]) if mine else Text("-"),  # nothing judged is not a PASS
        )
    return t


#: the columns of the pairs table (eleven: wider than 80 columns, so a pipe must not cut it)
PAIR_COLUMNS = (
    "pair",
    "link",
    "path",
    "P2P",
    "one-way GB/s",
    "both GB/s",
    "lat us",
    "staged GB/s",
    "staged us",
    "verdict",
    "worst finding",
)


def pair_table(ev: Evidence, verdict: Verdict) -> Table | None:
    if not verdict.pairs:
        return None
    t = Table(title="pairs", title_justify="left")
    for col in PAIR_COLUMNS:
        t.add_column(col)
    for pv in verdict.pairs:
        p = ev.pair(pv.src, pv.dst)
        assert p is not None
        t.add_row(
            pv.label,
            p.topology or "-",
            pv.path,
            pv.p2p,
            _fmt(p.p2p.uni_gbps if p.p2p else None),
            _fmt(p.p2p.bidi_gbps if p.p2p else None),
            _fmt(p.p2p.latency_us if p.p2p else None, 2),
            _fmt(p.staged.uni_gbps if p.staged else None),
            _fmt(p.staged.latency_us if p.staged else None, 2),
            Text(pv.level.word, style=STYLE[pv.level]),
            _worst(pv),
        )
    return t


def _worst(pv: PairVerdict) -> str:
    bad = sorted((f for f in pv.findings if f.level > Level.PASS), key=lambda f: -f.level)
    return bad[0].message if bad else ""


def link_matrix(ev: Evidence) -> str | None:
    """The link types as ``nvidia-smi topo -m`` prints them, with NUMA placement, or None without topology."""
    if not any(p.topology for p in ev.pairs):
        return None
    idx = sorted({g.index for g in ev.gpus} | {p.src for p in ev.pairs} | {p.dst for p in ev.pairs})
    head = ["", *[f"GPU{j}" for j in idx], *ev.nics, "CPU Affinity", "NUMA Affinity"]
    lines = ["Links (nvidia-smi topo -m)", "\t".join(head)]
    for i in idx:
        g = ev.gpu(i)
        cells = [f"GPU{i}"]
        for j in idx:
            p = ev.pair(i, j)
            cells.append(" X " if i == j else (p.topology or "-") if p else "-")
        cells.extend(ev.nic_links.get((i, nic), "-") for nic in ev.nics)
        cells.extend([(g.cpu_affinity if g else None) or "-", (g.numa_node if g else None) or "-"])
        lines.append("\t".join(cells))
    return "\n".join(lines)


def path_lines(ev: Evidence) -> list[str]:
    """What path a peer copy of each GPU pair takes (one line per unordered pair)."""
    out = []
    for p in ev.pairs:
        if p.src < p.dst and p.topology:
            out.append(f"GPU{p.src}<->GPU{p.dst}: {p.topology}: {describe_path(p.topology)}")
    return out


def numa_lines(ev: Evidence) -> list[str]:
    """Which GPUs sit on which NUMA node, and the CPUs near them."""
    nodes: dict[tuple[str, str], list[int]] = {}
    for g in ev.gpus:
        if g.numa_node is not None or g.cpu_affinity is not None:
            nodes.setdefault((g.numa_node or "?", g.cpu_affinity or "?"), []).append(g.index)
    return [
        f"NUMA node {node} (CPUs {cpus}): " + ", ".join(f"GPU{i}" for i in idx)
        for (node, cpus), idx in sorted(nodes.items())
    ]


def _topology(ev: Evidence) -> list[RenderableType]:
    text = link_matrix(ev)
    if text is None:
        return []
    out: list[RenderableType] = [Text(text + "\n")]
    out.extend(Text("  " + line) for line in numa_lines(ev) + path_lines(ev))
    return out


def render(outcome: Outcome) -> list[RenderableType]:
    """Everything to print, in order."""
    out: list[RenderableType] = []
    ev = outcome.evidence
    if outcome.cannot_run is not None:
        if ev is not None:
            out.extend(_topology(ev))
            out.extend(Text("note: " + note, style="dim") for note in ev.notes)
            out.extend(Text("note: partial capture: " + why, style="dim") for why in ev.partial)
        out.append(Text(f"{outcome.target}: CANNOT RUN: {outcome.cannot_run}", style="bold red"))
        for fact in outcome.facts:
            out.append(Text("  " + fact))
        return out
    verdict = outcome.verdict
    assert ev is not None and verdict is not None
    out.extend(_topology(ev))
    for text in matrices(ev):
        out.append(Text(text + "\n"))
    for table in (gpu_table(ev, verdict), pair_table(ev, verdict)):
        if table is not None:
            out.append(table)
    machine = [f for f in verdict.machine_findings]
    if machine:
        out.append(Group(*[Text(f"{f.level.word:<5} {f.subject}: {f.message}", style=STYLE[f.level]) for f in machine]))
    for note in verdict.notes:
        out.append(Text("note: " + note, style="dim"))
    out.append(Text(f"\n{outcome.target}: {outcome.word} ({ev.source})", style=STYLE[verdict.level]))
    for line in outcome.diagnosis:
        out.append(Text("  " + line))
    return out
