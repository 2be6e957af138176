"""The replica's boot loader from a real ``proxmox-boot-tool status`` (tests/fixtures/host/proxmox-boot-tool)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.lab.replica.parse import boot_loader

PBT = Path(__file__).resolve().parents[2] / "fixtures" / "host" / "proxmox-boot-tool"


@pytest.mark.parametrize(
    ("fixture", "exit_code", "loader"),
    [
        # "D34B-A25D is configured with: grub (versions: ...)": GRUB kept on an ESP by proxmox-boot-tool
        ("status-uefi-grub-single-esp.txt", 0, "grub-pbt"),
        # two ESPs "configured with: uefi": systemd-boot
        ("status-uefi-two-esps-after-clean.txt", 0, "systemd-boot"),
        # "E: /etc/kernel/proxmox-boot-uuids does not exist.": GRUB from the root disk
        ("status-error-uuids-missing-reexec.txt", 2, "grub"),
    ],
)
def test_the_boot_loader_is_what_the_status_says(fixture: str, exit_code: int, loader: str) -> None:
    assert boot_loader((PBT / fixture).read_text(), exit_code) == loader
