"""Container proofs: pure functions from :class:`~gpuhost.facts.container.ContainerFacts` to findings."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.facts.container import ContainerFacts
from gpuhost.facts.driver_failure import explain_driver_failure


@dataclass(frozen=True)
class ContainerExpectation:
    gpus: int = 0  # 0: at least one
    driver: str | None = None  # the host's loaded module version


def explain_nvidia_smi_failure(output: str, module_version: str | None = None) -> tuple[str, str]:
    """Cause and fix for the ways ``nvidia-smi`` fails inside a container (library and module side by side)."""
    failure = explain_driver_failure(output, where="lxc", module_version=module_version)
    return failure.message, failure.fix


@check(
    "ct.gpus_listed",
    group="container",
    title="nvidia-smi -L lists the container's GPUs",
    meaning="the container does not see its GPUs: device nodes not passed through, the driver userspace missing "
    "or of another version than the host's module",
    fix="gpuhost provision lxc --allow-restart",
)
def gpus_listed(f: ContainerFacts, subject: str, expected: int) -> Finding:
    listed = [line for line in f.nvidia_smi_output.splitlines() if re.match(r"^GPU \d+:", line)]
    if f.nvidia_smi_exit != 0:
        cause, fix = explain_nvidia_smi_failure(f.nvidia_smi_output)
        return Finding(
            Level.FAIL, "ct.gpus_listed", subject, "nvidia-smi -L failed in the container", cause=cause, fix=fix
        )
    if (expected and len(listed) != expected) or not listed:
        return Finding(
            Level.FAIL,
            "ct.gpus_listed",
            subject,
            f"nvidia-smi -L lists {len(listed)} GPUs, expected {expected or 'at least 1'}",
            cause="devN entries missing or not applied yet (a running CT needs a restart)",
            fix="gpuhost provision lxc --allow-restart",
        )
    return Finding(Level.PASS, "ct.gpus_listed", subject, f"nvidia-smi -L lists {len(listed)} GPUs")


@check(
    "ct.driver_match",
    group="container",
    title="container userspace = host kernel module",
    meaning="NVML refuses to work when the userspace library and the kernel module differ: "
    "'Failed to initialize NVML: Driver/library version mismatch'",
    fix="gpuhost provision lxc (installs the host's exact version, userspace only, and holds it)",
)
def driver_match(f: ContainerFacts, subject: str, host_module: str) -> Finding:
    have = f.userspace_version
    if have != host_module:
        return Finding(
            Level.FAIL,
            "ct.driver_match",
            subject,
            f"container userspace {have or 'not installed'}, host module {host_module}",
            cause="they must be equal (Driver/library version mismatch otherwise)",
            fix="gpuhost provision lxc",
        )
    return Finding(Level.PASS, "ct.driver_match", subject, f"container userspace {have} = host module {host_module}")


@check(
    "ct.uvm",
    group="container",
    title="/dev/nvidia-uvm inside the container",
    meaning="CUDA fails with 'initialization error' while nvidia-smi works",
    fix="pass /dev/nvidia-uvm and /dev/nvidia-uvm-tools (devN entries): gpuhost provision lxc --allow-restart",
)
def uvm(f: ContainerFacts, subject: str) -> Finding:
    if not f.uvm_present:
        return Finding(
            Level.FAIL,
            "ct.uvm",
            subject,
            "/dev/nvidia-uvm is missing in the container",
            cause="CUDA fails with 'initialization error' without it",
            fix="gpuhost provision lxc --allow-restart",
        )
    return Finding(Level.PASS, "ct.uvm", subject, "/dev/nvidia-uvm present")


@check(
    "ct.memlock",
    group="container",
    title="ulimit -l unlimited in the container",
    meaning="pinned host memory and NCCL fail or fall back to slow paths with a small locked-memory limit",
    fix="lxc.prlimit.memlock: unlimited in the CT config and a container restart",
)
def memlock(f: ContainerFacts, subject: str) -> Finding:
    if f.memlock != "unlimited":
        return Finding(
            Level.FAIL,
            "ct.memlock",
            subject,
            f"ulimit -l is {f.memlock or '?'} in the container",
            cause="pinned memory and NCCL need lxc.prlimit.memlock: unlimited",
            fix="gpuhost provision lxc --allow-restart",
        )
    return Finding(Level.PASS, "ct.memlock", subject, "ulimit -l unlimited")


@check(
    "ct.cuda_init",
    group="container",
    title="cuInit succeeds in the container",
    meaning="CUDA cannot start: libcuda missing, /dev/nvidia-uvm missing or not allowed, or a version mismatch",
    fix="gpuhost provision lxc --allow-restart; then gpuhost verify lxc",
)
def cuda_init(f: ContainerFacts, subject: str) -> Finding | None:
    if not f.has_python:
        return Finding(Level.INFO, "ct.cuda_init", subject, "not checked: no python3 in the container to call cuInit")
    if f.cuinit_exit == 3:
        return Finding(
            Level.FAIL,
            "ct.cuda_init",
            subject,
            "libcuda.so.1 not found in the container",
            cause="the driver's userspace is missing",
            fix="gpuhost provision lxc",
        )
    parts = f.cuinit_output.split()
    if f.cuinit_exit != 0 or len(parts) < 2 or not parts[0].lstrip("-").isdigit():
        return Finding(Level.FAIL, "ct.cuda_init", subject, f"cuInit check failed: {f.cuinit_output.strip()[-200:]}")
    rc, name = int(parts[0]), parts[1]
    if rc != 0:
        cause = "/dev/nvidia-uvm missing or not allowed" if name in ("CUDA_ERROR_UNKNOWN", "?") else None
        return Finding(
            Level.FAIL,
            "ct.cuda_init",
            subject,
            f"cuInit returned {rc} {name}",
            cause=cause,
            fix="gpuhost provision lxc --allow-restart",
        )
    return Finding(
        Level.PASS, "ct.cuda_init", subject, f"cuInit ok, {parts[2] if len(parts) > 2 else '?'} CUDA devices"
    )


def container_findings(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> list[Finding]:
    out: list[Finding | None] = [gpus_listed(f, subject, expect.gpus)]
    if expect.driver:
        out.append(driver_match(f, subject, expect.driver))
    out += [uvm(f, subject), memlock(f, subject), cuda_init(f, subject)]
    return [x for x in out if x is not None]
