"""The facts ``gpuhost facts HOST`` shows, read in one round trip."""

from __future__ import annotations

from typing import Any

from gpuhost.connection.base import Connection

_SEP = "\n@@gpuhost@@ "

# Each probe prints a marker line then its output; missing commands print nothing.
_PROBES: dict[str, str] = {
    "hostname": "hostname",
    "os_release": "cat /etc/os-release",
    "kernel": "uname -r",
    "arch": "uname -m",
    "cpu_vendor": "grep -m1 '^vendor_id' /proc/cpuinfo | cut -d: -f2",
    "cmdline": "cat /proc/cmdline",
    "pveversion": "command -v pveversion >/dev/null && pveversion",
    "boot_id": "cat /proc/sys/kernel/random/boot_id",
    "nvidia_driver": "cat /proc/driver/nvidia/version 2>/dev/null | head -1",
}


def parse_os_release(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip().strip('"')
    return out


def gather(conn: Connection) -> dict[str, Any]:
    script = "; ".join(f"echo '{_SEP.strip()} {key}'; ({cmd}) 2>/dev/null" for key, cmd in _PROBES.items())
    text = conn.run(script, check=False).stdout
    raw: dict[str, str] = {}
    for chunk in ("\n" + text).split(_SEP)[1:]:
        key, _, value = chunk.partition("\n")
        raw[key.strip()] = value.strip()
    osr = parse_os_release(raw.get("os_release", ""))
    return {
        "hostname": raw.get("hostname", ""),
        "os": osr.get("PRETTY_NAME", ""),
        "os_version_id": osr.get("VERSION_ID", ""),
        "kernel": raw.get("kernel", ""),
        "arch": raw.get("arch", ""),
        "cpu_vendor": raw.get("cpu_vendor", "").strip(),
        "cmdline": raw.get("cmdline", "").split(),
        "pve_version": raw.get("pveversion") or None,
        "boot_id": raw.get("boot_id", ""),
        "nvidia_driver": raw.get("nvidia_driver") or None,
    }
