"""Regressions against a baseline; matrices in cuda-samples' layout; the shipped bundle."""

from __future__ import annotations

import copy
import io
import zipfile

from gpuhost.p2p.baseline import compare
from gpuhost.p2p.bundle import build_probe_zip
from gpuhost.p2p.parsers import read_capture, read_capture_file
from gpuhost.p2p.parsers.cuda_samples import parse_matrices
from gpuhost.p2p.tables import matrices
from tests.unit.p2p.captures import fixture


def test_a_run_compared_with_itself_has_no_regression() -> None:
    ev, _ = read_capture_file(fixture("probe_2x-h200-vm_nvlink.json"))
    assert compare(ev, ev) == []


def test_slower_peer_copies_and_slower_latency_are_regressions() -> None:
    base, _ = read_capture_file(fixture("probe_2x-h200-vm_nvlink.json"))
    now = copy.deepcopy(base)
    pair = now.pair(0, 1)
    assert pair is not None and pair.p2p is not None
    pair.p2p.uni_gbps = pair.p2p.uni_gbps * 0.8  # type: ignore[operator]
    pair.p2p.latency_us = 14.0
    now.gpus[1].h2d_gbps = 53.0 * 0.95  # within 10 %: not a regression
    found = {(r.subject, r.metric) for r in compare(now, base)}
    assert found == {("GPU0->GPU1", "peer one-way"), ("GPU0->GPU1", "peer 16-byte latency")}


def test_matrices_print_in_the_layout_cuda_samples_uses() -> None:
    ev, _ = read_capture_file(fixture("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt"))
    text = "\n".join(matrices(ev))
    assert "   D\\D     0      1      2" in text
    # Read back with the cuda-samples parser: the same figures come out.
    again = parse_matrices(text)
    assert again[("p2p", "uni")][0][5] == 56.58
    assert again[("staged", "latency")][6][0] == 12.61
    assert again[("staged", "uni")][0][0] == 1611.24  # diagonal: read + write, as cuda-samples prints it


def test_bundle_holds_the_probe_pynvml_and_an_entry_point() -> None:
    data = build_probe_zip()
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert "__main__.py" in names and "pynvml.py" in names
    assert {"probe/cuda.py", "probe/measure.py", "probe/cli.py"} <= set(names)
    assert build_probe_zip() == data  # deterministic: same code, same bytes


def test_probe_package_imports_nothing_from_gpuhost_or_third_parties() -> None:
    import ast
    from pathlib import Path

    import gpuhost.probe as probe

    allowed = {
        "__future__",
        "collections",
        "argparse",
        "ctypes",
        "dataclasses",
        "json",
        "os",
        "platform",
        "shutil",
        "socket",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "time",
        "typing",
        "pynvml",
    }
    for path in Path(probe.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [(node.module or "").split(".")[0]]
            else:
                continue
            assert set(names) <= allowed, f"{path.name} imports {names}"


def test_status_only_capture_prints_no_matrix() -> None:
    ev, _ = read_capture(fixture("topo-p2p_2x-h200-vm_nvlink.txt").read_text())
    assert matrices(ev) == []
