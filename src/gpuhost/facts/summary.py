"""The facts ``gpuhost facts HOST`` shows, read in one round trip."""

from __future__ import annotations

from typing import Any

from gpuhost.core.facts import Fact
from gpuhost.core.result import CommandResult
from gpuhost.errors import FactError
from gpuhost.facts.batch import parse_sections, sections_command
from gpuhost.facts.host import HOST_PROBES, host_facts_from

#: Probes beyond the host role's own (HOST_PROBES), batched into the same round trip.
_EXTRA_PROBES: dict[str, str] = {
    "hostname": "hostname",
    "os_release": "cat /etc/os-release",
    "arch": "uname -m",
    "boot_id": "cat /proc/sys/kernel/random/boot_id",
}


def parse_os_release(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"')
    return out


def _summary(result: CommandResult) -> dict[str, Any]:
    s = parse_sections(result.stdout)

    def text(key: str) -> str:
        return s[key].output.strip() if key in s and s[key].ok else ""

    osr = parse_os_release(text("os_release"))
    facts: dict[str, Any] = {
        "hostname": text("hostname"),
        "os": osr.get("PRETTY_NAME", ""),
        "os_version_id": osr.get("VERSION_ID", ""),
        "kernel": text("kernel"),
        "arch": text("arch"),
        "cpu_vendor": text("cpu"),
        "cmdline": text("proc_cmdline").split(),
        "pve_version": text("pveversion") or None,
        "boot_id": text("boot_id"),
    }
    try:
        f = host_facts_from(s)
    except FactError as exc:
        return {**facts, "boot_loader": f"unknown: {exc}"}
    return {
        **facts,
        "boot_loader": f.boot.describe(),
        "cmdline_file": f.boot.cmdline_file,
        "iommu_default_domain": f.iommu.default_domain,
        "iommu_groups": len(set(f.iommu_groups.values())),
        "gpus": [f"{g.bdf} {g.vendor}:{g.device} {g.name}" + (f" [{g.driver}]" if g.driver else "") for g in f.gpus],
        "nvidia_module_loaded": f.nvidia.version if f.nvidia else None,
        "nvidia_module_installed": f.nvidia_installed,
        "nvidia_uvm": "/dev/nvidia-uvm" in f.nvidia_devices,
    }


summary: Fact[dict[str, Any]] = Fact("summary", lambda: sections_command({**HOST_PROBES, **_EXTRA_PROBES}), _summary)
"""Everything ``gpuhost facts`` prints."""
