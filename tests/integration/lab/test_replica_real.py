"""``provision lxc --check --diff`` on replicas of bundles built from public real captures
(tests/fixtures/bundles/SOURCE.md): the plan a reviewer can check against the source files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.lab_fixtures import SRC, lab_address
from tests.unit.lab.test_replica_real_bundles import _pack

ENV = {"PYTHONPATH": SRC, "COLUMNS": "200", "NO_COLOR": "1", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def _gpuhost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuhost", *args], capture_output=True, text=True, env=ENV)


def _plan(name: str, host: int, tmp_path: Path) -> tuple[str, str]:
    """What lab up printed, and the check-mode plan of provision lxc on the replica."""
    state = Path(tempfile.mkdtemp(prefix="replica-")) / "state"  # short: the lab's sockets live below it
    up = _gpuhost(
        "lab",
        "up",
        "--from-capture",
        str(_pack(name, tmp_path)),
        "--address",
        lab_address(7, host),
        "--state-dir",
        str(state),
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        plan = _gpuhost(
            "provision",
            "lxc",
            "-i",
            str(state / "inventory.yml"),
            "--check",
            "--diff",
            "--allow-reboot",
            "--allow-restart",
        )
        assert plan.returncode == 0, plan.stdout + plan.stderr
        return up.stdout, plan.stdout
    finally:
        _gpuhost("lab", "down", "--state-dir", str(state))
        shutil.rmtree(state.parent, ignore_errors=True)


@pytest.mark.integration
def test_the_h100_host_whose_cmdline_already_has_its_iommu_tokens(tmp_path: Path) -> None:
    up, plan = _plan("h100-pcie-vm-zfs-systemd-boot", 30, tmp_path)
    assert "replica of h100-pcie-vm-zfs-systemd-boot: 1 GPU(s), systemd-boot, PVE 8" in up
    assert "driver binding: the host had 0000:41:00.0 to vfio-pci" in up
    # /etc/kernel/cmdline reads "... quiet intel_iommu=on iommu=pt": nothing to add for the IOMMU
    assert "would change IOMMU on the kernel command line" not in plan
    # no NVIDIA driver in the capture, one GPU in lspci, no container yet
    for line in ("install NVIDIA 580.95.05 kernel module", "create CT 200", "CT 200: 1 GPUs passed through"):
        assert line in plan, line


@pytest.mark.integration
def test_the_four_h100_sxm5_grub_host_gets_iommu_pt_in_etc_default_grub(tmp_path: Path) -> None:
    up, plan = _plan("h100-sxm5-4gpu-grub", 31, tmp_path)
    assert "replica of h100-sxm5-4gpu-grub: 4 GPU(s), grub, PVE 8" in up
    # /etc/default/grub: GRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on" (no iommu=pt)
    assert '-GRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on"' in plan
    assert "iommu=pt" in plan.split('-GRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on"', 1)[1].split("\n", 2)[1]
    for line in ("install NVIDIA 580.95.05 kernel module", "create CT 200", "CT 200: 4 GPUs passed through"):
        assert line in plan, line


@pytest.mark.integration
def test_the_eight_h100_nvswitch_grub_host_gets_iommu_pt_and_all_eight_gpus(tmp_path: Path) -> None:
    up, plan = _plan("h100-sxm5-8gpu-nvswitch-grub", 32, tmp_path)
    assert "replica of h100-sxm5-8gpu-nvswitch-grub: 8 GPU(s), grub, PVE 8" in up
    assert "NVSwitch: 4 NVIDIA bridge(s) in the capture" in up
    assert "IOMMU groups: the host's 10 group(s), as captured" in up
    # /etc/default/grub: GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on" (no iommu=pt)
    assert '-GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on"' in plan
    added = plan.split('-GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on"', 1)[1].split("\n", 2)[1]
    assert added.strip() == '+GRUB_CMDLINE_LINUX_DEFAULT="quiet splash intel_iommu=on iommu=pt"'
    for line in ("install NVIDIA 580.95.05 kernel module", "create CT 200", "CT 200: 8 GPUs passed through"):
        assert line in plan, line
