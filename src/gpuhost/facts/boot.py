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
GRUB_CFG = "/boot/grub/grub.cfg"
#: gpuhost's record on the node of the last boot-loader refresh it ran on systemd-boot: the sha256 of
#: /etc/kernel/cmdline as refreshed onto the ESPs (proxmox-boot-tool keeps them unmounted, so the loader
#: entries it wrote cannot be read without mounting them).
STATE_DIR = "/var/lib/gpuhost"
REFRESH_RECORD = f"{STATE_DIR}/boot-refreshed"

#: tokens grub-mkconfig puts on every ``linux`` line itself
_GRUB_OWN = re.compile(r"^(root=.*|ro|rw)$")


def grub_cfg_tokens(text: str) -> tuple[str, ...] | None:
    """The arguments of the first ``linux`` line of grub.cfg (what GRUB boots by default), kernel path dropped."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("linux", "linuxefi"):
            return tuple(parts[2:])
    return None


def grub_stale(effective: tuple[str, ...], booted_by_loader: tuple[str, ...] | None) -> str | None:
    """Why grub.cfg does not boot what the GRUB defaults say (None: it does)."""
    if booted_by_loader is None:
        return f"{GRUB_CFG} has no linux line"
    have = set(booted_by_loader)
    missing = [t for t in effective if t not in have]
    extra = [t for t in booted_by_loader if t not in set(effective) and not _GRUB_OWN.match(t)]
    words = []
    if missing:
        words.append(f"lacks {' '.join(missing)}")
    if extra:
        words.append(f"still has {' '.join(extra)}")
    return f"{GRUB_CFG} {' and '.join(words)}" if words else None


def refresh_record(sha256: str, source: str = KERNEL_CMDLINE) -> str:
    return f"{sha256}  {source}\n"


#: what the refresh record names on grub-pbt: the GRUB defaults' effective command line
GRUB_EFFECTIVE_SOURCE = "GRUB_CMDLINE_LINUX GRUB_CMDLINE_LINUX_DEFAULT"


def grub_effective_sha(tokens: tuple[str, ...]) -> str:
    """The sha256 gpuhost records for the GRUB defaults' effective command line it refreshed onto the ESPs."""
    import hashlib

    return hashlib.sha256(" ".join(tokens).encode()).hexdigest()


def parse_sha256(text: str) -> str | None:
    word = text.split()[0] if text.split() else ""
    return word if re.fullmatch(r"[0-9a-f]{64}", word) else None


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
