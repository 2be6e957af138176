"""nvbandwidth text and nvidia-smi topo -p2p captures."""

from __future__ import annotations

import pytest

from gpuhost.errors import ProbeError
from gpuhost.p2p.parsers import read_capture, read_capture_file
from tests.unit.p2p.captures import fixture


def test_nvbandwidth_reads_every_pair_and_not_the_header_as_a_row() -> None:
    ev, _ = read_capture_file(fixture("nvbandwidth_8x-h100-azure-vm_nvlink.txt"))
    assert ev.source == "nvbandwidth"
    assert len(ev.gpus) == 8 and len(ev.pairs) == 56
    assert ev.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert ev.pair(0, 7).p2p.uni_gbps == 371.67  # type: ignore[union-attr]
    assert ev.pair(2, 4).p2p.uni_gbps == 372.96  # type: ignore[union-attr]
    assert all(p.can_access_peer for p in ev.pairs)


def test_nvbandwidth_json_is_refused_with_a_way_out() -> None:
    with pytest.raises(ProbeError, match="plain-text"):
        read_capture('{"nvbandwidth": {"testcases": []}}')


def test_topo_p2p_sections_name_their_capability() -> None:
    ev, _ = read_capture_file(fixture("topo-p2p_2x-h200-vm_nvlink.txt"))
    assert ev.source == "nvidia-smi topo -p2p"
    p = ev.pair(0, 1)
    assert p is not None
    # ANSI underlines stripped; PCIe path NS on an NVLink pair, everything else OK.
    assert p.nvml_status == {"read": "OK", "write": "OK", "nvlink": "OK", "atomics": "OK", "pci": "NS"}


def test_topo_p2p_without_a_capability_line_is_read_write() -> None:
    # The first matrix of the capture, as nvidia-smi printed it, without the line naming it.
    text = fixture("topo-p2p_2x-h200-vm_nvlink.txt").read_text()
    first = text.split("== nvidia-smi topo -p2p w")[0].split("\n", 1)[1]
    ev, _ = read_capture(first)
    assert ev.pair(1, 0).nvml_status == {"read": "OK", "write": "OK"}  # type: ignore[union-attr]


def test_unknown_text_is_refused() -> None:
    with pytest.raises(ProbeError, match="not a format"):
        read_capture("hello\nworld\n", source="x.txt")
