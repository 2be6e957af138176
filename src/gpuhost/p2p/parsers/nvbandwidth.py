"""``nvbandwidth`` plain-text output as :class:`Evidence`.

Each test prints ``Running <name>.``, a title such as
``memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)``, a header of column numbers
and one row per source; ``N/A`` marks pairs without peer access (nvbandwidth only
measures device-to-device copies with peer access on). ``->`` means data flows from
the row's GPU to the column's, ``<-`` the other way. Only copy-engine tests are read;
SM-copy and latency tests measure other things and are skipped.
"""

from __future__ import annotations

import re

from gpuhost.errors import ProbeError
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures
from gpuhost.p2p.parsers.common import number, strip_ansi

_DEVICE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9a-fA-F:.]+)\))?\s*$")
_RUNNING = re.compile(r"^Running (\S+?)\.?$")
_ROW = re.compile(r"^(\d+)\s+((?:(?:N/A|[-\d.]+)\s*)+)$")


def looks_like(text: str) -> bool:
    return "nvbandwidth Version" in text or bool(re.search(r"^\s*Running \w+_memcpy_ce\.", text, re.M))


def _tests(text: str) -> dict[str, tuple[str, list[list[float | None]]]]:
    """Test name -> (title, rows) for every test that printed a matrix."""
    out: dict[str, tuple[str, list[list[float | None]]]] = {}
    name: str | None = None
    title = ""
    rows: list[list[float | None]] = []
    for raw in text.splitlines():
        line = raw.strip()
        m = _RUNNING.match(line)
        if m:
            if name and rows:
                out[name] = (title, rows)
            name, title, rows = m.group(1), "", []
            continue
        if name is None:
            continue
        if "(GB/s)" in line:
            title = line
            continue
        m = _ROW.match(line)
        if m and title:
            cells = m.group(2).split()
            if not rows and "." not in line and "N/A" not in line:
                continue  # the header of column numbers
            rows.append([number(c) for c in cells])
    if name and rows:
        out[name] = (title, rows)
    return out


def parse(text: str) -> Evidence:
    text = strip_ansi(text)
    if text.lstrip().startswith("{"):
        raise ProbeError("nvbandwidth JSON (-j) is not read yet; give the plain-text output (run without -j)")
    gpus: dict[int, GpuEvidence] = {}
    for line in text.splitlines():
        m = _DEVICE.match(line.strip())
        if m:
            gpus[int(m.group(1))] = GpuEvidence(index=int(m.group(1)), name=m.group(2).strip())
    tests = _tests(text)
    if not tests:
        raise ProbeError("no nvbandwidth result matrix found in the file")

    def cells(test: str) -> dict[tuple[int, int], float | None]:
        """(src GPU, dst GPU) -> GB/s, following the title's arrow."""
        title, rows = tests[test]
        out: dict[tuple[int, int], float | None] = {}
        reverse = "<-" in title and "<->" not in title
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                out[(c, r) if reverse else (r, c)] = value
        return out

    for key, attr in (("host_to_device_memcpy_ce", "h2d_gbps"), ("device_to_host_memcpy_ce", "d2h_gbps"),
                      ("device_local_copy", "d2d_gbps")):
        if key in tests:
            _, rows = tests[key]
            for col, value in enumerate(rows[0]):
                g = gpus.setdefault(col, GpuEvidence(index=col))
                setattr(g, attr, value)

    uni_test = next((t for t in ("device_to_device_memcpy_write_ce", "device_to_device_memcpy_read_ce")
                     if t in tests), None)
    bidi_test = next((t for t in ("device_to_device_bidirectional_memcpy_write_ce",
                                  "device_to_device_bidirectional_memcpy_read_ce") if t in tests), None)
    uni = cells(uni_test) if uni_test else {}
    bidi = cells(bidi_test) if bidi_test else {}
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
    notes = ["nvbandwidth measures no 16-byte latency and checks data itself (not reported here): latency and "
             "integrity are not judged", "nvbandwidth does not print link generation: use --link to judge "
             "PCIe bandwidth against the line rate"]
    if not pairs:
        notes.append("no device-to-device test in this output")
    return Evidence(source="nvbandwidth", gpus=[gpus[k] for k in sorted(gpus)], pairs=pairs, notes=notes)
