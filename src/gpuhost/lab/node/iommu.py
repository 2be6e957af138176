"""What the kernel makes of the IOMMU tokens on its command line (whether /sys/kernel/iommu_groups
fills, and with which default domain type).

AMD: the IOMMU is on by default; ``amd_iommu=`` only knows fullflush, force_enable, off,
force_isolation, pgtbl_v1/v2, irtcachedis, nohugepages and v2_pgsizes_only (anything else:
``AMD-Vi: Unknown option - 'X'``). Intel: on by default since 6.8 (PVE's config). ``iommu=off`` (or the vendor ``=off``) disables it; ``iommu=pt`` or
``iommu.passthrough=1`` makes the default domain ``Passthrough (set via kernel command line)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

AMD_OPTIONS = (
    "fullflush",
    "force_enable",
    "off",
    "force_isolation",
    "pgtbl_v1",
    "pgtbl_v2",
    "irtcachedis",
    "nohugepages",
    "v2_pgsizes_only",
)


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
    return IommuState(
        enabled=not off,
        passthrough=passthrough,
        passthrough_from_cmdline=from_cmdline,
        amd_unknown=unknown,
        intel_on_token="on" in intel,
        intel_off="off" in intel,
    )
