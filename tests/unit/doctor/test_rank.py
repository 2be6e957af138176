"""The doctor's ranking on scenarios: findings as the checks give them (a real log through the log scanner, the rest
written as the named check words them), ranked as docs/doctor.md says."""

from pathlib import Path

from gpuhost.checks.finding import Finding, Level
from gpuhost.doctor.gather import Observed
from gpuhost.doctor.rank import fatal, rank, stage_of
from gpuhost.serve.logscan import scan_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def F(level, check, subject="pve1", message="seen"):  # noqa: N802
    return Finding(level, check, subject, message)


def order(findings):
    return [(r.finding.check, r.finding.subject) for r in rank(findings)]


def test_fail_before_warn_then_the_stack_order():
    found = [
        F(Level.WARN, "bench.ttft-explosion", "pve1/CT 200"),
        F(Level.FAIL, "serve.health", "pve2/CT 300"),
        F(Level.WARN, "ct.memlock", "pve1/CT 200"),
        F(Level.FAIL, "host.persistenced"),
        F(Level.FAIL, "host.iommu_groups", "pve2"),
        F(Level.INFO, "doctor.p2p-unknown"),
        F(Level.PASS, "host.cmdline_booted"),
    ]
    assert order(found) == [
        ("host.iommu_groups", "pve2"),  # FAIL, host
        ("host.persistenced", "pve1"),  # FAIL, driver
        ("serve.health", "pve2/CT 300"),  # FAIL, serving
        ("ct.memlock", "pve1/CT 200"),  # WARN, guest
        ("bench.ttft-explosion", "pve1/CT 200"),  # WARN, throughput
        ("doctor.p2p-unknown", "pve1"),  # INFO last; the PASS is not listed
    ]


def test_a_cause_is_ranked_above_its_consequences_whatever_their_level():
    # the seed: tokens never booted -> IOMMU groups missing -> vfio not bound -> P2P off -> throughput plateau
    found = [
        F(Level.FAIL, "host.iommu_groups"),
        F(Level.WARN, "bench.not-compute-bound", "pve1/CT 200"),
        F(Level.FAIL, "host.vfio_bound"),
        F(Level.WARN, "host.cmdline_booted"),  # a WARN cause still leads its FAIL consequences
        F(Level.FAIL, "host.nvidia_module", "pve2"),
    ]
    ranked = rank(found)
    assert [(r.finding.check, r.finding.subject) for r in ranked] == [
        ("host.nvidia_module", "pve2"),  # FAIL on another node: nothing there explains it
        ("host.cmdline_booted", "pve1"),
        ("host.iommu_groups", "pve1"),
        ("host.vfio_bound", "pve1"),
        ("bench.not-compute-bound", "pve1/CT 200"),
    ]
    assert [r.explained_by.check if r.explained_by else None for r in ranked] == [
        None,
        None,
        "host.cmdline_booted",
        "host.cmdline_booted",
        "host.cmdline_booted",
    ]


def test_a_container_driver_upgraded_alone_explains_the_kernels_api_mismatch():
    # the kernel's NVRM API mismatch is a host finding, but the container's userspace is what changed
    found = [F(Level.FAIL, "host.nvidia_api_mismatch"), F(Level.FAIL, "ct.driver_match", "pve1/CT 200")]
    assert order(found) == [("ct.driver_match", "pve1/CT 200"), ("host.nvidia_api_mismatch", "pve1")]
    # on another node the container explains nothing
    found = [F(Level.FAIL, "host.nvidia_api_mismatch", "pve2"), F(Level.FAIL, "ct.driver_match", "pve1/CT 200")]
    assert order(found) == [("host.nvidia_api_mismatch", "pve2"), ("ct.driver_match", "pve1/CT 200")]


def test_a_nan_crash_in_the_journal_leads_the_server_being_down():
    log = (FIXTURES / "sglang/logs/internlm-459-nan-probability.log").read_text()
    hits = scan_text(log, subject="pve1/CT 200").report()
    found = [
        F(Level.FAIL, "serve.unit", "pve1/CT 200"),
        F(Level.FAIL, "serve.health", "pve1/CT 200"),
        F(Level.FAIL, "sglang.log.scheduler-crashed", "pve1/CT 200"),  # the stand-in's crash logs it first
        *[h.finding for h in hits],
    ]
    ranked = rank(found)
    assert ranked[0].finding.check == "sglang.log.nan-in-sampling"
    assert ranked[0].finding.level == Level.FAIL
    assert [r.finding.check for r in ranked[1:4]] == ["serve.unit", "serve.health", "sglang.log.scheduler-crashed"]
    assert {r.explained_by.check for r in ranked[1:4]} == {"sglang.log.nan-in-sampling"}


def test_a_low_admission_bound_explains_the_low_power_plateau():
    found = [
        F(Level.WARN, "bench.not-compute-bound", "pve1/CT 200"),
        F(Level.WARN, "bench.ttft-explosion", "pve1/CT 200"),
        F(Level.WARN, "bench.admission-bound", "pve1/CT 200"),
    ]
    assert [c for c, _ in order(found)] == ["bench.admission-bound", "bench.not-compute-bound", "bench.ttft-explosion"]


def test_a_vm_without_pcie_explains_p2p_off_in_its_guest():
    found = [F(Level.FAIL, "vm.guest_p2p", "pve1/VM 300"), F(Level.FAIL, "vm.pcie", "pve1/VM 300")]
    assert order(found) == [("vm.pcie", "pve1/VM 300"), ("vm.guest_p2p", "pve1/VM 300")]


def test_stages_of_the_check_families():
    assert [stage_of(c) for c in ("host.cmdline_booted", "host.nvidia_uvm", "ct.memlock", "ct.driver_match")] == [
        "host",
        "driver",
        "guest",
        "driver",
    ]
    assert [stage_of(c) for c in ("vm.pcie", "p2p-status", "sglang.log.nan-in-sampling", "bench.admission-bound")] == [
        "guest",
        "p2p",
        "serving",
        "throughput",
    ]


def test_fatal_only_on_a_fail():
    assert not fatal(rank([F(Level.WARN, "ct.memlock"), F(Level.INFO, "doctor.p2p-unknown")]))
    assert fatal(rank([F(Level.WARN, "ct.memlock"), F(Level.FAIL, "host.nvidia_uvm")]))
    assert Observed(F(Level.PASS, "host.nvidia_uvm")).evidence == ()


def test_requests_waiting_at_the_bound_in_the_log_explain_the_benchs_plateau():
    found = [
        F(Level.WARN, "bench.not-compute-bound", "pve1/CT 200"),
        F(Level.WARN, "bench.admission-bound", "pve1/CT 200"),
        F(Level.WARN, "serve.admission-queueing", "pve1/CT 200"),
    ]
    assert [c for c, _ in order(found)] == [
        "serve.admission-queueing",
        "bench.admission-bound",
        "bench.not-compute-bound",
    ]
