import pytest

from gpuhost.facts.boot import BootDetectionError, parse_boot_tool_status

# Output format of proxmox-boot-tool status (pve-kernel-helper's script, see shared reference §1.1).
NOT_MANAGED = "E: /etc/kernel/proxmox-boot-uuids does not exist.\n"


def test_not_managed_means_plain_grub():
    info = parse_boot_tool_status(NOT_MANAGED, 2, efi=False)
    assert info.loader == "grub"
    assert info.cmdline_file == "/etc/default/grub" and info.refresh_command == "update-grub"


def test_missing_tool_means_plain_grub():
    assert parse_boot_tool_status("sh: proxmox-boot-tool: not found", 127, efi=True).loader == "grub"


def test_uefi_esp_means_systemd_boot():
    text = (
        "Re-executing '/usr/sbin/proxmox-boot-tool' in new private mount namespace..\n"
        "System currently booted with uefi\n"
        "7D41-3B3A is configured with: uefi (versions: 6.8.12-4-pve, 6.8.4-2-pve)\n"
    )
    info = parse_boot_tool_status(text, 0, efi=True)
    assert info.loader == "systemd-boot" and info.esps == ("7D41-3B3A",)
    assert info.cmdline_file == "/etc/kernel/cmdline" and info.refresh_command == "proxmox-boot-tool refresh"


def test_grub_esp_means_grub_managed_by_proxmox_boot_tool():
    text = "System currently booted with legacy bios\n0F2E-1A2B is configured with: grub (versions: 6.8.12-4-pve)\n"
    info = parse_boot_tool_status(text, 0, efi=False)
    assert info.loader == "grub-pbt" and info.cmdline_file == "/etc/default/grub"
    assert info.refresh_command == "proxmox-boot-tool refresh"


def test_uefi_claim_without_efi_firmware_is_an_error():
    with pytest.raises(BootDetectionError, match="legacy"):
        parse_boot_tool_status("A1B2-C3D4 is configured with: uefi (versions: 6.8.12-4-pve)\n", 0, efi=False)
