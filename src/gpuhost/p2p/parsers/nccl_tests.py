"""nccl-tests (``all_reduce_perf`` and friends) output as :class:`Evidence`.

Each result row is ``size count type redop [root] time algbw busbw #wrong time algbw
busbw #wrong`` (out-of-place, then in-place); older versions have no ``root`` column and
print a maximum ``error`` instead of a count of wrong values, and the oldest (before 2019)
have no ``redop`` column either for the tests without one and print the error as ``0e+00``.
Pastes lose the ``#`` of the comment lines, start mid-table or stop after the header: rows
are found by their shape, a paste without any is partial and judged as "no measurement".

Rank lines (``Rank N Group G Pid P on HOST device D [0x..] NAME``) name the GPUs; over several
hosts each GPU is named by its host and device, not as GPU<rank> of one machine. Every process
printing ``Rank 0`` means a build without MPI: each process ran its own test.
"""

from __future__ import annotations

import re

from gpuhost.p2p.evidence import Evidence, GpuEvidence

_TYPES = "int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|f8e4m3|f8e5m2|char|int|uint"
_OPS = "sum|prod|max|min|avg|mulsum|none"
_ROW = re.compile(
    rf"^\s*(\d+)\s+(\d+)\s+({_TYPES})\s+(?:({_OPS})\s+)?(?:(-?\d+)\s+)?"
    r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$"
)
_RANK = re.compile(
    r"Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^]]*\]\s+(.+?)\s*$"
)

#: Below this largest size a run measures latency only: its bus bandwidth says nothing about the links.
SMALL_BYTES = 1 << 20
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([\d.]+)")
_TEST = re.compile(r"\b(\w+_perf)\b")

#: An ``error`` column (older nccl-tests) above this is wrong data, not rounding.
MAX_ERROR = 1e-2


def looks_like(text: str) -> bool:
    if "Avg bus bandwidth" in text or ("out-of-place" in text and "in-place" in text):
        return True
    if re.search(r"nThread \d+ nGpus \d+", text) or any(_RANK.search(line) for line in text.splitlines()):
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


def _gpus(ranks: list[tuple[int, int, str, int, str]]) -> tuple[list[GpuEvidence], bool]:
    """GPUs from the rank lines, and whether the processes ran separately (every one is rank 0, no MPI)."""
    separate = len(ranks) > len({r[0] for r in ranks})
    hosts = {r[2] for r in ranks}
    if not separate and len(hosts) <= 1:
        by_rank = {r[0]: GpuEvidence(index=r[0], name=r[4]) for r in ranks}
        return [by_rank[k] for k in sorted(by_rank)], False
    seen: dict[tuple[str, int], GpuEvidence] = {}
    for _rank, _pid, host, device, name in sorted(ranks, key=lambda r: (r[2], r[3])):
        if (host, device) not in seen:
            seen[(host, device)] = GpuEvidence(index=len(seen), name=name, host=host, device=device)
    return list(seen.values()), separate


def parse(text: str) -> Evidence:
    ranks: list[tuple[int, int, str, int, str]] = []
    rows = []
    avg = None
    test = None
    for raw in text.splitlines():
        line = raw.strip().lstrip("#").rstrip()
        if test is None and (m := _TEST.search(line)):
            test = m.group(1)
        if m := _RANK.search(line):
            ranks.append((int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)), m.group(5)))
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
    gpus, separate = _gpus(ranks)
    hosts = sorted({r[2] for r in ranks})
    if separate:
        notes.append(
            f"{len(ranks)} processes each printed Rank 0: nccl-tests was built without MPI (make MPI=1), so every "
            "process ran its own test; nothing was measured across processes or nodes"
        )
    elif len(hosts) > 1:
        notes.append(f"{len(ranks)} ranks on {len(hosts)} hosts ({', '.join(hosts)}): GPUs are named by host")
    partial: list[str] = []
    nccl: dict[str, object] | None = None
    if rows:
        wrong = sum(_wrong(m.group(9)) + _wrong(m.group(13)) for m in rows)
        out_max = max(float(m.group(8)) for m in rows)
        in_max = max(float(m.group(12)) for m in rows)
        busbw = avg if avg is not None else out_max
        largest = max(int(m.group(1)) for m in rows)
        nccl = {
            "test": test or "nccl-tests",
            "world_size": (1 if separate else len(ranks)) or None,
            "hosts": len(hosts) or None,
            "separate_processes": len(ranks) if separate else None,
            "busbw_gbps": busbw,
            "max_busbw_gbps": out_max,
            "inplace_max_busbw_gbps": in_max,
            "correct": wrong == 0,
            "wrong": wrong,
            "sizes": len(rows),
            "largest_bytes": largest,
            "small_only": largest < SMALL_BYTES,
            "reduces": any(m.group(4) for m in rows),  # a redop column: a reduction (all-reduce, reduce, ...)
        }
        if out_max and abs(in_max - out_max) / out_max > 0.25:
            notes.append(f"in-place bus bandwidth peaks at {in_max} GB/s, out-of-place at {out_max} GB/s")
        if avg is None:
            partial.append("no 'Avg bus bandwidth' line: the capture was cut; bus bandwidth is the best row's")
    else:
        partial.append("nccl-tests header without a result row: the capture ends before the first size")
    return Evidence(source="nccl-tests", gpus=gpus, notes=notes, partial=partial, nccl=nccl)
