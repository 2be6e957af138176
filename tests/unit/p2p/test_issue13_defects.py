"""One test per defect of issue 13 in reading and judging P2P captures (each failed before the fix)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gpuhost.checks import Level, registered
from gpuhost.cli.app import _register, app
from gpuhost.p2p.diagnosis import diagnose
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures
from gpuhost.p2p.judge import judge
from gpuhost.p2p.parsers import read_capture_file
from gpuhost.p2p.tables import matrices
from tests.unit.p2p.captures import fixture

_register([])  # every command module, whatever this process was started with
runner = CliRunner()


def _run(*names: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    args = ["verify", "p2p", "--json"]
    for n in names:
        args += ["--from-file", str(fixture(n))]
    r = runner.invoke(app, args)
    return r.exit_code, json.loads(r.output)


def test_nvbandwidth_matrix_without_running_line_is_read() -> None:
    ev, _ = read_capture_file(fixture("nvbandwidth_6x-a6000_v0.8_no-running-line.txt"))
    p = ev.pair(3, 4)
    assert p is not None and p.p2p is not None and p.p2p.uni_gbps == 26.34


def test_waived_peer_test_is_a_fail_with_its_reason() -> None:
    code, out = _run("nvbandwidth_2x-rtx2080ti_v0.2_waived.txt")
    assert code == 1
    f = out["machine"][0]
    assert (f["check"], f["level"]) == ("p2p-waived", "FAIL") and "peer-to-peer mapping failed" in f["message"]
    assert "GeForce" in out["diagnosis"][0]


def test_validation_failure_fails_on_integrity_and_never_exits_2() -> None:
    code, out = _run("nvbandwidth_8x-a100-sxm4_v0.7_validation-failure.txt")
    assert code == 1 and out["verdict"] == "FAIL"
    f = out["machine"][0]
    assert f["check"] == "integrity" and "Invalid value when checking the pattern" in f["message"]
    assert "NCCL_P2P_DISABLE=1" in " ".join(out["diagnosis"])


def test_topo_m_has_a_reader_and_its_link_types_reach_the_judge() -> None:
    ev, _ = read_capture_file(fixture("topo-m_8x-nv18_10nic_vllm_excerpt.txt"))
    assert ev.source == "nvidia-smi topo -m"
    link = ev.pair(0, 7)
    assert link is not None and link.topology == "NV18"
    assert ev.nic_links[(0, "NIC3")] == "PIX" and ev.gpus[4].cpu_affinity == "56-111,168-223"


def _nvlink_pair(latency: float | None = None, uni: float | None = None, topology: str | None = "NV18") -> Evidence:
    gpus = [GpuEvidence(index=i, name="NVIDIA H100 80GB HBM3") for i in range(2)]
    pairs = [
        PairEvidence(
            src=i, dst=1 - i, topology=topology, can_access_peer=True, p2p=PathFigures(uni_gbps=uni, latency_us=latency)
        )
        for i in range(2)
    ]
    return Evidence(source="test", gpus=gpus, pairs=pairs)


def test_nvlink_pairs_get_nvlink_latency_lines() -> None:
    v = judge(_nvlink_pair(latency=3.4))
    lat = [f for f in v.findings if f.check == "p2p-latency"]
    assert lat and all(f.level == Level.PASS for f in lat)
    pcie = _nvlink_pair(latency=3.4, topology="PIX")
    assert any(f.level == Level.WARN for f in judge(pcie).findings if f.check == "p2p-latency")


def test_nvlink_link_count_and_band_come_from_the_topology() -> None:
    v = judge(_nvlink_pair(uni=371.0))
    uni = next(f for f in v.findings if f.check == "uni-bandwidth")
    assert uni.level == Level.PASS and "18 NVLink links (450.0 GB/s)" in uni.message


def test_nvlink_advice_talks_about_lanes_and_fabric_manager_not_acs() -> None:
    ev = _nvlink_pair(uni=150.0)
    lines = diagnose(judge(ev), ev)
    assert "fabricmanager" in lines[0] and "ACS" not in lines[0]


def test_nccl_tests_header_only_is_recognised_not_a_generic_error() -> None:
    code, out = _run("nccl-tests_all-reduce_2x-v100-2node_header-only.txt")
    assert code == 2 and out["source"] == "nccl-tests"
    assert "header without a result row" in out["cannot_run"]


def test_json_pairs_carry_figures_and_gpus_are_listed() -> None:
    _, out = _run("cuda-samples_9gpu-rtxpro6000-5090_pcie-p2p.txt")
    assert len(out["gpus"]) == 9 and out["gpus"][0]["name"]
    figs = out["pairs"][0]["figures"]
    assert figs["p2p"]["uni_gbps"] > 50 and figs["p2p"]["latency_us"] < 1 and figs["staged"]["uni_gbps"] > 30


def test_pass_without_link_does_not_say_nothing_was_measured() -> None:
    _, out = _run("nvbandwidth_8x-h100-azure-vm_nvlink.txt")
    assert "nothing was measured" not in out["diagnosis"][0]
    assert "not judged against a line rate" in out["diagnosis"][0]


def test_nvbandwidth_read_matrix_is_not_titled_p2p_writes() -> None:
    ev, _ = read_capture_file(fixture("nvbandwidth_8x-h100-azure-vm_nvlink.txt"))
    titles = [m.splitlines()[0] for m in matrices(ev)]
    assert titles and not any("P2P Writes" in t for t in titles)
    assert any("device_to_device_memcpy_read_ce" in t for t in titles)


def test_p2p_checks_are_registered_with_the_shared_registry() -> None:
    names = set(registered())
    assert {
        "p2p-status",
        "p2p-latency",
        "uni-bandwidth",
        "bidi-bandwidth",
        "integrity",
        "p2p-waived",
        "nccl",
        "host-link",
    } <= names
    assert registered()["p2p-waived"].group == "p2p"


def test_waived_test_passes_when_p2p_is_not_expected() -> None:
    r = runner.invoke(
        app,
        [
            "verify",
            "p2p",
            "--json",
            "--no-expect-p2p",
            "--from-file",
            str(fixture("nvbandwidth_2x-rtx2080ti_v0.2_waived.txt")),
        ],
    )
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["machine"][0]["level"] == "PASS" and "as expected" in out["machine"][0]["message"]
