"""Parsers for PCI, IOMMU and NVIDIA driver state as Linux prints them."""

from __future__ import annotations

import re
from dataclasses import dataclass

NVIDIA_VENDOR = "10de"

# 0000:41:00.0 VGA compatible controller [0300]: NVIDIA Corporation GB202GL [RTX PRO 6000 …] [10de:2bb5] (rev a1)
_LSPCI_NN = re.compile(
    r"^(?P<bdf>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+"
    r"(?P<cls_name>.*?)\s+\[(?P<cls>[0-9a-fA-F]{4})\]:\s+(?P<name>.*?)\s+"
    r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\](?:\s+\(rev (?P<rev>[0-9a-fA-F]+)\))?\s*$"
)


@dataclass(frozen=True)
class PciDevice:
    bdf: str  # always with the domain: 0000:41:00.0
    class_code: str  # '0300' (VGA) or '0302' (3D controller)
    class_name: str
    name: str
    vendor: str
    device: str
    driver: str | None = None

    @property
    def is_gpu(self) -> bool:
        return self.vendor == NVIDIA_VENDOR and self.class_code.startswith("03")


def full_bdf(bdf: str) -> str:
    return bdf if bdf.count(":") == 2 else f"0000:{bdf}"


def parse_lspci_nn(text: str) -> list[PciDevice]:
    """``lspci -nn`` (or ``-nnk``; ``-D`` optional) → devices, with the bound driver when shown."""
    devices: list[PciDevice] = []
    for line in text.splitlines():
        m = _LSPCI_NN.match(line)
        if m:
            devices.append(
                PciDevice(
                    full_bdf(m.group("bdf").lower()),
                    m.group("cls").lower(),
                    m.group("cls_name"),
                    m.group("name"),
                    m.group("vendor").lower(),
                    m.group("device").lower(),
                )
            )
            continue
        k = re.match(r"^\s+Kernel driver in use:\s*(\S+)", line)
        if k and devices:
            last = devices[-1]
            devices[-1] = PciDevice(
                last.bdf, last.class_code, last.class_name, last.name, last.vendor, last.device, k.group(1)
            )
    return devices


def nvidia_gpus(devices: list[PciDevice]) -> list[PciDevice]:
    return [d for d in devices if d.is_gpu]


def parse_iommu_groups(text: str) -> dict[str, int]:
    """Paths like ``/sys/kernel/iommu_groups/14/devices/0000:41:00.0`` → {bdf: group}."""
    groups: dict[str, int] = {}
    for m in re.finditer(r"iommu_groups/(\d+)/devices/([0-9a-fA-F:.]+)", text):
        groups[full_bdf(m.group(2).lower())] = int(m.group(1))
    return groups


@dataclass(frozen=True)
class NvidiaKernelModule:
    version: str
    open: bool


def parse_nvidia_version(text: str) -> NvidiaKernelModule | None:
    """``/proc/driver/nvidia/version`` → the loaded kernel module's version and flavour."""
    m = re.search(
        r"NVRM version:\s+NVIDIA UNIX (?P<open>Open )?(?:Kernel Module|x86_64 Kernel Module|"
        r"\S+ Kernel Module)?.*?\s(?P<ver>\d+\.\d+(?:\.\d+)?)\s",
        text,
    )
    if not m:
        return None
    return NvidiaKernelModule(m.group("ver"), m.group("open") is not None)


def parse_proc_devices(text: str) -> dict[str, int]:
    """The character-device section of ``/proc/devices`` → {driver name: major}.

    Lines before any section header (an excerpt) count as character devices.
    """
    majors: dict[str, int] = {}
    section = "Character"
    for line in text.splitlines():
        if line.strip().endswith("devices:"):
            section = line.strip().split()[0]
            continue
        parts = line.split()
        if section == "Character" and len(parts) == 2 and parts[0].isdigit():
            majors.setdefault(parts[1], int(parts[0]))
    return majors


_STAT = re.compile(r"^(/dev/\S+)\s+([0-9a-fA-F]+)\s+([0-9a-fA-F]+)\s*$")
_LS = re.compile(r"^c[-rwxsStT.+]{9}\S*\s+\d+\s+\S+\s+\S+\s+(\d+),\s*(\d+)\s+.*?\s(\S+)\s*$")


def parse_device_numbers(text: str, directory: str = "") -> dict[str, tuple[int, int]]:
    """Character device nodes -> (major, minor), from ``stat -c '%n %t %T'`` (hex) or ``ls -l`` lines.

    The numbers come from each node itself, so ``/dev/nvidia-caps-imex-channels/channel0``
    and a stray node under ``/dev/nvidia-caps/`` get their own major, whatever their names.
    ``directory`` prefixes the bare names ``ls -l DIR`` prints.
    """
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines():
        if m := _STAT.match(line.strip()):
            out[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
        elif m := _LS.match(line.strip()):
            name = m.group(3)
            path = name if name.startswith("/") or not directory else f"{directory.rstrip('/')}/{name}"
            out[path] = (int(m.group(1)), int(m.group(2)))
    return out


@dataclass(frozen=True)
class IommuState:
    """What the kernel log proves about the IOMMU (``dmesg | grep -E 'DMAR|AMD-Vi|iommu'``).

    ``enabled`` is True only on proof that DMA remapping is active: devices added to IOMMU
    groups, Intel's "Intel(R) Virtualization Technology for Directed I/O", or AMD-Vi
    bringing up an IOMMU. ``DMAR: IOMMU enabled`` only echoes ``intel_iommu=on`` from the
    command line and ``iommu: Default domain type`` is printed whether or not a unit exists,
    so neither proves it; None means the log does not say.
    """

    default_domain: str | None  # 'Passthrough', 'Translated', 'Translated (lazy)' …
    enabled: bool | None  # proven active (True), proven off (False), not shown (None)
    unknown_options: tuple[str, ...]  # e.g. ('on',) for amd_iommu=on
    vendor: str | None = None  # 'intel' (DMAR) | 'amd' (AMD-Vi) | None
    units: int = 0  # DRHD units (Intel) or IOMMUs found (AMD)
    irq_remapping: bool = False  # DMAR-IR: Enabled IRQ remapping / AMD-Vi: Interrupt remapping enabled
    groups: int = 0  # distinct IOMMU groups devices were added to


_INTEL_ON = re.compile(r"DMAR: Intel\(R\) Virtualization Technology for Directed I/O")
_AMD_ON = re.compile(
    r"AMD-Vi: (?:Found IOMMU|IOMMU performance counters supported|Interrupt remapping enabled|"
    r"Virtual APIC enabled|Lazy IO/TLB flushing enabled)|perf/amd_iommu: Detected AMD IOMMU"
)


def parse_dmesg_iommu(text: str) -> IommuState:
    domain = None
    found = list(re.finditer(r"iommu: Default domain type: (\w+(?: \(\w+\))?)", text))
    m = found[-1] if found else None
    if m is not None:
        domain = m.group(1)
    intel = bool(re.search(r"\bDMAR(?:-IR)?:", text))
    amd = "AMD-Vi" in text or "amd_iommu" in text
    vendor = "amd" if amd else "intel" if intel else None
    units = (
        len(re.findall(r"DMAR: DRHD base", text))
        if vendor == "intel"
        else len(set(re.findall(r"(\S+): AMD-Vi: Found IOMMU", text)))
    )
    groups = len(set(re.findall(r"Adding to iommu group (\d+)", text)))
    irq = bool(re.search(r"DMAR-IR: Enabled IRQ remapping|AMD-Vi: Interrupt remapping enabled", text))
    enabled: bool | None = None
    if groups or _INTEL_ON.search(text) or (vendor == "amd" and _AMD_ON.search(text)):
        enabled = True
    elif re.search(r"DMAR: IOMMU disabled", text):
        enabled = False
    unknown = tuple(re.findall(r"AMD-Vi: Unknown option - '([^']*)'", text))
    return IommuState(domain, enabled, unknown, vendor, units, irq, groups)


def cpu_vendor_name(vendor_id: str) -> str:
    """``AuthenticAMD`` → 'amd', ``GenuineIntel`` → 'intel', anything else → 'unknown'."""
    v = vendor_id.strip()
    if v == "AuthenticAMD":
        return "amd"
    if v == "GenuineIntel":
        return "intel"
    return "unknown"
