"""``lxc_check``: named, read-only proofs that a GPU container is ready for CUDA work."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from gpuhost.errors import OperationFailed
from gpuhost.facts.driver_failure import explain_driver_failure
from gpuhost.facts.nvidia import userspace_version
from gpuhost.facts.pve import ct_status
from gpuhost.operations.base import Args, Operation, Plan, SkipTask, nothing
from gpuhost.operations.registry import register

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext

CheckName = Literal["nvidia_smi", "driver_match", "uvm", "memlock", "cuda_init"]

_CUINIT = ("import ctypes,sys\n"
           "try:\n lib=ctypes.CDLL('libcuda.so.1')\nexcept OSError as e:\n print('nolib',e); sys.exit(3)\n"
           "rc=lib.cuInit(0)\nname=ctypes.c_char_p()\nlib.cuGetErrorName(rc,ctypes.byref(name))\n"
           "n=ctypes.c_int(0)\nlib.cuDeviceGetCount(ctypes.byref(n)) if rc==0 else None\n"
           "print(rc,(name.value or b'').decode(),n.value)\n")


def explain_nvidia_smi_failure(output: str, module_version: str | None = None) -> str:
    """Cause and fix for the ways ``nvidia-smi`` fails inside a container (the host's module version beside)."""
    return str(explain_driver_failure(output, where="lxc", module_version=module_version))


class LxcCheckArgs(Args):
    ctid: int
    check: CheckName
    gpus: int = 0
    driver: str | None = None


@register
class LxcCheck(Operation):
    kind = "lxc_check"
    Args = LxcCheckArgs
    args: LxcCheckArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        if a.ctid in host.restart_required:
            raise SkipTask(f"not checked: CT {a.ctid} must restart first (--allow-restart)")
        if host.reboot_required:
            raise SkipTask("not checked: the host must reboot first (--allow-reboot)")
        if host.fact(ct_status, a.ctid) != "running":
            if host.check:
                raise SkipTask(f"check mode: CT {a.ctid} is not running yet")
            raise OperationFailed(f"CT {a.ctid} is not running")
        ct = host.guest(a.ctid)
        try:
            return getattr(self, f"_{a.check}")(ct)
        except OperationFailed:
            if host.check:
                raise SkipTask(f"check mode: {a.check} would be checked after the changes") from None
            raise

    def _nvidia_smi(self, ct: HostContext) -> Plan:
        r = ct.conn.run("nvidia-smi -L", check=False)
        listed = [line for line in r.stdout.splitlines() if re.match(r"^GPU \d+:", line)]
        if r.exit_code != 0:
            raise OperationFailed("nvidia-smi -L failed in the container: "
                                  + explain_nvidia_smi_failure(r.stdout + r.stderr, self.args.driver))
        if self.args.gpus and len(listed) != self.args.gpus:
            raise OperationFailed(f"nvidia-smi -L lists {len(listed)} GPUs, expected {self.args.gpus}: "
                                  "check the container's devN entries")
        return nothing(f"nvidia-smi -L lists {len(listed)} GPUs")

    def _driver_match(self, ct: HostContext) -> Plan:
        have = ct.fact(userspace_version)
        if have != self.args.driver:
            raise OperationFailed(f"container userspace {have or 'not installed'}, host module {self.args.driver}: "
                                  "they must be equal (Driver/library version mismatch otherwise)")
        return nothing(f"container userspace {have} = host module {self.args.driver}")

    def _uvm(self, ct: HostContext) -> Plan:
        if ct.conn.run("test -c /dev/nvidia-uvm", check=False).exit_code != 0:
            raise OperationFailed("/dev/nvidia-uvm is missing in the container: CUDA fails with "
                                  "'initialization error'; pass /dev/nvidia-uvm and /dev/nvidia-uvm-tools (devN)")
        return nothing("/dev/nvidia-uvm present")

    def _memlock(self, ct: HostContext) -> Plan:
        limit = ct.conn.run("ulimit -l", check=False).stdout.strip()
        if limit != "unlimited":
            raise OperationFailed(f"ulimit -l is {limit or '?'} in the container: pinned memory and NCCL need "
                                  "lxc.prlimit.memlock: unlimited (and a container restart)")
        return nothing("ulimit -l unlimited")

    def _cuda_init(self, ct: HostContext) -> Plan:
        if ct.conn.run("command -v python3", check=False).exit_code != 0:
            raise SkipTask("no python3 in the container to call cuInit")
        r = ct.conn.run("python3 -", input=_CUINIT, check=False)
        if r.exit_code == 3:
            raise OperationFailed("libcuda.so.1 not found in the container: the driver's userspace is missing")
        parts = r.stdout.split()
        if r.exit_code != 0 or len(parts) < 2:
            raise OperationFailed(f"cuInit check failed: {(r.stdout + r.stderr).strip()[-200:]}")
        rc, name = int(parts[0]), parts[1]
        if rc != 0:
            hint = (" (/dev/nvidia-uvm missing or not allowed)" if name in ("CUDA_ERROR_UNKNOWN", "")
                    else "")
            raise OperationFailed(f"cuInit returned {rc} {name}{hint}")
        return nothing(f"cuInit ok, {parts[2] if len(parts) > 2 else '?'} CUDA devices")
