"""What the kernel makes of the IOMMU tokens on its command line, and what it logs about them.

AMD: the IOMMU is on by default; ``amd_iommu=`` only knows fullflush, force_enable, off,
force_isolation, pgtbl_v1/v2, irtcachedis, nohugepages and v2_pgsizes_only (anything else:
``AMD-Vi: Unknown option - 'X'``). Intel: on by default since 6.8 (PVE's config), ``intel_iommu=on``
logs ``DMAR: IOMMU enabled``. ``iommu=off`` (or the vendor ``=off``) disables it; ``iommu=pt`` or
``iommu.passthrough=1`` makes the default domain ``Passthrough (set via kernel command line)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

AMD_OPTIONS = ("fullflush", "force_enable", "off", "force_isolation", "pgtbl_v1", "pgtbl_v2", "irtcachedis",
               "nohugepages", "v2_pgsizes_only")


@dataclass(frozen=True)
class IommuState:
    enabled: bool
    passthrough: bool
    passthrough_from_cmdline: bool
    amd_unknown: list[str] = field(default_factory=list)
    intel_on_token: bool = False
    intel_off: bool = False


def _values(tokens: list[str], key: str) -> list[str]:
    out = []
    for t in tokens:
        if t.startswith(key + "="):
            out += [v for v in t.split("=", 1)[1].split(",") if v]
    return out


def state(tokens: list[str], cpu: str) -> IommuState:
    iommu = _values(tokens, "iommu")
    amd = _values(tokens, "amd_iommu")
    intel = _values(tokens, "intel_iommu")
    unknown = [v for v in amd if not any(v.startswith(o) for o in AMD_OPTIONS)]
    off = "off" in iommu or (cpu == "amd" and "off" in amd) or (cpu == "intel" and "off" in intel)
    pt_values = _values(tokens, "iommu.passthrough")
    passthrough = False
    from_cmdline = False
    for v in iommu:
        if v == "pt":
            passthrough, from_cmdline = True, True
        elif v == "nopt":
            passthrough, from_cmdline = False, True
    for v in pt_values:
        passthrough, from_cmdline = v in ("1", "y", "on"), True
    return IommuState(enabled=not off, passthrough=passthrough, passthrough_from_cmdline=from_cmdline,
                      amd_unknown=unknown, intel_on_token="on" in intel, intel_off="off" in intel)


def boot_messages(st: IommuState, cpu: str, group_lines: list[str]) -> list[tuple[float, str]]:
    """(timestamp, message) pairs a boot logs about the IOMMU."""
    msgs: list[tuple[float, str]] = []
    for opt in st.amd_unknown:
        msgs.append((0.032766, f"AMD-Vi: Unknown option - '{opt}'"))
    if st.intel_on_token:
        msgs.append((0.038327, "DMAR: IOMMU enabled"))
    if st.intel_off:
        msgs.append((0.038327, "DMAR: IOMMU disabled"))
    if st.enabled and cpu == "amd":
        msgs.append((0.092149, "AMD-Vi: Using global IVHD EFR:0x0, EFR2:0x0"))
    if st.enabled and cpu == "intel":
        msgs += [(0.009125, "DMAR: Host address width 52"),
                 (0.009127, "DMAR: DRHD base: 0x000000d37fc000 flags: 0x0"),
                 (0.009137, "DMAR: dmar0: reg_base_addr d37fc000 ver 6:0 cap 9ed008c40780466 ecap 3ee9e86f050df"),
                 (0.096381, "DMAR-IR: Enabled IRQ remapping in x2apic mode")]
    if st.passthrough:
        domain = "Passthrough" + (" (set via kernel command line)" if st.passthrough_from_cmdline else "")
        msgs.append((1.294747, f"iommu: Default domain type: {domain}"))
    else:
        domain = "Translated" + (" (set via kernel command line)" if st.passthrough_from_cmdline else "")
        msgs += [(1.294747, f"iommu: Default domain type: {domain}"),
                 (1.294748, "iommu: DMA domain TLB invalidation policy: lazy mode")]
    if st.enabled:
        t = 1.334536
        if cpu == "amd":
            msgs.append((1.331895, "pci 0000:00:00.2: AMD-Vi: IOMMU performance counters supported"))
        for line in group_lines:
            msgs.append((t, line))
            t += 0.000031
        if cpu == "amd":
            msgs += [(1.532970, "AMD-Vi: Extended features (0x58f77ef22294a5a, 0x0): PPR NX GT IA PC GA_vAPIC"),
                     (1.532976, "AMD-Vi: Interrupt remapping enabled"),
                     (1.534256, "perf/amd_iommu: Detected AMD IOMMU #0 (2 banks, 4 counters/bank).")]
        else:
            msgs.append((1.612043, "DMAR: Intel(R) Virtualization Technology for Directed I/O"))
    return msgs
