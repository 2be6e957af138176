"""Container proofs: pure functions from :class:`~gpuhost.facts.container.ContainerFacts` (and a
:class:`ContainerExpectation`) to findings; the ones over the container's own facts are listed, with when each
applies, in :data:`gpuhost.checks.table.CONTAINER_CHECKS`. The others judge what the acceptance suite reads
beside them (the CT's status, its PVE config, device nodes, the APT hold file)."""

from __future__ import annotations

import re

from pydantic import Field

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.core.operation import Args
from gpuhost.facts.container import ContainerFacts
from gpuhost.facts.driver_failure import explain_driver_failure
from gpuhost.pve.config import GuestConfig


class ContainerExpectation(Args):
    """What a provisioned GPU container must show inside."""

    gpus: int = Field(default=0, description="how many GPUs nvidia-smi -L must list inside (0: at least one)")
    driver: str | None = Field(default=None, description="the driver version inside must equal this (the host's)")


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
def gpus_listed(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> Finding:
    expected = expect.gpus
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
def driver_match(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> Finding | None:
    host_module = expect.driver
    if host_module is None:
        return None
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
def uvm(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> Finding:
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
def memlock(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> Finding:
    """``ulimit -l`` read through ``pct exec`` is the limit the container's processes get: pct exec is
    lxc-attach (pve-container pct.pm:250), and lxc-attach applies the started container's
    ``lxc.prlimit.*`` to the attached process as LXC applies them to its init (lxc attach.c:1711-1714
    ``setup_resource_limits``, conf.c:2971-2996). A prlimit added after the start shows only after a
    restart, for both."""
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
def cuda_init(f: ContainerFacts, subject: str, expect: ContainerExpectation) -> Finding | None:
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


@check(
    "ct.running",
    group="container",
    title="the container is running",
    meaning="a GPU container that is stopped or gone serves nothing; a CT that fails to start usually names a "
    "missing device node ('Device /dev/nvidia-uvm does not exist')",
    fix="gpuhost provision lxc (creates and starts it), or pct start CTID to see why it does not start",
)
def running(status: str | None, subject: str, ctid: int) -> Finding:
    if status != "running":
        return Finding(
            Level.FAIL, "ct.running", subject, f"CT {ctid} is {status or 'absent'}", fix="gpuhost provision lxc"
        )
    return Finding(Level.PASS, "ct.running", subject, f"CT {ctid} is running")


def _passed_devices(config: GuestConfig) -> set[str]:
    """Host device paths the config passes: ``devN`` entries (PVE 8.1+) or bind-mount entries (older)."""
    main = config.main
    out = {v.split(",", 1)[0] for k, v in main.options.items() if re.fullmatch(r"dev\d+", k)}
    for key, value in main.lxc:
        if key == "lxc.mount.entry":
            source = value.split()[0] if value.split() else ""
            if source.startswith("/dev/"):
                out.add(source)
    return out


@check(
    "ct.devices_configured",
    group="container",
    title="the CT config passes every GPU device node (devN entries)",
    meaning="a device node is missing from the container's configuration: the container loses it at its next "
    "start (a GPU, nvidiactl, or nvidia-uvm: CUDA then fails)",
    fix="gpuhost provision lxc --allow-restart",
)
def devices_configured(config: GuestConfig | None, subject: str, ctid: int, expected: list[str]) -> Finding:
    path = f"/etc/pve/lxc/{ctid}.conf"
    if config is None:
        return Finding(
            Level.FAIL, "ct.devices_configured", subject, f"{path} does not exist", fix="gpuhost provision lxc"
        )
    missing = [d for d in expected if d not in _passed_devices(config)]
    if missing:
        return Finding(
            Level.FAIL,
            "ct.devices_configured",
            subject,
            f"{path} does not pass {', '.join(missing)}",
            cause="the devN entry was removed or never written; the container loses the device at its next start",
            fix="gpuhost provision lxc --allow-restart",
        )
    return Finding(Level.PASS, "ct.devices_configured", subject, f"{path} passes {len(expected)} device nodes")


@check(
    "ct.device_nodes",
    group="container",
    title="the GPU device nodes exist inside the container",
    meaning="a device node the config passes is absent inside: the container was not restarted after the change, "
    "or the node was missing on the host when it started",
    fix="gpuhost provision lxc --allow-restart",
)
def device_nodes(present: set[str], subject: str, expected: list[str]) -> Finding:
    missing = [d for d in expected if d not in present]
    if missing:
        return Finding(
            Level.FAIL,
            "ct.device_nodes",
            subject,
            f"missing inside the container: {', '.join(missing)}",
            cause="not passed through, or the container was not restarted since",
            fix="gpuhost provision lxc --allow-restart",
        )
    return Finding(Level.PASS, "ct.device_nodes", subject, f"{len(expected)} device nodes present")


#: The APT preferences file that keeps distribution NVIDIA packages out of a GPU container.
APT_HOLD_FILE = "/etc/apt/preferences.d/gpuhost-nvidia.pref"


@check(
    "ct.driver_held",
    group="container",
    title="distribution NVIDIA packages are held back in the container",
    meaning="without the hold an 'apt upgrade' can install a distribution NVIDIA library of another version "
    "than the host's module: NVML then fails with 'Driver/library version mismatch'",
    fix="gpuhost provision lxc",
)
def driver_held(preferences: str | None, subject: str) -> Finding:
    text = preferences or ""
    pinned = re.search(r"^Package:.*\bnvidia-\*", text, re.M) and re.search(r"^Pin-Priority:\s*-1\b", text, re.M)
    if not pinned:
        return Finding(
            Level.FAIL,
            "ct.driver_held",
            subject,
            f"{APT_HOLD_FILE} {'does not hold nvidia-* back' if preferences is not None else 'is missing'}",
            cause="apt may replace the userspace gpuhost installed with a distribution version",
            fix="gpuhost provision lxc",
        )
    return Finding(Level.PASS, "ct.driver_held", subject, f"nvidia-* held back ({APT_HOLD_FILE})")
