"""``nvidia-smi topo -m`` as :class:`Evidence`: the link type of every GPU pair, GPU-NIC links, NUMA placement.

The header names the columns (``GPU0 … NIC0 … CPU Affinity  NUMA Affinity  GPU NUMA ID``;
older drivers name NICs ``mlx5_0``), cells are separated by tabs or runs of spaces, and a
row starts ``GPUn``. Posted copies are often cut: rows missing (the capture is marked
partial and the rows there are read), the legend gone (it is not needed), ANSI underlines
left in. Nothing here is a measurement: it says which path a peer copy would take.
"""

from __future__ import annotations

import re

from gpuhost.errors import ProbeError
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence
from gpuhost.p2p.links import is_link
from gpuhost.p2p.parsers.common import MAX_GPUS, strip_ansi

_MULTIWORD = (("CPU Affinity", "CPU_Affinity"), ("NUMA Affinity", "NUMA_Affinity"), ("GPU NUMA ID", "GPU_NUMA_ID"))
_ROW = re.compile(r"^\s*(GPU\d+|NIC\d+|mlx\S+)\s+(.*)$")


def _header(line: str) -> list[str] | None:
    m = re.match(r"^.*\btopo\s+-m\s+(?=GPU0\b)", line)
    if m:
        line = line[m.end() :]  # the command and the header pasted on one line
    for words, token in _MULTIWORD:
        line = line.replace(words, token)
    cols = line.split()
    if (
        cols
        and cols[0] == "GPU0"
        and all(not c.startswith("GPU") or c[3:].isdigit() or c == "GPU_NUMA_ID" for c in cols)
    ):
        return cols
    return None


def _gpu_columns(cols: list[str]) -> list[str]:
    return [c for c in cols if c.startswith("GPU") and c[3:].isdigit()]


def looks_like(text: str) -> bool:
    clean = strip_ansi(text)
    lines = clean.splitlines()
    for i, line in enumerate(lines):
        cols = _header(line)
        if cols is None:
            continue
        for row in lines[i + 1 : i + 3]:
            m = _ROW.match(row)
            if m and m.group(1) == "GPU0" and any(is_link(c) for c in m.group(2).split()):
                return True
    return False


def parse(text: str) -> Evidence:
    text = strip_ansi(text)
    cols: list[str] | None = None
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if cols is None:
            cols = _header(line)
            if cols is not None and len(_gpu_columns(cols)) > MAX_GPUS:
                break  # refused below, before any row is read
            continue
        m = _ROW.match(line)
        if m:
            rows[m.group(1)] = m.group(2).split()
        elif line.strip().startswith("Legend"):
            break
    if cols is not None and len(_gpu_columns(cols)) > MAX_GPUS:
        raise ProbeError(
            f"the topo -m header names {len(_gpu_columns(cols))} GPUs, more than one machine has (the NVIDIA "
            f"driver's NV_MAX_DEVICES is {MAX_GPUS}): not a capture of one machine"
        )
    if cols is None or not rows:
        raise ProbeError("no 'nvidia-smi topo -m' matrix found in the file")
    gpu_cols = _gpu_columns(cols)
    nic_cols = [c for c in cols if c not in gpu_cols and not c.startswith(("CPU_", "NUMA_", "GPU_NUMA"))]
    gpus: list[GpuEvidence] = []
    pairs: list[PairEvidence] = []
    nic_links: dict[tuple[int, str], str] = {}
    for name in gpu_cols:
        i = int(name[3:])
        g = GpuEvidence(index=i)
        gpus.append(g)
        cells = rows.get(name)
        if cells is None:
            continue
        named = dict(zip(cols, cells, strict=False))
        for other in gpu_cols:
            j = int(other[3:])
            link = named.get(other)
            if j != i and link and is_link(link):
                pairs.append(PairEvidence(src=i, dst=j, topology=link))
        for nic in nic_cols:
            if named.get(nic) and is_link(named[nic]):
                nic_links[(i, nic)] = named[nic]
        cpu = named.get("CPU_Affinity")
        numa = named.get("NUMA_Affinity")
        g.cpu_affinity = cpu if cpu and cpu != "N/A" else None
        g.numa_node = numa if numa and numa != "N/A" else None
    partial = []
    missing = [c for c in gpu_cols if c not in rows]
    if missing:
        partial.append(
            f"topo -m rows missing for {', '.join(missing)}: the capture was cut; their links are "
            "taken from the other GPUs' rows"
        )
        seen = {(p.src, p.dst) for p in pairs}
        for p in list(pairs):
            if (p.dst, p.src) not in seen:
                pairs.append(PairEvidence(src=p.dst, dst=p.src, topology=p.topology))
        pairs.sort(key=lambda p: (p.src, p.dst))
    notes = [
        "nvidia-smi topo -m shows how the GPUs are linked, not whether P2P works or how fast: "
        "add a bandwidth capture (--from-file again) or run 'gpuhost verify p2p' on the machine"
    ]
    return Evidence(
        source="nvidia-smi topo -m",
        gpus=gpus,
        pairs=pairs,
        notes=notes,
        partial=partial,
        nics=nic_cols,
        nic_links=nic_links,
    )
