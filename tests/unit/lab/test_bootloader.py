"""What a node boots, computed from its files (the supervisor does this at every boot)."""

from __future__ import annotations

from pathlib import Path

from gpuhost.lab import pve_texts
from gpuhost.lab.node import bootloader

KERNEL = "6.8.12-4-pve"


def _root(tmp_path: Path, grub_default: str = pve_texts.DEFAULT_GRUB) -> Path:
    (tmp_path / "etc/default").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_text(grub_default)
    return tmp_path


def test_grub_cfg_combines_default_and_drop_ins_like_grub_mkconfig(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "etc/default/grub.d").mkdir()
    (root / "etc/default/grub.d/90-gpuhost.cfg").write_text(
        'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"\n'
    )
    bootloader.write_grub_cfg(root, KERNEL)
    cfg = (root / "boot/grub/grub.cfg").read_text()
    assert f"\tlinux\t/boot/vmlinuz-{KERNEL} root=/dev/mapper/pve-root ro quiet iommu=pt\n" in cfg
    assert (
        bootloader.booted_cmdline(root, "grub", KERNEL)
        == f"BOOT_IMAGE=/boot/vmlinuz-{KERNEL} root=/dev/mapper/pve-root ro quiet iommu=pt"
    )


def test_grub_node_ignores_file_edits_until_update_grub(tmp_path: Path) -> None:
    root = _root(tmp_path)
    bootloader.write_grub_cfg(root, KERNEL)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\n')
    assert bootloader.booted_cmdline(root, "grub", KERNEL).endswith(" ro quiet")


def test_systemd_boot_uses_the_first_esp_entry_of_the_last_refresh(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "etc/kernel").mkdir(parents=True)
    (root / "etc/kernel/cmdline").write_text("root=ZFS=rpool/ROOT/pve-1 boot=zfs\n")
    (root / "etc/kernel/proxmox-boot-uuids").write_text("# generated\nAAAA-0001\nBBBB-0002\n")
    assert bootloader.booted_cmdline(root, "systemd-boot", KERNEL) == ""  # never refreshed: nothing bootable
    assert bootloader.refresh_esps(root, KERNEL) == ["AAAA-0001", "BBBB-0002"]
    (root / "etc/kernel/cmdline").write_text("root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt\n")
    assert bootloader.booted_cmdline(root, "systemd-boot", KERNEL) == (
        f"initrd=\\EFI\\proxmox\\{KERNEL}\\initrd.img-{KERNEL} root=ZFS=rpool/ROOT/pve-1 boot=zfs"
    )
    bootloader.refresh_esps(root, KERNEL)
    assert bootloader.booted_cmdline(root, "systemd-boot", KERNEL).endswith("boot=zfs iommu=pt")


def test_missing_esp_list_means_not_managed(tmp_path: Path) -> None:
    assert bootloader.esp_uuids(_root(tmp_path)) is None


def test_reading_an_upper_layer_never_follows_links_out_of_it(tmp_path: Path) -> None:
    root = _root(tmp_path / "upper")
    (tmp_path / "secret").write_text("linux /boot/vmlinuz host-secret\n")
    (root / "boot/grub").mkdir(parents=True)
    (root / "boot/grub/grub.cfg").symlink_to(tmp_path / "secret")
    assert bootloader.booted_cmdline(root, "grub", KERNEL) == ""


def test_esp_uuids_must_look_like_vfat_serials(tmp_path: Path) -> None:
    root = _root(tmp_path)
    (root / "etc/kernel").mkdir(parents=True)
    (root / "etc/kernel/proxmox-boot-uuids").write_text("../../../etc\nAB12-CD34\n")
    assert bootloader.esp_uuids(root) == ["AB12-CD34"]
