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


@dataclass(frozen=True)
class ApiMismatch:
    """The kernel's own words (``NVRM: API mismatch: the client has the version A, but this kernel module has the
    version B``): a userspace client of version A met the loaded module of version B."""

    client_version: str
    module_version: str
    client: str | None = None  # 'kwin_wayland' when the driver names the process (newer drivers)


_API_MISMATCH = re.compile(
    r"API mismatch: the client (?:'(?P<name>[^']*)' \(pid \d+\) )?has the version (?P<client>[\w.-]+), but this "
    r"kernel module has the version (?P<module>[\w.-]+?)\.(?:\s|$)"
)


def nvrm_messages(text: str) -> str:
    """The NVRM lines of a kernel log joined into one message stream: each line's prefix (timestamp, journald,
    syslog) up to ``NVRM:`` removed, syslog's ``#012`` line breaks undone, whitespace collapsed."""
    parts: list[str] = []
    for line in text.replace("#012", "\n").splitlines():
        if "NVRM:" in line:
            parts.append(line.rsplit("NVRM:", 1)[1].strip())
    return " ".join(" ".join(parts).split())


def parse_nvrm_api_mismatch(text: str) -> ApiMismatch | None:
    """The last ``NVRM: API mismatch`` in a kernel log (dmesg, journal, syslog), wrapped however it was."""
    found = list(_API_MISMATCH.finditer(nvrm_messages(text)))
    if not found:
        return None
    m = found[-1]
    return ApiMismatch(m.group("client"), m.group("module"), m.group("name"))


def where_from_text(output: str, default: str = "unknown") -> str:
    """Where the output came from, when it says so (a Docker runtime error does)."""
    return "docker" if _DOCKER.search(output) else default


def _versions(library: str | None, module: str | None, label: str = "NVML library") -> str:
    parts = []
    if library:
        parts.append(f"{label} ({library})")
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
    api = parse_nvrm_api_mismatch(output)
    label = "NVML library"
    if api is not None:
        if lib is None:
            lib = api.client_version
            label = f"userspace client {api.client!r}" if api.client else "userspace client"
        module = module or api.module_version
    side = _versions(lib, module, label)
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
    if "version mismatch" in output or api is not None:
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


@dataclass(frozen=True)
class InitFailure:
    """The driver could not bring a GPU up (``NVRM: GPU <bdf>: RmInitAdapter failed! (0xAA:0xBB:line)``): its
    PCI address, the code, how often it was logged, and the cause the lines around it name."""

    device: str
    code: str
    count: int
    cause: str
    fix: str


_RM_INIT = re.compile(
    r"NVRM: GPU (?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): RmInitAdapter failed! \((?P<code>[^)]*)\)"
)
# "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible" (linux pci.c),
# "nvidia 0000:01:00.0: can't change power state from D3cold to D0 (config space inaccessible)" (older kernels)
_D3COLD = re.compile(
    r"(?P<bdf>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): (?:Unable to|can't) change power state from D3cold to D0"
)
_GSP_FIRMWARE = re.compile(r"Direct firmware load for (?P<file>nvidia/(?P<ver>[\w.-]+)/gsp_\w+\.bin) failed")
_GSP_BOOT = re.compile(r"Cannot initialize GSP firmware RM|WPR2 already up|failed to wait for GFW[ _]BOOT")


def parse_rm_init_failures(text: str) -> list[InitFailure]:
    """Every GPU the NVIDIA driver failed to initialise in a kernel log, with the cause its neighbours give."""
    counts: dict[tuple[str, str], int] = {}
    for m in _RM_INIT.finditer(text):
        key = (m.group("bdf"), m.group("code"))
        counts[key] = counts.get(key, 0) + 1
    d3cold = {m.group("bdf") for m in _D3COLD.finditer(text)}
    firmware = _GSP_FIRMWARE.search(text)
    out: list[InitFailure] = []
    for (bdf, code), n in counts.items():
        if bdf in d3cold:
            cause = (
                "the GPU did not come back from D3cold (powered off): its config space is unreachable, so the "
                "driver cannot initialise it"
            )
            fix = (
                "disable runtime power management for the GPU (echo on > /sys/bus/pci/devices/"
                f"{bdf}/power/control; on a laptop, the bbswitch/ACPI power-off), then reload the driver or "
                "reboot; if it repeats after a cold boot, reseat the card and check its power"
            )
        elif firmware is not None:
            cause = (
                f"the GSP firmware {firmware.group('file')} is missing: the kernel module and the firmware "
                "files are of different driver versions"
            )
            fix = (
                f"install the firmware of driver {firmware.group('ver')} (the loaded module's version), or one "
                "driver version for every NVIDIA package, and reboot"
            )
        elif _GSP_BOOT.search(text):
            cause = "the GPU's GSP firmware did not boot: the GPU is in a bad state (often after a failed reset)"
            fix = "reset the GPU (nvidia-smi -r -i <index>, or power-cycle the host: a warm reboot may not clear it)"
        else:
            cause = "the NVIDIA driver could not initialise this GPU (the lines before it in dmesg say why)"
            fix = (
                "read dmesg | grep -B5 RmInitAdapter; check the GPU is not bound to vfio-pci, its power and its seating"
            )
        out.append(InitFailure(bdf, code, n, cause, fix))
    return out
