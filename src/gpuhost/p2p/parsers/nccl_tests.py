"""nccl-tests (``all_reduce_perf`` and friends) output as :class:`Evidence`.

Each result row is ``size count type redop [root] time algbw busbw #wrong time algbw
busbw #wrong`` (out-of-place, then in-place); older versions have no ``root`` column and
print a maximum ``error`` instead of a count of wrong values. Pastes lose the ``#`` of
the comment lines, start mid-table or stop after the header: rows are found by their
shape, a paste without any is partial and judged as "no measurement".
"""

from __future__ import annotations

import re

from gpuhost.p2p.evidence import Evidence, GpuEvidence

_TYPES = "int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|f8e4m3|f8e5m2"
_OPS = "sum|prod|max|min|avg|mulsum|none"
_ROW = re.compile(
    rf"^\s*(\d+)\s+(\d+)\s+({_TYPES})\s+({_OPS})\s+(?:(-?\d+)\s+)?"
    r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$"
)
_RANK = re.compile(r"Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^]]*\]\s+(.+?)\s*$")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([\d.]+)")
_TEST = re.compile(r"\b(\w+_perf)\b")

#: An ``error`` column (older nccl-tests) above this is wrong data, not rounding.
MAX_ERROR = 1e-2


def looks_like(text: str) -> bool:
    if "Avg bus bandwidth" in text or ("out-of-place" in text and "in-place" in text):
        return True
    if re.search(r"nThread \d+ nGpus \d+", text):
        return True
    return sum(1 for line in text.splitlines() if _ROW.match(line)) >= 2


def _wrong(cell: str) -> int:
    try:
        value = float(cell)
    except ValueError:
        return 0  # N/A (not checked)
    if cell.lstrip("-").isdigit():
        return int(value)
    return 1 if value > MAX_ERROR else 0


def parse(text: str) -> Evidence:
    gpus: dict[int, GpuEvidence] = {}
    rows = []
    avg = None
    test = None
    for raw in text.splitlines():
        line = raw.lstrip("#").rstrip()
        if test is None and (m := _TEST.search(line)):
            test = m.group(1)
        if m := _RANK.search(line):
            rank = int(m.group(1))
            gpus.setdefault(rank, GpuEvidence(index=rank, name=m.group(4)))
            continue
        if m := _AVG.search(line):
            avg = float(m.group(1))
            continue
        if m := _ROW.match(line):
            rows.append(m)
    notes = [
        "nccl-tests measures collectives, not peer copies: pairs are not judged, the collective's result and "
        "bus bandwidth are"
    ]
    partial: list[str] = []
    nccl: dict[str, object] | None = None
    if rows:
        wrong = sum(_wrong(m.group(9)) + _wrong(m.group(13)) for m in rows)
        busbw = avg if avg is not None else max(float(m.group(8)) for m in rows)
        nccl = {
            "test": test or "nccl-tests",
            "world_size": len(gpus) or None,
            "busbw_gbps": busbw,
            "max_busbw_gbps": max(float(m.group(8)) for m in rows),
            "correct": wrong == 0,
            "wrong": wrong,
            "sizes": len(rows),
            "largest_bytes": max(int(m.group(1)) for m in rows),
        }
        if avg is None:
            partial.append("no 'Avg bus bandwidth' line: the capture was cut; bus bandwidth is the best row's")
    else:
        partial.append("nccl-tests header without a result row: the capture ends before the first size")
    return Evidence(source="nccl-tests", gpus=[gpus[k] for k in sorted(gpus)], notes=notes, partial=partial, nccl=nccl)
