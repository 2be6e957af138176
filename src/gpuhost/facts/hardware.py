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
    faults: tuple[IommuFault, ...] = ()  # DMA the IOMMU refused (AMD-Vi IO_PAGE_FAULT, Intel DMAR fault)

    @property
    def translating(self) -> bool:
        """A DMA fault proves the IOMMU translates (and blocked) a device's DMA."""
        return bool(self.faults)

    @property
    def summary(self) -> str:
        """``enabled: yes (translating)`` / ``yes`` / ``no`` / ``unknown``: what the log proves."""
        if self.enabled is True:
            return "enabled: yes (translating)" if self.translating else "enabled: yes"
        return "enabled: no" if self.enabled is False else "enabled: unknown"

    def faulting_devices(self) -> dict[str, int]:
        """PCI address (``0000:07:00.0``) → number of faults logged for it."""
        out: dict[str, int] = {}
        for f in self.faults:
            out[f.device] = out.get(f.device, 0) + 1
        return out


@dataclass(frozen=True)
class IommuFault:
    """One DMA request the IOMMU refused, as the kernel logged it."""

    vendor: str  # 'amd' | 'intel'
    device: str  # PCI address, domain added when the log omits it: '0000:07:00.0'
    kind: str  # 'IO_PAGE_FAULT', 'DMA Read', 'DMA Write'
    address: str
    reason: str = ""  # Intel's fault reason text; AMD's flags
    driver: str | None = None  # the driver the kernel named the device by ('nvidia'), when it did


_INTEL_ON = re.compile(r"DMAR: Intel\(R\) Virtualization Technology for Directed I/O")
_AMD_ON = re.compile(
    r"AMD-Vi: (?:Found IOMMU|IOMMU performance counters supported|Interrupt remapping enabled|"
    r"Virtual APIC enabled|Lazy IO/TLB flushing enabled)|perf/amd_iommu: Detected AMD IOMMU"
)


# "nvidia 0000:07:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x0003 address=0x80000040 flags=0x0020]" (5.x+),
# "AMD-Vi: Event logged [IO_PAGE_FAULT device=20:00.0 domain=0x0003 address=0x... flags=0x0010]" (older kernels;
# linux drivers/iommu/amd/iommu.c amd_iommu_report_page_fault / iommu_print_event)
_AMD_FAULT = re.compile(
    r"(?:(?P<drv>[\w-]+) (?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): )?AMD-Vi: Event logged \[\s*"
    r"IO_PAGE_FAULT (?:device=(?P<old>[0-9a-f:.]+) )?domain=\S+ address=(?P<addr>\S+) flags=(?P<flags>0x[0-9a-f]+)\]"
)
# "DMAR: [DMA Read NO_PASID] Request device [00:02.0] fault addr 0x7cd80000 [fault reason 0x01] Present bit ..."
# "DMAR: [DMA Read] Request device [06:00.0] PASID ffffffff fault addr 1a5e12000 [fault reason 06] PTE Read ..."
# (linux drivers/iommu/intel/dmar.c dmar_fault_do_one)
_DMAR_FAULT = re.compile(
    r"DMAR: \[(?P<kind>DMA Read|DMA Write|INTR-REMAP)(?: NO_PASID| PASID \w+)?\] "
    r"Request device \[(?P<bdf>[0-9a-fx:.]+)\]"
    r"(?: PASID \w+)? fault (?:addr|index) (?P<addr>\S+) \[fault reason (?P<code>\w+)\] ?(?P<why>[^\r\n]*)"
)


def _bdf(text: str) -> str:
    """``00:02.0`` / ``0x00:0x02.0`` → ``0000:00:02.0``."""
    t = text.replace("0x", "").lower()
    return t if t.count(":") == 2 else f"0000:{t}"


def parse_iommu_faults(text: str) -> tuple[IommuFault, ...]:
    """Every DMA fault line in a kernel log (AMD-Vi IO_PAGE_FAULT, Intel DMAR DMA Read/Write)."""
    out: list[IommuFault] = []
    for m in _AMD_FAULT.finditer(text):
        device = m.group("bdf") or _bdf(m.group("old") or "")
        out.append(
            IommuFault("amd", device, "IO_PAGE_FAULT", m.group("addr"), f"flags={m.group('flags')}", m.group("drv"))
        )
    for m in _DMAR_FAULT.finditer(text):
        reason = f"{m.group('code')} {m.group('why').strip()}".strip()
        out.append(IommuFault("intel", _bdf(m.group("bdf")), m.group("kind"), m.group("addr"), reason))
    return tuple(out)


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
    faults = parse_iommu_faults(text)
    enabled: bool | None = None
    if faults or groups or _INTEL_ON.search(text) or (vendor == "amd" and _AMD_ON.search(text)):
        enabled = True
    elif re.search(r"DMAR: IOMMU disabled", text):
        enabled = False
    unknown = tuple(re.findall(r"AMD-Vi: Unknown option - '([^']*)'", text))
    return IommuState(domain, enabled, unknown, vendor, units, irq, groups, faults)


def cpu_vendor_name(vendor_id: str) -> str:
    """``AuthenticAMD`` → 'amd', ``GenuineIntel`` → 'intel', anything else → 'unknown'."""
    v = vendor_id.strip()
    if v == "AuthenticAMD":
        return "amd"
    if v == "GenuineIntel":
        return "intel"
    return "unknown"
