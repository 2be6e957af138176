"""Bootloaders and reboot: a node boots the command line its bootloader would really use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gpuhost.lab import manager
from gpuhost.lab.spec import NodeSpec
from tests.lab_fixtures import LabHandle, lab_address, run_on, start_lab

GRUB, SDBOOT = "grub1", "sdboot1"


@pytest.fixture(scope="module")
def boot_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabHandle]:
    """Its own nodes: these tests reboot them and change their command lines."""
    state = tmp_path_factory.mktemp("bootlab") / "state"
    handle = start_lab(
        state,
        [
            NodeSpec(GRUB, lab_address(2, 1), boot="grub", cpu="intel"),
            NodeSpec(SDBOOT, lab_address(2, 2), boot="systemd-boot", cpu="amd"),
        ],
    )
    yield handle
    handle.close()
    manager.down(state)


def _reboot(lab: LabHandle, node: str) -> None:
    before = lab.boots(node)
    r = lab.run(node, "reboot")
    assert r.rc == 0, r.stderr
    lab.wait_rebooted(node, before)


def _cmdline(lab: LabHandle, node: str) -> str:
    return lab.run(node, "cat /proc/cmdline").stdout.strip()


def test_proxmox_boot_tool_on_a_grub_node(boot_lab: LabHandle) -> None:
    for cmd in ("status", "refresh"):
        r = boot_lab.run(GRUB, f"proxmox-boot-tool {cmd}")
        assert (r.rc, r.stdout, r.stderr) == (2, "", "E: /etc/kernel/proxmox-boot-uuids does not exist.\n")
    r = boot_lab.run(GRUB, "proxmox-boot-tool status --quiet")
    assert (r.rc, r.stdout, r.stderr) == (2, "", "")


def test_proxmox_boot_tool_status_on_a_systemd_boot_node(boot_lab: LabHandle) -> None:
    r = boot_lab.run(SDBOOT, "proxmox-boot-tool status")
    lines = r.stdout.splitlines()
    assert r.rc == 0 and lines[1] == "System currently booted with uefi"
    assert lines[2].endswith(" is configured with: uefi (versions: 6.8.12-4-pve)")
    assert boot_lab.run(SDBOOT, "proxmox-boot-tool status --quiet").rc == 0


def test_grub_node_boots_what_update_grub_generated(boot_lab: LabHandle) -> None:
    lab = boot_lab
    original = _cmdline(lab, GRUB)
    lab.run(
        GRUB,
        "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet intel_iommu=on iommu=pt\"/' "
        "/etc/default/grub && echo 'root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt' > /etc/kernel/cmdline",
    )
    _reboot(lab, GRUB)
    assert _cmdline(lab, GRUB) == original  # no update-grub yet; /etc/kernel/cmdline is not GRUB's
    r = lab.run(
        GRUB,
        "mkdir -p /etc/default/grub.d && echo 'GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT "
        "pcie_aspm=off\"' > /etc/default/grub.d/90-gpuhost.cfg && update-grub",
    )
    assert r.rc == 0 and "Generating grub configuration file ..." in r.stderr
    assert _cmdline(lab, GRUB) == original  # takes effect at the next boot only
    _reboot(lab, GRUB)
    assert _cmdline(lab, GRUB) == (
        "BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt pcie_aspm=off"
    )


def test_systemd_boot_node_boots_what_the_last_refresh_copied(boot_lab: LabHandle) -> None:
    lab = boot_lab
    original = _cmdline(lab, SDBOOT)
    r = lab.run(
        SDBOOT,
        "sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"quiet iommu=pt\"/' "
        "/etc/default/grub && update-grub",
    )
    assert r.rc == 0
    _reboot(lab, SDBOOT)
    assert _cmdline(lab, SDBOOT) == original  # GRUB's file is not what systemd-boot uses
    lab.run(SDBOOT, "sed -i 's/$/ iommu=pt/' /etc/kernel/cmdline")
    _reboot(lab, SDBOOT)
    assert _cmdline(lab, SDBOOT) == original  # edited, but never refreshed
    r = lab.run(SDBOOT, "proxmox-boot-tool refresh")
    assert r.rc == 0 and "Copying kernel and creating boot-entry for 6.8.12-4-pve" in r.stdout
    _reboot(lab, SDBOOT)
    assert _cmdline(lab, SDBOOT) == original + " iommu=pt"
    lab.run(SDBOOT, "sed -i 's/$/ pcie_aspm=off/' /etc/kernel/cmdline")
    r = lab.run(SDBOOT, "echo vfio_pci >> /etc/modules && update-initramfs -u -k all")
    assert r.rc == 0 and r.stdout.startswith("update-initramfs: Generating /boot/initrd.img-6.8.12-4-pve\n")
    assert "vfio_pci" in lab.run(SDBOOT, "cat /boot/initrd.img-6.8.12-4-pve").stdout
    _reboot(lab, SDBOOT)
    assert _cmdline(lab, SDBOOT) == original + " iommu=pt pcie_aspm=off"  # update-initramfs refreshes the ESPs


def test_reboot_drops_the_connection_and_keeps_disk_state(boot_lab: LabHandle) -> None:
    lab = boot_lab
    lab.run(
        GRUB,
        "echo persisted > /root/marker && echo volatile > /tmp/marker && "
        "qm create 901 --name r --memory 512 && qm start 901",
    )
    boot_id = lab.run(GRUB, "cat /proc/sys/kernel/random/boot_id").stdout
    held = lab.connect(GRUB)
    before = lab.boots(GRUB)
    assert run_on(held, "reboot").rc == 0
    lab.wait_rebooted(GRUB, before)
    transport = held.get_transport()
    assert transport is None or not transport.is_active()
    held.close()
    assert lab.run(GRUB, "cat /proc/sys/kernel/random/boot_id").stdout not in (boot_id, "")
    r = lab.run(GRUB, "cat /root/marker; test -e /tmp/marker || echo tmp-cleared; qm status 901; hostname")
    assert r.stdout == f"persisted\ntmp-cleared\nstatus: stopped\n{GRUB}\n"


def test_enabled_units_run_at_boot_and_systemctl_reports_them(boot_lab: LabHandle) -> None:
    lab = boot_lab
    unit = (
        "[Unit]\\nDescription=device nodes\\n[Service]\\nType=oneshot\\n"
        'ExecStart=/bin/sh -c "date +%%s > /run/devnodes-ran"\\nRemainAfterExit=yes\\n'
        "[Install]\\nWantedBy=multi-user.target\\n"
    )
    r = lab.run(
        SDBOOT,
        f"printf '{unit}' > /etc/systemd/system/devnodes.service && systemctl daemon-reload && "
        "systemctl enable devnodes.service && systemctl is-enabled devnodes.service; "
        "systemctl is-active devnodes.service ssh.service pveproxy.service",
    )
    assert r.stdout.splitlines() == ["enabled", "inactive", "active", "active"], r.stderr
    r = lab.run(
        SDBOOT,
        "printf '[Service]\\nType=oneshot\\nExecStart=/bin/false\\n' > /etc/systemd/system/bad.service; "
        "systemctl start bad.service",
    )
    assert r.rc == 1 and r.stderr.startswith("Job for bad.service failed because the control process exited")
    assert lab.run(SDBOOT, "systemctl is-active bad.service").stdout == "failed\n"
    _reboot(lab, SDBOOT)
    r = lab.run(SDBOOT, "test -s /run/devnodes-ran && echo ran; systemctl is-active devnodes.service bad.service")
    assert r.stdout == "ran\nactive\ninactive\n"
