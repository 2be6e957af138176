"""The facts ``gpuhost facts HOST`` shows, read in one round trip."""

from __future__ import annotations

from typing import Any

from gpuhost.connection.base import Connection
from gpuhost.facts.batch import run_sections

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
