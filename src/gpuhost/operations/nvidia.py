"""``nvidia_driver``: NVIDIA's ``.run`` installer at an exact version, checksum verified.

On a host it builds the kernel module through DKMS (``--dkms``, open modules for Blackwell);
in a container it installs userspace only (``--no-kernel-modules``), which must match the
host's loaded module exactly. ``nvidia_installer`` only caches the installer (on the node for its
containers, inside a VM for its own driver). Every download shows curl's bytes and rate.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from gpuhost.core.actions import RunCommand
from gpuhost.core.operation import Args, Operation
from gpuhost.core.plan import Plan, nothing
from gpuhost.core.progress import CurlMeter, LogPhases
from gpuhost.errors import OperationFailed
from gpuhost.facts import files as file_facts
from gpuhost.facts.host import host_facts
from gpuhost.facts.nvidia import build_prerequisites, userspace_version

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

CACHE_DIR = "/var/cache/gpuhost"
CHECKSUM_MISMATCH = 65


class DriverPin(Args):
    """NVIDIA's ``.run`` installer at an exact version (the inventory's ``nvidia_driver``)."""

    version: str = Field(description="driver version, e.g. 580.95.05; the host module and every container match it")
    url: str = Field(description="https://, http:// or file:// URL of NVIDIA-Linux-x86_64-VERSION.run")
    sha256: str = Field(description="SHA-256 of the installer; a download that differs is refused")
    kernel_open: bool = Field(True, description="build the open kernel modules (Blackwell needs them)")

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not re.fullmatch(r"\d+\.\d+(\.\d+)?", v):
            raise ValueError(f"'{v}' is not an NVIDIA driver version such as 580.95.05")
        return v

    @field_validator("sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not re.fullmatch(r"[0-9a-fA-F]{64}", v):
            raise ValueError("must be the 64 hex digits of the installer's SHA-256")
        return v.lower()

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.fullmatch(r"(https?|file)://\S+", v) or any(ord(c) < 0x20 or ord(c) == 0x7F for c in v):
            raise ValueError(
                "must be an https://, http:// or file:// URL of the .run installer, "
                "without spaces or control characters"
            )
        return v


class NvidiaDriverArgs(DriverPin):
    target: Literal["host", "container"] = Field("host", description="host: DKMS module; container: userspace only")


def installer_path(version: str) -> str:
    return f"{CACHE_DIR}/NVIDIA-Linux-x86_64-{version}.run"


# Every value arrives as a positional parameter of ``sh -c``: none is ever part of the script's text.
_DOWNLOAD_SCRIPT = r"""set -eu
f=$1 url=$2 want=$3
mkdir -p -- "$(dirname -- "$f")"
if [ -f "$f" ]; then got=$(sha256sum < "$f"); [ "${got%% *}" != "$want" ] || exit 0; fi
rm -f -- "$f.part"
# the progress meter of curl (and its error, if any) on stdout: the runner reads bytes and rate from it
curl -fSL --retry 3 --proto =https,http,file --proto-redir =https,http -o "$f.part" --url "$url" 2>&1
got=$(sha256sum < "$f.part"); got=${got%% *}
if [ "$got" != "$want" ]; then
  printf 'checksum mismatch for %s: got %s, want %s' "$url" "$got" "$want" >&2
  echo ' (vars.nvidia_driver.sha256 in the inventory: fix the pin or the url)' >&2
  rm -f -- "$f.part"; exit 65   # CHECKSUM_MISMATCH
fi
mv -f -- "$f.part" "$f"
"""


def download_command(a: DriverPin) -> str:
    return shlex.join(["sh", "-c", _DOWNLOAD_SCRIPT, "gpuhost-download", installer_path(a.version), a.url, a.sha256])


class NvidiaInstaller(Operation[DriverPin]):
    """NVIDIA's ``.run`` installer of the pinned version in gpuhost's cache. When it is not there yet it is downloaded
    with curl's progress meter shown (bytes and rate) and kept only when its sha256 is the pinned one."""

    kind = "nvidia_installer"
    Args = DriverPin

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        path = installer_path(a.version)
        if host.fact(file_facts.exists, path):
            return nothing(f"{path} cached")
        return Plan(
            reason=f"download NVIDIA {a.version} installer to {path} (sha256 checked)",
            actions=[RunCommand(download_command(a), timeout=1800, progress=CurlMeter("driver download"))],
        )


INSTALLER_LOG = "/var/log/nvidia-installer.log"

# The installer runs in the background; its log (it rewrites it each run) streams on stdout while it
# runs, so the runner can show the phase. The installer's own stdout and stderr stay as they are.
_INSTALL_SCRIPT = r"""log=$1; shift
rm -f -- "$log"
"$@" &
pid=$!
tail -s 0.2 -n +1 -F --pid="$pid" -- "$log" 2>/dev/null
wait "$pid"
"""

#: phases of the installer's log (nvidia-installer writes them as it goes), in the order they come
INSTALL_PHASES = (
    (r"Uninstalling the previous installation|Uninstalling NVIDIA", "removing the previous driver"),
    (r"Building kernel modules?|Kernel source path", "building the kernel module"),
    (r"Kernel module compilation complete", "kernel module built"),
    (r"DKMS", "registering the kernel module with DKMS"),
    (r"Installing NVIDIA driver version|Installed the NVIDIA userspace|userspace", "installing the userspace"),
    (r"Kernel module load succeeded|appears to be loaded", "loading the kernel module"),
)


#: nvidia-installer has ``--allow-installation-with-running-driver`` since 545 (option_table.h:748-752)
_RUNNING_DRIVER_OPTION_SINCE = (545,)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def install_command(a: NvidiaDriverArgs, running: str | None = None) -> str:
    """``running``: the version of an NVIDIA module loaded now (host). With ``--silent`` the installer first
    tries to unload it and, when it stays loaded (in use: nvidia-persistenced, a CUDA program), answers its
    continue/abort question with the default, ABORT (NVIDIA/nvidia-installer kernel.c:1694-1745
    ``check_for_loaded_kernel_modules``), unless ``--allow-installation-with-running-driver``: then it
    installs, skips the module load, and the new module is loaded at the next boot, which the host role
    plans (a reboot, with the operator's ``--allow-reboot``)."""
    opts = ["--silent", "--no-x-check", "--no-nouveau-check"]
    if a.target == "host":
        opts.append("--dkms")
        if a.kernel_open:
            opts.append("-m=kernel-open")
        if running is not None and _release(a.version) >= _RUNNING_DRIVER_OPTION_SINCE:
            opts.append("--allow-installation-with-running-driver")
    else:
        opts.append("--no-kernel-modules")
    return shlex.join(
        ["sh", "-c", _INSTALL_SCRIPT, "gpuhost-install", INSTALLER_LOG, "sh", installer_path(a.version), *opts]
    )


class NvidiaDriver(Operation[NvidiaDriverArgs]):
    """The NVIDIA driver at exactly this version, from NVIDIA's ``.run`` installer: on the host the DKMS
    kernel module, in a container the userspace only (it must match the host's module)."""

    kind = "nvidia_driver"
    Args = NvidiaDriverArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if a.target == "host":
            installed = host.fact(host_facts).nvidia_installed
            what = "kernel module (modinfo)"
        else:
            installed = host.fact(userspace_version)
            what = "userspace (libnvidia-ml)"
        if installed == a.version:
            return nothing(f"NVIDIA {what} {installed} installed")
        if a.target == "host" and not host.check:
            lacking = host.fact(build_prerequisites)
            if lacking:
                raise OperationFailed(
                    f"cannot build the NVIDIA module with DKMS: {', '.join(lacking)} missing. Install dkms and "
                    "proxmox-headers-$(uname -r) first; without them the installer silently builds a module "
                    "that breaks at the next kernel update"
                )
        step = "driver install (DKMS build)" if a.target == "host" else "driver install"
        reason = f"install NVIDIA {a.version} {what} (now: {installed or 'none'})"
        running = None
        if a.target == "host":
            loaded = host.fact(host_facts).nvidia
            running = loaded.version if loaded is not None and loaded.version != a.version else None
        if running is not None:
            if _release(a.version) < _RUNNING_DRIVER_OPTION_SINCE:
                raise OperationFailed(
                    f"NVIDIA {running} is loaded and {a.version}'s installer (before 545) cannot install over a "
                    "running driver: stop nvidia-persistenced and every GPU user (containers, VMs), unload the "
                    "module (modprobe -r nvidia_uvm nvidia), then run again"
                )
            reason += f"; the loaded {running} module stays in use until the host reboots (--allow-reboot)"
        return Plan(
            reason=reason,
            actions=[
                RunCommand(download_command(a), timeout=1800, progress=CurlMeter("driver download")),
                RunCommand(install_command(a, running), timeout=1800, progress=LogPhases(step, INSTALL_PHASES)),
            ],
        )
