"""What an NVIDIA ``.run`` installer left behind (``/var/log/nvidia-installer.log`` or its terminal output): the
driver version, the ``ERROR:`` messages (their wrapped continuation lines joined), and the cause and fix of the
first one that decides the failure.

The installer wraps a message over lines indented under its text (nvidia-installer ``ui_error``/``fmt`` in
NVIDIA/nvidia-installer, misc.c); the log file starts with ``nvidia-installer log file '…'`` and
``installer version: X``. Pastes of its output often cut the last message: a message is kept as far as it goes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^installer version: (\S+)", re.M)
_START = re.compile(r"^\s*(ERROR|WARNING): (.*)$")
_CONTINUATION = re.compile(r"^\s{4,}(\S.*)$")


@dataclass(frozen=True)
class InstallerLog:
    version: str | None
    errors: tuple[str, ...]  # each ERROR message, its wrapped lines joined
    warnings: tuple[str, ...]
    cause: str | None
    fix: str | None


def _messages(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, list[str]]] = []
    current: tuple[str, list[str]] | None = None
    for line in text.splitlines():
        if m := _START.match(line):
            current = (m.group(1), [m.group(2).strip()])
            out.append(current)
        elif current is not None and (c := _CONTINUATION.match(line)):
            current[1].append(c.group(1).strip())
        else:
            current = None
    return [(kind, " ".join(parts)) for kind, parts in out]


# (pattern in an ERROR message, cause, fix): the first error that matches one decides
_CAUSES: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"An NVIDIA kernel module '([\w-]+)' appears to already be loaded"),
        "an NVIDIA kernel module ({0}) is loaded and in use (a container or VM with the GPU, a CUDA program, "
        "nvidia-persistenced or X), so the installer cannot replace it",
        "stop what uses the GPU (systemctl stop nvidia-persistenced; stop its containers/VMs), unload the modules "
        "(rmmod nvidia_drm nvidia_modeset nvidia_uvm nvidia) and rerun; or reboot first (gpuhost provision host "
        "--allow-reboot)",
    ),
    (
        re.compile(r"Failed to run `[^`]*dkms build -m nvidia -v ([\w.]+) -k ([\w.-]+)`"),
        "DKMS could not build the NVIDIA {0} module for kernel {1}: the driver is older than the kernel, or the "
        "kernel's headers are missing",
        "read the make.log DKMS names; install the headers of that kernel (on PVE: proxmox-headers-$(uname -r) or "
        "pve-headers-$(uname -r)); use a driver release that supports this kernel",
    ),
    (
        re.compile(r"Unable to find the kernel source tree"),
        "the installer found no headers for the running kernel, so it cannot build the module",
        "install the running kernel's headers (on PVE: proxmox-headers-$(uname -r)) and rerun",
    ),
    (
        re.compile(r"Nouveau kernel driver is currently in use"),
        "the open-source nouveau driver holds the GPU",
        "blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf: blacklist nouveau, options nouveau modeset=0), "
        "update-initramfs -u -k all, reboot, rerun",
    ),
    (
        re.compile(r"Unable to load the kernel module 'nvidia\.ko'"),
        "the module was built but the kernel refused to load it: nouveau (or another driver) holds the GPU, Secure "
        "Boot refuses an unsigned module, or it was built for another kernel than the running one",
        "read 'Kernel module load error' / 'Kernel messages' at the end of /var/log/nvidia-installer.log and dmesg "
        "| grep -i -e nvrm -e nouveau; blacklist nouveau; sign the module or turn Secure Boot off; build against "
        "the running kernel's headers",
    ),
]


def parse_installer_log(text: str) -> InstallerLog:
    messages = _messages(text)
    errors = tuple(m for kind, m in messages if kind == "ERROR")
    warnings = tuple(m for kind, m in messages if kind == "WARNING")
    version = m.group(1) if (m := _VERSION.search(text)) else None
    cause = fix = None
    for pattern, why, what in _CAUSES:
        found = next((hit for e in errors if (hit := pattern.search(e))), None)
        if found is not None:
            cause, fix = why.format(*found.groups()), what
            break
    if cause is None and errors:
        cause = errors[0]
        fix = "read the end of /var/log/nvidia-installer.log for the step that failed"
    return InstallerLog(version, errors, warnings, cause, fix)
