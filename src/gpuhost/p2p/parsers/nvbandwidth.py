"""``nvbandwidth`` plain-text output as :class:`Evidence`, found by its matrix titles.

A test prints ``Running <name>.``, a title such as
``memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)``, a header of column numbers, one
row per source and ``SUM <name> <value>``. Posted excerpts often start at the title and
end at ``SUM``, or stop mid-matrix, so a matrix is recognised by its title and named by
whichever of ``Running``/``SUM`` is there (by the title alone when neither is). ``N/A``
marks pairs without peer access. ``->`` means data flows from the row's GPU to the
column's, ``<-`` the other way. Copy-engine tests are judged first; an SM-copy test (a copy
kernel) gives the figures only where the copy-engine test of the same kind is absent (a run
of ``-t device_to_device_memcpy_read_sm`` alone still shows every pair's peer access and
bandwidth). A named test's engine is its name's suffix, not the title's: nvbandwidth v0.2
printed ``memcpy CE`` above ``device_to_device_memcpy_read_sm`` (NVIDIA/nvbandwidth#14,
testcases_sm.cpp).

``Waiving <test>.`` means the tool skipped the test (for device-to-device tests: the
peer mapping failed); ``Invalid value when checking the pattern`` / ``ASSERT ...
memcmpPatternHelper`` means a copy delivered wrong data. Both become evidence, never a
read error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuhost.errors import ProbeError
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures
from gpuhost.p2p.parsers.common import number, strip_ansi

_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F:.]+)\))?\s*$")
_RUNNING = re.compile(r"^Running (\w+?)\.?$")
_WAIVING = re.compile(r"^Waiving (\w+?)\.?$")
_SUM = re.compile(r"^SUM (\w+) ([-\d.]+)")
_TITLE = re.compile(r"^memcpy (CE|SM) (CPU|GPU)\(row\) (<->|->|<-) (CPU|GPU)\(column\) bandwidth \(GB/s\)")
_HEADER = re.compile(r"^\d+(?:\s+\d+)*$")
_ROW = re.compile(r"^(\d+)\s+((?:(?:N/A|[-\d.]+)\s*)+)$")
_BAD_DATA = re.compile(r"Invalid value when checking the pattern|ASSERT in expression .*memcmpPattern")

#: (engine, row, arrow, column) of an unnamed matrix -> the test that prints that title.
_BY_TITLE = {
    ("CE", "GPU", "->", "GPU"): "device_to_device_memcpy_read_ce",
    ("CE", "GPU", "<-", "GPU"): "device_to_device_memcpy_write_ce",
    ("CE", "GPU", "<->", "GPU"): "device_to_device_bidirectional_memcpy_read_ce",
    ("CE", "CPU", "->", "GPU"): "host_to_device_memcpy_ce",
    ("CE", "CPU", "<-", "GPU"): "device_to_host_memcpy_ce",
    ("CE", "CPU", "<->", "GPU"): "host_to_device_bidirectional_memcpy_ce",
}
UNI_TESTS = ("device_to_device_memcpy_write_ce", "device_to_device_memcpy_read_ce")
BIDI_TESTS = ("device_to_device_bidirectional_memcpy_write_ce", "device_to_device_bidirectional_memcpy_read_ce")
#: SM-copy device-to-device tests: their figures are the pairs' when no copy-engine test of that kind ran. The SM
#: bidirectional tests report the sum of both directions (nvbandwidth README), not one stream, so they are not used.
SM_UNI_TESTS = ("device_to_device_memcpy_write_sm", "device_to_device_memcpy_read_sm")
HOST_TESTS = {
    "host_to_device_memcpy_ce": "h2d_gbps",
    "device_to_host_memcpy_ce": "d2h_gbps",
    "device_local_copy": "d2d_gbps",
}
#: SM-copy host tests: their figures are kept when the copy-engine test of the same direction is absent.
SM_HOST_TESTS = {"host_to_device_memcpy_sm": "h2d_gbps", "device_to_host_memcpy_sm": "d2h_gbps"}


def looks_like(text: str) -> bool:
    clean = strip_ansi(text)
    return (
        "nvbandwidth Version" in clean
        or bool(_TITLE.search(clean.replace("> ", "")))
        or bool(re.search(r"^[>\s]*(Running|Waiving) \w+_(memcpy_(ce|sm)|copy)\.", clean, re.M))
    )


@dataclass
class Matrix:
    """One result matrix as printed."""

    title: str
    engine: str  # CE or SM
    arrow: str
    key: tuple[str, str, str] = ("", "", "")  # (row kind, arrow, column kind)
    name: str | None = None
    columns: int = 0
    rows: list[list[float | None]] = field(default_factory=list)
    closed: bool = False  # its SUM line was seen


@dataclass
class Reading:
    matrices: dict[str, Matrix] = field(default_factory=dict)
    waived: dict[str, str] = field(default_factory=dict)
    bad_data: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)


def _waiver_reason(test: str) -> str:
    if test.startswith("device_to_device"):
        return "the peer-to-peer mapping failed: P2P is not supported between these GPUs here"
    return "nvbandwidth skipped it"


def read_matrices(text: str) -> Reading:
    """Every matrix, waiver and data error in the text, and what is missing from it."""
    out = Reading()
    running: str | None = None
    current: Matrix | None = None

    def finish(m: Matrix | None) -> None:
        if m is None or not m.rows:
            return
        m.name = m.name or _BY_TITLE.get((m.engine, *m.key))
        if m.name is None:
            return
        if m.name.endswith(("_ce", "_sm")):
            m.engine = m.name[-2:].upper()  # the test's own engine (v0.2's read_sm title says CE)
        out.matrices[m.name] = m

    for raw in text.splitlines():
        line = raw.strip()
        while line.startswith(">"):
            line = line[1:].strip()  # markdown quotes and shell prompts copied with the output
        if m := _RUNNING.match(line):
            finish(current)
            current, running = None, m.group(1)
            continue
        if m := _WAIVING.match(line):
            finish(current)
            current, running = None, None
            out.waived[m.group(1)] = _waiver_reason(m.group(1))
            continue
        if _BAD_DATA.search(line):
            where = f" in {running}" if running else ""
            out.bad_data.append(line + where)
            continue
        if m := _TITLE.match(line):
            finish(current)
            current = Matrix(
                title=line, engine=m.group(1), arrow=m.group(3), name=running, key=(m.group(2), m.group(3), m.group(4))
            )
            running = None
            continue
        if m := _SUM.match(line):
            if current is not None:
                current.name = current.name or m.group(1)
                current.closed = True
            finish(current)
            current = None
            continue
        if current is None:
            continue
        if _HEADER.match(line) and not current.rows and not current.columns:
            current.columns = len(line.split())
            continue
        if m := _ROW.match(line):
            current.rows.append([number(c) for c in m.group(2).split()])
    if current is not None:
        finish(current)
        name = current.name or "a matrix"
        if not current.rows:
            out.partial.append(f"the capture ends after the title of {name}")
    if running is not None and not any(running in b for b in out.bad_data):
        out.partial.append(f"{running} printed no result: the capture ends there")
    for matrix in out.matrices.values():
        if matrix.key[0] == "GPU" and matrix.columns and len(matrix.rows) < matrix.columns:
            out.partial.append(f"{matrix.name} shows {len(matrix.rows)} of {matrix.columns} rows")
    return out


def _gpus(text: str) -> dict[int, GpuEvidence]:
    gpus: dict[int, GpuEvidence] = {}
    for line in text.splitlines():
        m = _DEVICE.match(line.strip())
        if m:
            bus = m.group(3)
            gpus[int(m.group(1))] = GpuEvidence(
                index=int(m.group(1)), name=m.group(2).strip(), bus_id=bus.upper() if bus else None
            )
    return gpus


def _cells(m: Matrix) -> dict[tuple[int, int], float | None]:
    """(src GPU, dst GPU) -> GB/s, following the title's arrow."""
    out: dict[tuple[int, int], float | None] = {}
    reverse = m.arrow == "<-"
    for r, row in enumerate(m.rows):
        for c, value in enumerate(row):
            out[(c, r) if reverse else (r, c)] = value
    return out


def parse(text: str) -> Evidence:
    text = strip_ansi(text)
    if text.lstrip().startswith("{"):
        raise ProbeError("nvbandwidth JSON (-j) is not read yet; give the plain-text output (run without -j)")
    gpus = _gpus(text)
    reading = read_matrices(text)
    tests = reading.matrices
    if not tests and not reading.waived and not reading.bad_data:
        raise ProbeError("no nvbandwidth result matrix, waiver or data error found in the file")

    for key, attr in (*HOST_TESTS.items(), *SM_HOST_TESTS.items()):
        if key in tests and tests[key].rows:
            for col, value in enumerate(tests[key].rows[0]):
                g = gpus.setdefault(col, GpuEvidence(index=col))
                if getattr(g, attr) is None:  # a copy-engine figure (read first) wins over an SM one
                    setattr(g, attr, value)

    uni_test = next((t for t in UNI_TESTS if t in tests), None) or next((t for t in SM_UNI_TESTS if t in tests), None)
    bidi_test = next((t for t in BIDI_TESTS if t in tests), None)
    uni = _cells(tests[uni_test]) if uni_test else {}
    bidi = _cells(tests[bidi_test]) if bidi_test else {}
    n = max([len(gpus)] + [max(i, j) + 1 for i, j in uni] + [max(i, j) + 1 for i, j in bidi])
    for i in range(n):
        gpus.setdefault(i, GpuEvidence(index=i))
    pairs = []
    if uni or bidi:
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                u, b = uni.get((i, j)), bidi.get((i, j))
                measured = (i, j) in uni or (i, j) in bidi
                can = (u is not None or b is not None) if measured else None
                pair = PairEvidence(src=i, dst=j, can_access_peer=can)
                if can:
                    pair.p2p = PathFigures(uni_gbps=u, bidi_gbps=b)
                elif can is False:
                    pair.p2p_skipped = "nvbandwidth printed N/A: no peer access"
                pairs.append(pair)
    notes = [
        "nvbandwidth measures no 16-byte latency: latency is not judged; it checks the data it copies and "
        "reports only failures"
    ]
    sm = sorted(name for name, m in tests.items() if m.engine == "SM")
    if sm:
        kept = [t for t in sm if t in SM_HOST_TESTS and not any(c in tests for c in HOST_TESTS)]
        kept += [t for t in sm if t == uni_test]
        if kept:
            notes.append(
                f"SM-copy tests (copy kernels, not the copy engines): {', '.join(sm)}; their figures stand in where "
                f"no copy-engine test measured the same: {', '.join(kept)}"
            )
        else:
            notes.append(f"SM-copy tests are listed, not judged: {', '.join(sm)}")
    d2d_failed = any(" in device_to_device" in b for b in reading.bad_data)
    if not pairs and not reading.waived and not d2d_failed:
        notes.append("no device-to-device copy-engine test in this output")
    elif not pairs and d2d_failed:
        notes.append("the device-to-device test stopped on wrong data before printing its matrix: no pair figures")
    ev = Evidence(
        source="nvbandwidth",
        gpus=[gpus[k] for k in sorted(gpus)],
        pairs=pairs,
        notes=notes,
        partial=reading.partial,
        waived=dict(reading.waived),
        integrity_failures=list(reading.bad_data),
    )
    if uni_test:
        engine = tests[uni_test].engine
        ev.p2p_copy = f"{engine} {'reads' if '_read_' in uni_test else 'writes'}, nvbandwidth {uni_test}"
    return ev
