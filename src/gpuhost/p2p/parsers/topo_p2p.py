"""``nvidia-smi topo -p2p {r,w,n,a,p}`` as :class:`Evidence` (the driver's status, no measurement).

Rows look like `` GPU0<TAB>X<TAB>OK<TAB>CNS``; the header may carry ANSI underlines. The
output does not name the capability it shows, so a file may say it in a line such as
``nvidia-smi topo -p2p w`` or ``== topo -p2p n`` before each matrix; without that the
matrix is taken as the read/write status, which is what decides whether P2P is possible.
"""

from __future__ import annotations

import re

from gpuhost.errors import ProbeError
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence
from gpuhost.p2p.parsers.common import strip_ansi

CAPABILITY = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "pci"}
_CAP_LINE = re.compile(r"topo\s+-p2p\s+([rwnap])\b")
_HEADER = re.compile(r"^\s*(GPU\d+\s+)+GPU\d+\s*$|^\s*GPU0\s*$")
_ROW = re.compile(r"^\s*GPU(\d+)\s+((?:(?:X|OK|CNS|GNS|TNS|NS|DR|U)\s*)+)$")


def looks_like(text: str) -> bool:
    clean = strip_ansi(text)
    measured = re.search(r"Bandwidth Matrix|bandwidth \(GB/s\)", clean)
    return not measured and any(_ROW.match(line) for line in clean.splitlines())


def parse(text: str) -> Evidence:
    text = strip_ansi(text)
    status: dict[tuple[int, int], dict[str, str]] = {}
    caps: list[str] = []
    current: list[str] = ["read", "write"]
    seen_any = False
    for line in text.splitlines():
        m = _CAP_LINE.search(line)
        if m and not _ROW.match(line):
            current = [CAPABILITY[m.group(1)]]
            continue
        m = _ROW.match(line)
        if not m:
            continue
        seen_any = True
        i = int(m.group(1))
        for j, cell in enumerate(m.group(2).split()):
            if i == j or cell == "X":
                continue
            entry = status.setdefault((i, j), {})
            for cap in current:
                entry[cap] = cell
                if cap not in caps:
                    caps.append(cap)
    if not seen_any:
        raise ProbeError("no 'nvidia-smi topo -p2p' matrix found in the file")
    n = max(max(i, j) for i, j in status) + 1 if status else 1
    gpus = [GpuEvidence(index=k) for k in range(n)]
    pairs = [PairEvidence(src=i, dst=j, nvml_status=dict(s)) for (i, j), s in sorted(status.items())]
    notes = [
        "status only: this is what the driver allows, not a transfer; run 'gpuhost verify p2p' on the "
        f"machine to measure (capabilities read: {', '.join(caps)})"
    ]
    return Evidence(source="nvidia-smi topo -p2p", gpus=gpus, pairs=pairs, notes=notes)
