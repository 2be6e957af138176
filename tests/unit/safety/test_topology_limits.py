"""A pasted topology past what one machine has is refused with exit 2 at once, not judged forever (issue 31,
item 8: "a huge topology file never finishes"). The inputs are the real 5-GPU ``nvidia-smi topo -m`` capture
(tests/fixtures/p2p, its SOURCE.md) grown to more GPUs, or padded past the size bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CAPTURE = (REPO / "tests/fixtures/p2p/topo-m_5x-epyc-node-phb_tabs_prompt.txt").read_text()


def grown(n: int) -> str:
    """The capture's prompt, header and rows in its own layout (tabs, ' X ' on the diagonal), for n GPUs."""
    lines = CAPTURE.splitlines(keepends=True)
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    rows = "".join(
        f"GPU{i}\t" + "\t".join(" X " if i == j else "NODE" for j in range(n)) + "\t0-63\t0\t\tN/A\n" for i in range(n)
    )
    legend = "".join(lines[lines.index("\n") :])
    return lines[0] + header + rows + legend


def verify(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuhost", "verify", "p2p", "--from-file", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_grown_capture_has_the_capture_s_layout() -> None:
    """Five GPUs grown are the capture but for its one PHB pair (GPU3-GPU4)."""
    assert grown(5) == CAPTURE.replace("\tPHB\t", "\tNODE\t")


@pytest.mark.parametrize("n", [33, 600])
def test_a_topology_of_more_gpus_than_one_machine_has_is_refused(tmp_path: Path, n: int) -> None:
    path = tmp_path / "topo.txt"
    path.write_text(grown(n))
    r = verify(path)  # main judged 600 GPUs for more than two minutes
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: the topo -m header names {n} GPUs" in r.stderr and "NV_MAX_DEVICES is 32" in r.stderr
    assert "Traceback" not in r.stderr


def test_thirty_two_gpus_are_read(tmp_path: Path) -> None:
    path = tmp_path / "topo.txt"
    path.write_text(grown(32))
    r = verify(path)
    assert "GPU30<->GPU31: NODE" in r.stdout, r.stdout + r.stderr
    assert "CANNOT RUN: no measurement" in r.stdout  # a topology alone is judged, as the 5-GPU capture is


def test_a_capture_file_past_8_mib_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "topo.txt"
    path.write_text(CAPTURE + ("x" * 1023 + "\n") * (8 * 1024 + 1))
    r = verify(path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}: larger than 8 MiB" in r.stderr
