"""p2pBandwidthLatencyTest captures (real outputs, see tests/fixtures/p2p/SOURCE.md)."""

from __future__ import annotations

import pytest

from gpuhost.p2p.parsers import read_capture_file
from gpuhost.p2p.parsers.cuda_samples import parse_matrices
from tests.unit.p2p.captures import fixture


def test_geforce_pair_without_peer_access() -> None:
    ev, report = read_capture_file(fixture("cuda-samples_2x-rtx4090_no-p2p.txt"))
    assert report is None and ev.source == "p2pBandwidthLatencyTest"
    assert [g.name for g in ev.gpus] == ["NVIDIA GeForce RTX 4090"] * 2
    assert ev.gpus[1].bus_id == "00000000:C1:00.0"
    p = ev.pair(0, 1)
    assert p is not None and p.can_access_peer is False
    # The "P2P=Enabled" figures of a pair without access are host-staged: not kept as peer figures.
    assert p.p2p is None
    assert p.staged is not None
    assert (p.staged.uni_gbps, p.staged.bidi_gbps, p.staged.latency_us) == (21.73, 29.84, 12.84)


def test_latency_takes_the_gpu_block_not_the_cpu_block() -> None:
    text = fixture("cuda-samples_2x-rtx4090_no-p2p.txt").read_text()
    m = parse_matrices(text)
    assert m[("staged", "latency")] == {0: [1.33, 12.84], 1: [11.44, 1.31]}
    assert m[("p2p", "latency")] == {0: [1.33, 13.10], 1: [11.59, 1.30]}


def test_connectivity_matrix_stands_in_when_access_lines_are_missing() -> None:
    ev, _ = read_capture_file(fixture("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt"))
    assert len(ev.gpus) == 9 and len(ev.pairs) == 72
    assert all(p.can_access_peer for p in ev.pairs)
    p = ev.pair(0, 5)
    assert p is not None and p.p2p is not None and p.staged is not None
    assert p.p2p.uni_gbps == 56.58 and p.p2p.bidi_gbps == 111.35 and p.p2p.latency_us == 0.37
    assert p.staged.latency_us == 14.05


def test_mixed_machine_keeps_nvlink_pairs_apart() -> None:
    ev, _ = read_capture_file(fixture("cuda-samples_4x-a100-pcie_nvlink-pairs.txt"))
    assert ev.pair(0, 1).p2p.uni_gbps == 275.07  # type: ignore[union-attr]
    assert ev.pair(0, 2).can_access_peer is False  # type: ignore[union-attr]
    assert ev.pair(0, 2).p2p is None  # type: ignore[union-attr]
    # The diagonal counts read and write: half of it is the local copy rate.
    assert ev.gpu(0).d2d_gbps == pytest.approx(1508.20 / 2)  # type: ignore[union-attr]
