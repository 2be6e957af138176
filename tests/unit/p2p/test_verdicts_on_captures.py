"""The verdicts a user gets from --from-file on real captures (see tests/fixtures/p2p/SOURCE.md)."""

from __future__ import annotations

from gpuhost.p2p.diagnosis import diagnose
from gpuhost.p2p.judge import Level, judge
from gpuhost.p2p.parsers import read_capture_file
from tests.unit.p2p.captures import fixture


def _judged(name: str, **kw: object):  # type: ignore[no-untyped-def]
    ev, _ = read_capture_file(fixture(name))
    v = judge(ev, **kw)  # type: ignore[arg-type]
    return ev, v, diagnose(v, ev)


def test_p2p_unavailable_fails_and_names_the_geforce_gate() -> None:
    ev, v, words = _judged("cuda-samples_2x-rtx4090_no-p2p.txt")
    assert v.level == Level.FAIL and v.exit_code == 1
    assert all(p.p2p == "unavailable" for p in v.pairs)
    assert "GeForce" in words[0] and "P2P unavailable" in words[0]


def test_p2p_unavailable_passes_when_not_expected_and_the_staged_path_is_sound() -> None:
    _, v, words = _judged("cuda-samples_2x-rtx4090_no-p2p.txt", expect_p2p=False, link_override=(4, 16))
    assert v.level == Level.PASS
    checks = {f.check for p in v.pairs for f in p.findings}
    assert {"staged-bandwidth", "staged-latency"} <= checks
    assert "as you said to expect" in words[0]


def test_pcie_p2p_working_passes_on_latency_and_duplex() -> None:
    _, v, words = _judged("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt")
    assert v.level == Level.PASS
    assert all(p.path == "pcie" and p.p2p == "available" for p in v.pairs)
    assert "P2P is available between every pair" in words[0]


def test_pcie_p2p_judged_against_the_line_rate_when_the_link_is_given() -> None:
    _, v, _ = _judged("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt", link_override=(5, 16))
    uni = [f for p in v.pairs for f in p.findings if f.check == "uni-bandwidth"]
    assert len(uni) == 72 and all(f.level == Level.PASS for f in uni)  # 55.6-56.6 of 63 GB/s
    _, slow, _ = _judged("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt", link_override=(6, 16))
    # The same figures on a Gen6 x16 link are 46 % of its rate; with the topology unknown the
    # cross-socket band applies (warn from 45 %), so this warns rather than fails.
    assert slow.level == Level.WARN
    assert "topology unknown" in [f for f in slow.findings if f.check == "uni-bandwidth"][0].message


def test_nvlink_pairs_pass_and_unbridged_pairs_fail() -> None:
    _, v, words = _judged("cuda-samples_4x-a100-pcie_nvlink-pairs.txt")
    by = {(p.src, p.dst): p for p in v.pairs}
    assert by[(0, 1)].path == "nvlink" and by[(0, 1)].level == Level.PASS
    assert by[(2, 3)].level == Level.PASS
    assert by[(0, 2)].p2p == "unavailable" and by[(0, 2)].level == Level.FAIL
    assert v.level == Level.FAIL
    assert "GPU0->GPU2" in words[0]


def test_nvlink_in_a_cloud_vm_from_nvbandwidth_passes() -> None:
    ev, v, _ = _judged("nvbandwidth_8x-h100-azure-vm_nvlink.txt")
    assert v.level == Level.PASS and len(v.pairs) == 56
    assert all(p.path == "nvlink" for p in v.pairs)  # 370 GB/s cannot be PCIe


def test_driver_status_from_a_vm_passes_and_says_it_measured_nothing() -> None:
    _, v, words = _judged("topo-p2p_2x-h200-vm_nvlink.txt")
    assert v.level == Level.PASS
    assert any("status only" in n for n in v.notes)
    assert "nothing was measured" in words[0]


def test_probe_report_from_the_h200_vm_passes_every_check() -> None:
    ev, v, words = _judged("probe_2x-h200-vm_nvlink.json")
    assert ev.in_vm is True
    assert v.level == Level.PASS
    checks = {f.check for f in v.findings}
    assert {"p2p-latency", "uni-bandwidth", "bidi-bandwidth", "integrity", "host-link", "nccl"} <= checks
    assert "data integrity" in words[0]
