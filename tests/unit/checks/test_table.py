"""The host check registry is the one list: every ``host`` check is in it, the acceptance suite runs exactly
its entries, the troubleshooting page says when each runs, and which checks apply is decided by it alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gpuhost.acceptance.suite
from gpuhost.checks import container, host, registered
from gpuhost.checks.host import HostExpectation
from gpuhost.checks.table import CONTAINER_CHECKS, CONTAINER_SUITE_ONLY, HOST_CHECKS, host_checks

SUITE = Path(gpuhost.acceptance.suite.__file__).parent


def test_every_registered_host_check_is_in_the_registry_once() -> None:
    names = [c.name for c in HOST_CHECKS]
    assert len(names) == len(set(names))
    assert sorted(names) == sorted(n for n, info in registered().items() if info.group == "host")
    # and every @check function of checks/host.py has an entry (a check written but never wired)
    written = {fn.check_name for fn in vars(host).values() if callable(fn) and hasattr(fn, "check_name")}
    assert written == set(names)


def _collected(module: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "gpuhost.acceptance.plugin"]
        + ["-c", str(SUITE / "pytest.ini"), "--rootdir", str(SUITE), str(SUITE / module)],
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if "::" in line]
    assert lines, out.stdout + out.stderr
    return lines


def test_the_acceptance_suite_collects_exactly_the_registry() -> None:
    lines = _collected("test_host.py")
    ids = sorted(line.rstrip("]").rsplit("-", 1)[1] for line in lines)
    assert ids == sorted(c.name for c in HOST_CHECKS), lines


def test_an_lxc_host_is_proven_on_its_driver_uvm_and_persistence_not_on_vfio() -> None:
    lxc = HostExpectation(
        cmdline=("iommu=pt", "amd_iommu=on"), nvidia_driver="580.95.05", nvidia_uvm=True, persistenced=True
    )
    assert [c.name for c in host_checks(lxc)] == [
        "host.cmdline_booted",
        "host.cmdline_configured",
        "host.iommu_passthrough",
        "host.iommu_groups",
        "host.nvidia_module",
        "host.nvidia_uvm",
        "host.persistenced",
        "host.iommu_faults",
        "host.nvidia_api_mismatch",
        "host.gpu_init",
    ]


def test_a_vm_host_without_iommu_pt_is_not_judged_on_the_passthrough_domain() -> None:
    vm = HostExpectation(cmdline=("intel_iommu=on",), vfio=True)
    assert [c.name for c in host_checks(vm)] == [
        "host.cmdline_booted",
        "host.cmdline_configured",
        "host.iommu_groups",
        "host.vfio_bound",
        "host.iommu_faults",
        "host.nvidia_api_mismatch",
        "host.gpu_init",
    ]


def test_every_container_check_is_run_by_the_verify_task_and_the_suite_or_by_the_suite_alone() -> None:
    registered_ct = sorted(n for n, info in registered().items() if info.group == "container")
    listed = [c.name for c in CONTAINER_CHECKS] + list(CONTAINER_SUITE_ONLY)
    assert sorted(listed) == registered_ct and len(set(listed)) == len(listed)
    written = {fn.check_name for fn in vars(container).values() if callable(fn) and hasattr(fn, "check_name")}
    assert written == set(registered_ct)


def test_the_container_suite_collects_the_registry_and_the_suite_only_checks() -> None:
    tests = [line.split("::", 1)[1] for line in _collected("test_lxc.py")]
    parametrised = sorted(t.rstrip("]").rsplit("-", 1)[1] for t in tests if t.startswith("test_container["))
    alone = sorted(
        "ct." + t.split("[", 1)[0].removeprefix("test_") for t in tests if not t.startswith("test_container[")
    )
    assert parametrised == sorted(c.name for c in CONTAINER_CHECKS)
    assert alone == sorted(CONTAINER_SUITE_ONLY)
