"""A node that boots GRUB from ESPs managed by proxmox-boot-tool (ZFS on legacy BIOS): what boots is the
ESPs' grub.cfg that 'proxmox-boot-tool refresh' regenerates (proxmox-kernel-helper zz-proxmox-boot), not
/boot/grub/grub.cfg. gpuhost sets the IOMMU tokens, refreshes, reboots, and converges."""

import pytest

from tests.integration.provision.conftest import run_json, task

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def lab(make_lab):
    return make_lab([("grub-pbt", "intel")])


def test_grub_on_proxmox_boot_tool_esps_converges(lab):
    status = lab.run("pve1", "proxmox-boot-tool status")
    assert "is configured with: grub (versions:" in status.stdout
    root_cfg = lab.run("pve1", "cat /boot/grub/grub.cfg").stdout
    code, report = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--allow-reboot")
    assert code == 0, [t for t in report["tasks"] if t["status"] == "failed"]
    refresh = task(report, "pve1", "boot loader")
    assert refresh["status"] == "changed" and "proxmox-boot-tool refresh" in refresh["reason"]
    assert report["hosts"]["pve1"]["rebooted"] is True
    booted = lab.run("pve1", "cat /proc/cmdline").stdout
    assert "intel_iommu=on" in booted and "iommu=pt" in booted
    # the root file system's grub.cfg is not what booted, and the refresh did not rewrite it
    assert lab.run("pve1", "cat /boot/grub/grub.cfg").stdout == root_cfg
    code, again = run_json("provision", "host", "-i", str(lab.inventory), "-e", "gpu_path=none", "--allow-reboot")
    assert code == 0 and again["hosts"]["pve1"]["changed"] == 0 and again["hosts"]["pve1"]["rebooted"] is False
