"""The kernel log (``dmesg``) of one node boot, following from its CPU vendor and command line.

IOMMU lines as real 6.8+ kernels print them: AMD enables its IOMMU by default and rejects
``amd_iommu=on``/``amd_iommu=pt`` as unknown options; Intel's IOMMU is on by default from 6.8
(``intel_iommu=off`` turns it off); ``iommu=pt`` makes the default domain Passthrough, otherwise
it is Translated. Later parts append device lines (GPUs, NVRM) through :func:`render`'s ``extra``.
"""

from __future__ import annotations

CPU_MODEL = {"amd": "AMD EPYC 9554 64-Core Processor", "intel": "INTEL(R) XEON(R) PLATINUM 8592+"}


def _line(t: float, text: str) -> str:
    return f"[{t:12.6f}] {text}"


def iommu_enabled(cpu: str, tokens: list[str]) -> bool:
    if "iommu=off" in tokens:
        return False
    if cpu == "amd":
        return "amd_iommu=off" not in tokens
    return "intel_iommu=off" not in tokens


def render(kernel: str, version_line: str, cmdline: str, cpu: str, extra: list[str] | None = None) -> str:
    tokens = cmdline.split()
    lines = [
        _line(0.0, version_line.strip()),
        _line(0.0, f"Command line: {cmdline}"),
        _line(0.0, "KERNEL supported cpus:"),
        _line(0.0, "  Intel GenuineIntel"),
        _line(0.0, "  AMD AuthenticAMD"),
    ]
    if cpu == "amd":
        for token in tokens:
            if token.startswith("amd_iommu=") and token.split("=", 1)[1] not in (
                "off",
                "fullflush",
                "force_isolation",
                "force_enable",
                "pgtbl_v1",
                "pgtbl_v2",
                "irtcachedis",
                "nohugepages",
                "v2_pgsizes_only",
            ):
                lines.append(_line(0.0, f"AMD-Vi: Unknown option - '{token.split('=', 1)[1]}'"))
    lines.append(_line(0.084512, f"smpboot: CPU0: {CPU_MODEL[cpu]}"))
    enabled = iommu_enabled(cpu, tokens)
    if cpu == "intel":
        lines.append(_line(0.010213, "DMAR: IOMMU enabled" if enabled else "DMAR: IOMMU disabled"))
        if enabled:
            lines.append(_line(0.351207, "DMAR: Host address width 46"))
    if enabled:
        domain = "Passthrough (set via kernel command line)" if "iommu=pt" in tokens else "Translated"
        lines += [
            _line(0.412345, f"iommu: Default domain type: {domain}"),
            _line(0.412349, "iommu: DMA domain TLB invalidation policy: lazy mode"),
        ]
        if cpu == "amd":
            lines += [
                _line(1.234567, "pci 0000:00:00.2: AMD-Vi: IOMMU performance counters supported"),
                _line(1.238021, "AMD-Vi: Extended features (0x246577efa2254afa, 0x0): PPR NX GT [5] IA GA PC"),
                _line(1.238036, "AMD-Vi: Interrupt remapping enabled"),
                _line(1.240112, "perf/amd_iommu: Detected AMD IOMMU #0 (2 banks, 4 counters/bank)."),
            ]
        else:
            lines += [
                _line(1.102345, "DMAR-IR: Enabled IRQ remapping in x2apic mode"),
                _line(1.204567, "DMAR: Intel(R) Virtualization Technology for Directed I/O"),
            ]
    lines += extra or []
    lines.append(_line(3.512345, "systemd[1]: Reached target multi-user.target - Multi-User System."))
    return "\n".join(lines) + "\n"
