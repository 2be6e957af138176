"""The lab's own readers of the captured outputs a replica is built from (it never imports the product's)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# pciutils lspci.c show_device()/show_slot_name(): "[dddd:]bb:dd.f <class name> [cccc]: <vendor device> [vvvv:dddd]
# (rev rr)" with -nn, then -vv's indented lines ("Subsystem: ... [vvvv:dddd]", "NUMA node: n",
# "Bus: primary=pp, secondary=ss, subordinate=uu" for a bridge: show_htype1()).
_DEVICE = re.compile(
    r"^(?:(?P<dom>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7]) "
    r"(?P<class_name>[^\[]+?) \[(?P<cls>[0-9a-fA-F]{4})\]: (?P<desc>.*?) \[(?P<ven>[0-9a-fA-F]{4}):"
    r"(?P<did>[0-9a-fA-F]{4})\](?: \(rev (?P<rev>[0-9a-fA-F]{2})\))?"
)
_SUBSYS = re.compile(r"^\s+Subsystem: .*\[(?P<ven>[0-9a-fA-F]{4}):(?P<did>[0-9a-fA-F]{4})\]")
_NUMA = re.compile(r"^\s+NUMA node: (?P<n>\d+)")
_BUSES = re.compile(
    r"^\s+Bus: primary=(?P<p>[0-9a-f]{2}), secondary=(?P<s>[0-9a-f]{2}), subordinate=(?P<u>[0-9a-f]{2})"
)


@dataclass
class PciFunction:
    bdf: str  # with its domain ("0000:" when lspci printed none)
    class_code: str
    class_name: str
    description: str
    vendor: str
    device: str
    rev: str = ""
    subsys_vendor: str = ""
    subsys_device: str = ""
    numa: int | None = None
    secondary: int | None = None  # a bridge's bus range
    subordinate: int | None = None
    driver: str = ""  # -k: "Kernel driver in use: ..."
    lines: list[str] = field(default_factory=list)

    @property
    def bus(self) -> int:
        return int(self.bdf[5:7], 16)

    @property
    def domain(self) -> str:
        return self.bdf[:4]

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == "10de" and self.class_code in ("0300", "0302")

    @property
    def is_bridge(self) -> bool:
        return self.class_code == "0604" and self.secondary is not None


#: the IOMMU group listing scripts print ``lspci -nns`` per function behind "IOMMU Group <n> "
_GROUP_PREFIX = re.compile(r"^IOMMU Group \d+ ")


def parse_lspci(text: str) -> list[PciFunction]:
    """Every function of ``lspci -nn[vv]`` (a prompt or other line before the first device is skipped), or of
    the flat IOMMU group listing (``IOMMU Group N`` then the function's ``lspci -nns`` line)."""
    out: list[PciFunction] = []
    for raw in text.splitlines():
        line = _GROUP_PREFIX.sub("", raw.rstrip("\r"), count=1)
        m = _DEVICE.match(line)
        if m:
            out.append(
                PciFunction(
                    bdf=f"{(m['dom'] or '0000').lower()}:{m['bus'].lower()}:{m['dev'].lower()}.{m['fn']}",
                    class_code=m["cls"].lower(),
                    class_name=m["class_name"].strip(),
                    description=m["desc"].strip(),
                    vendor=m["ven"].lower(),
                    device=m["did"].lower(),
                    rev=(m["rev"] or "").lower(),
                )
            )
            continue
        if not out or not line.startswith(("\t", " ")):
            continue
        f = out[-1]
        f.lines.append(line)
        if (s := _SUBSYS.match(line)) and not f.subsys_device:
            f.subsys_vendor, f.subsys_device = s["ven"].lower(), s["did"].lower()
        elif n := _NUMA.match(line):
            f.numa = int(n["n"])
        elif b := _BUSES.match(line):
            f.secondary, f.subordinate = int(b["s"], 16), int(b["u"], 16)
        elif line.strip().startswith("Kernel driver in use:"):
            f.driver = line.split(":", 1)[1].strip()
    return out


def bridges_above(fn: PciFunction, functions: list[PciFunction]) -> list[PciFunction]:
    """The bridges between the root bus and ``fn``, outermost first (the bus ranges that hold its bus)."""
    chain = [
        b
        for b in functions
        if b.is_bridge
        and b.domain == fn.domain
        and b.secondary is not None
        and b.subordinate is not None
        and b.secondary <= fn.bus <= b.subordinate
    ]
    return sorted(chain, key=lambda b: (b.secondary or 0, -(b.subordinate or 0)))


def boot_loader(pbt_text: str, pbt_exit: int | None) -> str:
    """``grub``, ``grub-pbt`` or ``systemd-boot`` from ``proxmox-boot-tool status``: proxmox/proxmox-kernel-helper
    ``src/proxmox-boot-tool`` ``status()`` prints "<UUID> is configured with: uefi (versions: ...)" for an ESP
    booted by systemd-boot, "grub (versions: ...)" for an ESP it keeps GRUB on (grub-pbt: GRUB on ESPs managed
    by proxmox-boot-tool, pve-docs system-booting.adoc), and "E: /etc/kernel/proxmox-boot-uuids does not
    exist." when it manages no ESP (the host boots GRUB from its root disk)."""
    if pbt_exit not in (0, None) or "proxmox-boot-uuids does not exist" in pbt_text:
        return "grub"
    kinds = re.findall(r"is configured with: ([^(]+)", pbt_text)
    if any(re.search(r"\buefi\b", k) for k in kinds):
        return "systemd-boot"
    return "grub-pbt" if any(re.search(r"\bgrub\b", k) for k in kinds) else "grub"


def pve_major(pveversion: str) -> int | None:
    """``pve-manager/8.2.4/faa83925 (running kernel: ...)`` (``pveversion``) or ``pve-manager: 8.2.8 (running
    version: 8.2.8/a577cfa6)`` (``pveversion -v``): pve-manager ``bin/pveversion``."""
    m = re.search(r"^pve-manager(?:/|: )(\d+)\.", pveversion, re.M)
    return int(m.group(1)) if m else None


def nvidia_smi_gpus(text: str) -> dict[str, dict[str, str]]:
    """``nvidia-smi -q``: bus id (lower case, 4-digit domain) -> Product Name and FB memory total (MiB)."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    in_fb = False
    for line in text.splitlines():
        m = re.match(r"^GPU ([0-9A-Fa-f]{8}):([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$", line.strip())
        if m:
            current = {}
            out[f"{m.group(1)[-4:].lower()}:{m.group(2).lower()}"] = current
            in_fb = False
            continue
        if current is None:
            continue
        key, sep, value = line.strip().partition(":")
        if not sep:
            in_fb = line.strip() == "FB Memory Usage"
            continue
        key, value = key.strip(), value.strip()
        if key == "Product Name":
            current.setdefault("name", value)
        elif in_fb and key == "Total" and value.endswith("MiB"):
            current.setdefault("memory_mib", value.split()[0])
    return out


def topo_links(text: str) -> dict[tuple[int, int], str]:
    """``nvidia-smi topo -m``: (row GPU, column GPU) -> connection (``X``, ``PIX``, ``NV12``, ``SYS`` ...)."""
    header: list[str] = []
    out: dict[tuple[int, int], str] = {}
    for line in text.splitlines():
        cells = line.split()
        if not header and cells and cells[0].startswith("GPU0"):
            header = cells
            continue
        if header and cells and re.fullmatch(r"GPU\d+", cells[0]):
            row = int(cells[0][3:])
            for col, cell in zip(header, cells[1:], strict=False):
                if re.fullmatch(r"GPU\d+", col):
                    out[(row, int(col[3:]))] = cell
    return out


def cpu_vendor(cpu_line: str, lscpu: str, cmdlines: str) -> tuple[str, str]:
    """The CPU vendor and how it was found: /proc/cpuinfo's vendor_id or lscpu's, else the vendor's IOMMU token
    on the host's command line (``intel_iommu=`` / ``amd_iommu=``), else none (the lab's default, amd)."""
    text = cpu_line + "\n" + lscpu
    if "GenuineIntel" in text:
        return "intel", "cpuinfo"
    if "AuthenticAMD" in text:
        return "amd", "cpuinfo"
    intel, amd = "intel_iommu=" in cmdlines, "amd_iommu=" in cmdlines
    if intel != amd:
        return ("intel" if intel else "amd"), "command line"
    return "amd", ""
