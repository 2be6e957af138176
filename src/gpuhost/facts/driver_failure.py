"""Why ``nvidia-smi`` (or a container runtime) cannot reach the NVIDIA driver, told for where it ran.

The same words mean different fixes on a bare-metal host, in an LXC/LXD container, in a
Docker container and in a VM: a version mismatch on a host is a driver upgraded without a
reboot (or modules built for another version); in a container it is the container's
userspace differing from the host's kernel module. When the output (or the caller) gives
both the NVML library version and ``/proc/driver/nvidia/version``, they are put side by side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.facts.hardware import parse_nvidia_version

WHERE = ("host", "lxc", "lxd", "docker", "vm", "unknown")

_LIB = re.compile(r"NVML library version:\s*(\S+)")
_DOCKER = re.compile(r"nvidia-container-cli: initialization error|docker: Error response from daemon|OCI runtime")


@dataclass(frozen=True)
class DriverFailure:
    kind: str  # version-mismatch, no-driver, runtime-no-library, runtime-nvml-mismatch, not-installed, other
    where: str
    library_version: str | None
    module_version: str | None
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.message}; {self.fix}"


def where_from_text(output: str, default: str = "unknown") -> str:
    """Where the output came from, when it says so (a Docker runtime error does)."""
    return "docker" if _DOCKER.search(output) else default


def _versions(library: str | None, module: str | None) -> str:
    parts = []
    if library:
        parts.append(f"NVML library ({library})")
    if module:
        parts.append(f"kernel module ({module})")
    return ", ".join(parts)


def _mismatch_fix(where: str) -> str:
    if where in ("lxc", "lxd"):
        return (
            "install the host's exact driver version in the container without kernel modules "
            "(NVIDIA-Linux-*.run --no-kernel-modules; gpuhost provision lxc does), or reboot the host if its "
            "driver was upgraded since it booted"
        )
    if where == "docker":
        return (
            "do not install a driver in the image: let the NVIDIA container toolkit mount the host's "
            "userspace (docker run --gpus all), and reboot the host if its driver was upgraded since it booted"
        )
    if where == "vm":
        return "the guest's driver userspace and module differ: reinstall one driver version in the guest and reboot it"
    if where == "host":
        return (
            "the loaded kernel module is older or newer than the installed userspace: reboot (a driver "
            "upgrade without reboot does this) or rebuild/reinstall the module for the userspace version"
        )
    return (
        "reboot if the driver was upgraded since boot; in a container, install the host's exact version "
        "without kernel modules"
    )


def _no_driver(where: str) -> tuple[str, str]:
    if where in ("lxc", "lxd"):
        return (
            "the container cannot reach the driver: /dev/nvidia* device nodes are not passed through (devN "
            "entries) or the host module is not loaded",
            "pass the device nodes into the container and load the NVIDIA modules on the host",
        )
    if where == "docker":
        return (
            "the container cannot reach the driver",
            "run with --gpus all (NVIDIA container toolkit) and check nvidia-smi on the host first",
        )
    if where == "vm":
        return (
            "the guest has no working NVIDIA driver",
            "check the GPU is passed through (lspci in the guest) and the driver module loads (dmesg | grep NVRM)",
        )
    return (
        "no NVIDIA kernel module answers",
        "load it (modprobe nvidia) and read dmesg | grep -i nvrm for why it does not; after a kernel "
        "upgrade rebuild it (dkms) or reinstall the driver",
    )


def explain_driver_failure(
    output: str, *, where: str = "unknown", module_version: str | None = None, library_version: str | None = None
) -> DriverFailure:
    """Cause and fix for a failed ``nvidia-smi`` or GPU container start, for where it ran."""
    where = where_from_text(output, where) if where == "unknown" else where
    lib = library_version or (m.group(1) if (m := _LIB.search(output)) else None)
    module = module_version
    if module is None and (found := parse_nvidia_version(output)) is not None:
        module = found.version
    side = _versions(lib, module)
    detail = f": {side}" if side else ""
    if "load library failed: libnvidia-ml.so" in output:
        return DriverFailure(
            "runtime-no-library",
            "docker",
            lib,
            module,
            "nvidia-container-cli found no libnvidia-ml.so.1 on the host: the NVIDIA driver's "
            "userspace is not installed where the container runtime looks",
            "install the NVIDIA driver on the host (nvidia-smi must work there first), then "
            "'nvidia-ctk runtime configure --runtime=docker' and restart docker",
        )
    if "nvml error: driver/library version mismatch" in output:
        return DriverFailure(
            "runtime-nvml-mismatch",
            "docker",
            lib,
            module,
            f"the host's own NVIDIA userspace and kernel module differ{detail}",
            "reboot the host (its driver was upgraded without one), then retry the container",
        )
    if "version mismatch" in output:
        where_words = {
            "lxc": "the container's NVIDIA userspace differs from the host's kernel module",
            "lxd": "the container's NVIDIA userspace differs from the host's kernel module",
            "docker": "the image's NVIDIA userspace differs from the host's kernel module",
            "vm": "the guest's NVIDIA userspace differs from its kernel module",
            "host": "the installed NVIDIA userspace differs from the loaded kernel module",
        }
        what = where_words.get(where, "the NVIDIA userspace (NVML) differs from the loaded kernel module")
        return DriverFailure(
            "version-mismatch",
            where,
            lib,
            module,
            f"driver/library version mismatch: {what}{detail}",
            _mismatch_fix(where),
        )
    if re.search(
        r"couldn't communicate with the NVIDIA driver|Unable to communicate with the NVIDIA driver|"
        r"No devices were found",
        output,
    ):
        message, fix = _no_driver(where)
        return DriverFailure("no-driver", where, lib, module, message + detail, fix)
    if re.search(r"nvidia-smi: (command )?not found|No such file or directory.*nvidia-smi", output):
        return DriverFailure(
            "not-installed",
            where,
            lib,
            module,
            "nvidia-smi is not installed here",
            "install the driver's userspace (in a container: the host's exact version, --no-kernel-modules)",
        )
    return DriverFailure("other", where, lib, module, output.strip()[-300:] or "nvidia-smi failed", "")
