"""Facts about the NVIDIA driver that do not need the driver to work (so they also explain failures)."""

from __future__ import annotations

import re

from gpuhost.connection.base import Connection

_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")


def parse_nvml_library_versions(listing: str) -> list[str]:
    """``libnvidia-ml.so.580.95.05`` file names → the versions installed, newest first."""
    found = set(re.findall(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)\b", listing))
    return sorted(found, key=lambda v: [int(p) for p in v.split(".")], reverse=True)


def userspace_version(conn: Connection) -> str | None:
    """The NVIDIA userspace (NVML library) version installed, whatever the kernel module says."""
    dirs = " ".join(_LIB_DIRS)
    listing = conn.run(f"for d in {dirs}; do ls -1 $d/libnvidia-ml.so.* 2>/dev/null; done; true").stdout
    versions = parse_nvml_library_versions(listing)
    return versions[0] if versions else None


def build_prerequisites(conn: Connection) -> list[str]:
    """What a ``--dkms`` build still lacks on this host (empty when ready)."""
    out = conn.run('command -v dkms >/dev/null || echo dkms; '
                   'test -e "/lib/modules/$(uname -r)/build" || echo "headers for $(uname -r)"', check=False)
    return [line for line in out.stdout.splitlines() if line.strip()]
