"""Which boot loader a Proxmox VE host really boots with, and where its command line lives.

PVE's rules (pve-docs, system-booting): ``proxmox-boot-tool status`` exits 2 with
``E: /etc/kernel/proxmox-boot-uuids does not exist.`` when the ESPs are not managed by it —
then plain GRUB reads ``/etc/default/grub`` (``update-grub``). When managed, an ESP line
``… is configured with: uefi`` means systemd-boot, which reads the single line of
``/etc/kernel/cmdline``; ``grub`` only means GRUB on the ESPs. Both are refreshed with
``proxmox-boot-tool refresh``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from gpuhost.errors import FactError

BootLoader = Literal["grub", "grub-pbt", "systemd-boot"]

GRUB_DEFAULT = "/etc/default/grub"
GRUB_DROPIN_DIR = "/etc/default/grub.d"
KERNEL_CMDLINE = "/etc/kernel/cmdline"

_ESP_LINE = re.compile(r"^(?P<uuid>[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}) is configured with: (?P<kinds>.*)$")


@dataclass(frozen=True)
class BootInfo:
    loader: BootLoader
    efi: bool
    booted_with: str | None  # 'uefi' / 'legacy bios' as proxmox-boot-tool says, when managed
    esps: tuple[str, ...] = ()

    @property
    def cmdline_file(self) -> str:
        return KERNEL_CMDLINE if self.loader == "systemd-boot" else GRUB_DEFAULT

    @property
    def refresh_command(self) -> str:
        return "update-grub" if self.loader == "grub" else "proxmox-boot-tool refresh"

    def describe(self) -> str:
        names = {
            "grub": "GRUB (not managed by proxmox-boot-tool)",
            "grub-pbt": "GRUB on ESPs managed by proxmox-boot-tool",
            "systemd-boot": "systemd-boot (proxmox-boot-tool)",
        }
        return f"{names[self.loader]}, {'UEFI' if self.efi else 'legacy BIOS'}"


class BootDetectionError(FactError):
    pass


def parse_boot_tool_status(text: str, exit_code: int, efi: bool) -> BootInfo:
    """Decide the boot loader from ``proxmox-boot-tool status`` (text and exit code) and EFI presence."""
    if exit_code in (2, 127) or "proxmox-boot-uuids does not exist" in text:
        return BootInfo(loader="grub", efi=efi, booted_with=None)
    if exit_code != 0:
        raise BootDetectionError(f"proxmox-boot-tool status failed (exit {exit_code}): {text.strip()[-200:]}")
    booted = None
    esps: list[str] = []
    uefi = grub = False
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^System currently booted with (.+)$", line)
        if m:
            booted = m.group(1).strip()
            continue
        m = _ESP_LINE.match(line)
        if m:
            esps.append(m.group("uuid"))
            kinds = m.group("kinds")
            uefi = uefi or re.search(r"(^|,\s*)uefi\b", kinds) is not None
            grub = grub or re.search(r"(^|,\s*)grub\b", kinds) is not None
    if not esps:
        raise BootDetectionError("proxmox-boot-tool status listed no configured ESP:\n" + text.strip()[-300:])
    if uefi:
        if not efi:
            raise BootDetectionError(
                "proxmox-boot-tool says an ESP is configured for systemd-boot (uefi), "
                "but /sys/firmware/efi is missing: the host booted in legacy mode"
            )
        return BootInfo(loader="systemd-boot", efi=True, booted_with=booted, esps=tuple(esps))
    return BootInfo(loader="grub-pbt", efi=efi, booted_with=booted, esps=tuple(esps))
