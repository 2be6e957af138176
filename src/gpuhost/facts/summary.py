"""The facts ``gpuhost facts HOST`` shows, read in one round trip."""

from __future__ import annotations

from typing import Any

from gpuhost.connection.base import Connection
from gpuhost.errors import FactError
from gpuhost.facts.batch import run_sections
from gpuhost.facts.host import host_facts

_PROBES: dict[str, str] = {
    "hostname": "hostname",
    "os_release": "cat /etc/os-release",
    "kernel": "uname -r",
    "arch": "uname -m",
    "cpu_vendor": "grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2",
    "cmdline": "cat /proc/cmdline",
    "pveversion": "pveversion",
    "boot_id": "cat /proc/sys/kernel/random/boot_id",
    "nvidia_driver": "head -1 /proc/driver/nvidia/version",
}


def parse_os_release(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"')
    return out


def gather(conn: Connection) -> dict[str, Any]:
    s = run_sections(conn, _PROBES)

    def text(key: str) -> str:
        return s[key].output.strip() if key in s and s[key].ok else ""

    osr = parse_os_release(text("os_release"))
    return {**_basics(text, osr), **_gpu_host(conn)}


def _gpu_host(conn: Connection) -> dict[str, Any]:
    """What the provisioning roles decide from: boot loader, IOMMU, GPUs, NVIDIA driver."""
    try:
        f = host_facts(conn)
    except FactError as exc:
        return {"boot_loader": f"unknown: {exc}"}
    return {
        "boot_loader": f.boot.describe(),
        "cmdline_file": f.boot.cmdline_file,
        "iommu_default_domain": f.iommu.default_domain,
        "iommu_groups": len(set(f.iommu_groups.values())),
        "gpus": [f"{g.bdf} {g.vendor}:{g.device} {g.name}" + (f" [{g.driver}]" if g.driver else "")
                 for g in f.gpus],
        "nvidia_module_loaded": f.nvidia.version if f.nvidia else None,
        "nvidia_module_installed": f.nvidia_installed,
        "nvidia_uvm": "/dev/nvidia-uvm" in f.nvidia_devices,
    }


def _basics(text: Any, osr: dict[str, str]) -> dict[str, Any]:
    return {
        "hostname": text("hostname"),
        "os": osr.get("PRETTY_NAME", ""),
        "os_version_id": osr.get("VERSION_ID", ""),
        "kernel": text("kernel"),
        "arch": text("arch"),
        "cpu_vendor": text("cpu_vendor"),
        "cmdline": text("cmdline").split(),
        "pve_version": text("pveversion") or None,
        "boot_id": text("boot_id"),
        "nvidia_driver": text("nvidia_driver") or None,
    }
