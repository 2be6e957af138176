"""``p2pBandwidthLatencyTest`` (NVIDIA cuda-samples) output as :class:`Evidence`.

The tool prints one matrix per section; rows are ``i  v0 v1 ...``. Its "P2P=Enabled"
matrices fall back to ordinary (host-staged) copies for pairs that cannot reach each
other, so for those pairs the enabled figures are not peer figures and are dropped.
Its diagonal counts a local copy's read and write, so half of it is the copy rate.
"""

from __future__ import annotations

import re

from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures
from gpuhost.p2p.parsers.common import Matrix, number, strip_ansi

MARKERS = (
    "P2P (Peer-to-Peer) GPU Bandwidth Latency Test",
    "Unidirectional P2P=Disabled Bandwidth Matrix",
    "P2P Connectivity Matrix",
)

_DEVICE = re.compile(
    r"^Device:\s*(\d+),\s*(.+?),\s*pciBusID:\s*([0-9a-fA-F]+),\s*pciDeviceID:\s*([0-9a-fA-F]+),"
    r"\s*pciDomainID:\s*([0-9a-fA-F]+)"
)
_ACCESS = re.compile(r"^Device=(\d+)\s+(CAN|CANNOT)\s+Access Peer Device=(\d+)")
_ROW = re.compile(r"^\s*(\d+)\s+([-\d.\s]+?)\s*$")

# Section title (prefix) -> (path, quantity). Older samples omit "(P2P Writes)".
SECTIONS = {
    "Unidirectional P2P=Disabled Bandwidth": ("staged", "uni"),
    "Unidirectional P2P=Enabled Bandwidth (P2P Writes)": ("p2p", "uni"),
    "Unidirectional P2P=Enabled Bandwidth Matrix": ("p2p", "uni"),
    "Bidirectional P2P=Disabled Bandwidth": ("staged", "bidi"),
    "Bidirectional P2P=Enabled Bandwidth": ("p2p", "bidi"),
    "P2P=Disabled Latency": ("staged", "latency"),
    "P2P=Enabled Latency (P2P Writes)": ("p2p", "latency"),
    "P2P=Enabled Latency Matrix": ("p2p", "latency"),
}
IGNORED = ("P2P Reads",)


def looks_like(text: str) -> bool:
    return any(m in text for m in MARKERS)


def _section_key(line: str) -> tuple[str, str] | None:
    if any(ign in line for ign in IGNORED):
        return None
    for title, key in SECTIONS.items():
        if line.startswith(title):
            return key
    return None


def parse_matrices(text: str) -> dict[tuple[str, str], Matrix]:
    """(path, quantity) -> matrix; for latency only the GPU block, not the CPU one."""
    out: dict[tuple[str, str], Matrix] = {}
    current: tuple[str, str] | None = None
    rows: Matrix = {}
    in_cpu_block = False
    for raw in text.splitlines():
        line = raw.strip()
        key = _section_key(line)
        if (
            key is not None
            or line.endswith("Matrix (GB/s)")
            or line.endswith("Matrix (us)")
            or line.startswith("P2P Connectivity Matrix")
            or line.startswith("NOTE:")
        ):
            if current is not None and rows:
                out[current] = rows
            current, rows, in_cpu_block = key, {}, False
            continue
        if current is None:
            continue
        if line.startswith("CPU"):
            in_cpu_block = True
            continue
        if in_cpu_block or line.startswith("D\\D") or line.startswith("GPU"):
            continue
        m = _ROW.match(raw)
        if m:
            values = [number(v) for v in m.group(2).split()]
            rows[int(m.group(1))] = values
    if current is not None and rows:
        out[current] = rows
    return out


def _connectivity(text: str) -> dict[tuple[int, int], bool]:
    """The ``P2P Connectivity Matrix`` block: 1 where peer access is possible."""
    out: dict[tuple[int, int], bool] = {}
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("P2P Connectivity Matrix"):
            inside = True
            continue
        if not inside or line.startswith("D\\D"):
            continue
        m = _ROW.match(raw)
        if not m:
            break
        for j, v in enumerate(m.group(2).split()):
            out[(int(m.group(1)), j)] = v == "1"
    return out


def parse(text: str) -> Evidence:
    text = strip_ansi(text)
    gpus: dict[int, GpuEvidence] = {}
    access: dict[tuple[int, int], bool] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _DEVICE.match(line)
        if m:
            idx = int(m.group(1))
            bus = f"{int(m.group(5), 16):08X}:{int(m.group(3), 16):02X}:{int(m.group(4), 16):02X}.0"
            gpus[idx] = GpuEvidence(index=idx, name=m.group(2).strip(), bus_id=bus)
            continue
        m = _ACCESS.match(line)
        if m:
            access[(int(m.group(1)), int(m.group(3)))] = m.group(2) == "CAN"
    matrices = parse_matrices(text)
    if not access:  # some captures keep only the connectivity matrix
        access = _connectivity(text)
    n = max([len(gpus)] + [len(rows) for rows in matrices.values()])
    for i in range(n):
        gpus.setdefault(i, GpuEvidence(index=i))
    staged_uni = matrices.get(("staged", "uni"), {})
    for i, g in gpus.items():
        diag = staged_uni[i][i] if i in staged_uni and i < len(staged_uni[i]) else None
        if diag is not None:
            g.d2d_gbps = diag / 2.0  # the diagonal counts read + write

    def cell(path: str, quantity: str, i: int, j: int) -> float | None:
        rows = matrices.get((path, quantity), {})
        row = rows.get(i)
        return row[j] if row is not None and j < len(row) else None

    pairs = []
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            can = access.get((i, j))
            staged = PathFigures(
                cell("staged", "uni", i, j), cell("staged", "bidi", i, j), cell("staged", "latency", i, j)
            )
            pair = PairEvidence(src=i, dst=j, can_access_peer=can, staged=staged)
            if can or (can is None and not access):
                pair.p2p = PathFigures(
                    cell("p2p", "uni", i, j), cell("p2p", "bidi", i, j), cell("p2p", "latency", i, j)
                )
            pairs.append(pair)
    notes = [
        "p2pBandwidthLatencyTest does not say how the GPUs are linked: bandwidth is judged against the "
        "line rate only with --link (e.g. --link gen5x16) or a topology capture; NVLink is recognised from the "
        "rates",
        "p2pBandwidthLatencyTest checks no data: integrity is not judged",
    ]
    if not access:
        notes.append(
            "the capture shows no peer-access lines or connectivity matrix: its P2P=Enabled figures are "
            "taken as peer copies, though the tool falls back to staged copies where peer access fails"
        )
    return Evidence(
        source="p2pBandwidthLatencyTest",
        gpus=[gpus[k] for k in sorted(gpus)],
        pairs=pairs,
        notes=notes,
        partial=_missing_sections(text, matrices),
    )


def _missing_sections(text: str, matrices: dict[tuple[str, str], Matrix]) -> list[str]:
    """Why a capture looks cut short: a section title without rows, or no peer matrix after the status."""
    out = []
    wanted = [(k, t) for t, k in SECTIONS.items() if t in text and k not in matrices]
    for _key, title in wanted:
        out.append(f"'{title}' has no rows: the capture ends there")
    if ("p2p", "uni") not in matrices and ("p2p", "latency") not in matrices and not wanted:
        out.append("no P2P=Enabled matrix: the capture ends before the peer measurements")
    return list(dict.fromkeys(out))
