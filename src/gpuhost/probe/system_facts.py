"""Facts about the machine the probe runs on: kernel, virtualisation, container, nvidia-smi.

These explain verdicts ("P2P off inside a VM" reads differently from "P2P off on the
host"), and they are what the probe can still report when NVML or CUDA cannot start.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any


def _read(path: str, limit: int = 65536) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return None


def _cpu_has_hypervisor_flag() -> bool | None:
    text = _read("/proc/cpuinfo", 1 << 20)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return "hypervisor" in line.split()
    return None


def _container() -> str | None:
    """``lxc``, ``docker``, ``podman``... when the probe runs in a container."""
    environ = _read("/proc/1/environ")
    if environ:
        for item in environ.split("\0"):
            if item.startswith("container="):
                return item.split("=", 1)[1] or "unknown"
    if os.path.exists("/.dockerenv"):
        return "docker"
    if os.path.exists("/run/.containerenv"):
        return "podman"
    return None


def _virt() -> str | None:
    """The hypervisor as systemd-detect-virt names it, when that tool exists."""
    tool = shutil.which("systemd-detect-virt")
    if not tool:
        return None
    try:
        out = subprocess.run([tool, "--vm"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    name = out.stdout.decode(errors="replace").strip()
    return name or None


def host_facts() -> dict[str, Any]:
    cmdline = _read("/proc/cmdline")
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "python": "%d.%d.%d" % sys.version_info[:3],
        "cmdline": cmdline.strip() if cmdline else None,
        "cpu_hypervisor_flag": _cpu_has_hypervisor_flag(),
        "virt": _virt(),
        "container": _container(),
        "nvidia_driver_proc": (_read("/proc/driver/nvidia/version") or "").strip() or None,
        "device_nodes": sorted(n for n in _listdir("/dev") if n.startswith("nvidia")),
    }


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


SMI_QUERY = (
    "index,name,pci.bus_id,driver_version,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max"
)


def _smi(args: list[str], tool: str) -> dict[str, Any]:
    try:
        out = subprocess.run([tool] + args, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"exit_code": None, "output": "", "error": str(exc)}
    text = (out.stdout + out.stderr).decode(errors="replace").strip()
    return {"exit_code": out.returncode, "output": text[-8000:]}


def nvidia_smi_facts() -> dict[str, Any]:
    """What ``nvidia-smi`` prints for the GPU list and P2P read status, or why it cannot."""
    tool = shutil.which("nvidia-smi")
    if not tool:
        return {"available": False, "error": "nvidia-smi is not on PATH"}
    return {
        "available": True,
        "query": _smi(["--query-gpu=" + SMI_QUERY, "--format=csv,noheader,nounits"], tool),
        "topo_p2p_r": _smi(["topo", "-p2p", "r"], tool),
    }
