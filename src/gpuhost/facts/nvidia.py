"""Facts about the NVIDIA driver that do not need the driver to work (so they also explain failures)."""

from __future__ import annotations

import re

from gpuhost.core.facts import fact
from gpuhost.core.result import CommandResult

_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")


def parse_nvml_library_versions(listing: str) -> list[str]:
    """``libnvidia-ml.so.580.95.05`` file names → the versions installed, newest first."""
    found = set(re.findall(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)\b", listing))
    return sorted(found, key=lambda v: [int(p) for p in v.split(".")], reverse=True)


USERSPACE_LISTING = f"for d in {' '.join(_LIB_DIRS)}; do ls -1 $d/libnvidia-ml.so.* 2>/dev/null; done; true"


@fact("NVIDIA userspace version", USERSPACE_LISTING)
def userspace_version(result: CommandResult) -> str | None:
    """The NVIDIA userspace (NVML library) version installed, whatever the kernel module says."""
    versions = parse_nvml_library_versions(result.stdout)
    return versions[0] if versions else None


@fact(
    "DKMS build prerequisites",
    "command -v dkms >/dev/null || echo dkms; "
    'test -e "/lib/modules/$(uname -r)/build" || echo "headers for $(uname -r)"',
)
def build_prerequisites(result: CommandResult) -> list[str]:
    """What a ``--dkms`` build still lacks on this host (empty when ready)."""
    return [line for line in result.stdout.splitlines() if line.strip()]
