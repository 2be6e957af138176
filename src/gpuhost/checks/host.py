"""Host proofs: pure functions from :class:`~gpuhost.facts.host.HostFacts` to findings.

The provision roles' final ``verify`` task, ``gpuhost verify host`` and the acceptance suite
all call :func:`host_findings`; each named check is also callable alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.facts.boot import GRUB_DEFAULT, KERNEL_CMDLINE
from gpuhost.facts.cmdline import missing_tokens
from gpuhost.facts.host import HostFacts


@dataclass(frozen=True)
class HostExpectation:
    """What a provisioned host must show once booted."""

    cmdline: tuple[str, ...] = ()
    iommu_passthrough: bool = True
    nvidia_driver: str | None = None
    nvidia_uvm: bool = False
    persistenced: bool = False
    vfio: bool = False


def diagnose_cmdline(facts: HostFacts, missing: list[str]) -> str:
    """Why the booted command line lacks ``missing``, in words a user can act on."""
    words = " ".join(missing)
    grub = facts.grub_effective_tokens or ()
    kcmd = facts.kernel_cmdline_tokens or ()
    boot = facts.boot
    if boot.loader == "systemd-boot" and not missing_tokens(grub, missing) and missing_tokens(kcmd, missing):
        return (
            f"{words} is in {GRUB_DEFAULT}, but this host boots with systemd-boot, which reads "
            f"{KERNEL_CMDLINE}: put the tokens there and run proxmox-boot-tool refresh"
        )
    if boot.loader != "systemd-boot" and not missing_tokens(kcmd, missing) and missing_tokens(grub, missing):
        return (
            f"{words} is in {KERNEL_CMDLINE}, but this host boots with {boot.describe()}, which reads "
            f"{GRUB_DEFAULT}: put the tokens there and run {boot.refresh_command}"
        )
    configured = facts.configured_tokens or ()
    if not missing_tokens(configured, missing):
        return (
            f"{boot.cmdline_file} has {words}, but the host booted without it: the boot loader was not "
            f"refreshed ({boot.refresh_command}) or the host was not rebooted since"
        )
    return f"{boot.cmdline_file} lacks {words} ({boot.describe()})"


def _ok(name: str, subject: str, message: str) -> Finding:
    return Finding(Level.PASS, name, subject, message)


@check(
    "host.cmdline_booted",
    group="host",
    title="IOMMU tokens on the booted command line",
    meaning="/proc/cmdline lacks a token gpuhost put in the boot configuration: the boot loader reads another "
    "file, was not refreshed, or the host was not rebooted since",
    fix="gpuhost provision host --allow-reboot (it edits the file the boot loader really reads and refreshes it)",
)
def cmdline_booted(facts: HostFacts, subject: str, tokens: tuple[str, ...]) -> Finding:
    missing = missing_tokens(facts.booted_tokens, tokens)
    if missing:
        return Finding(
            Level.FAIL,
            "host.cmdline_booted",
            subject,
            f"/proc/cmdline lacks {' '.join(missing)}",
            cause=diagnose_cmdline(facts, missing),
            fix="gpuhost provision host --allow-reboot",
        )
    return _ok("host.cmdline_booted", subject, f"booted with {' '.join(tokens)}")


@check(
    "host.cmdline_configured",
    group="host",
    title="the boot entry carries the IOMMU tokens",
    meaning="the file the boot loader reads at the next boot lacks a token gpuhost put there: the host runs "
    "correctly now but will come up without it after the next reboot",
    fix="gpuhost provision host (it puts the tokens back into the file the boot loader really reads)",
)
def cmdline_configured(facts: HostFacts, subject: str, tokens: tuple[str, ...]) -> Finding:
    configured = facts.configured_tokens
    where = facts.boot.cmdline_file
    if configured is None:
        return Finding(
            Level.FAIL,
            "host.cmdline_configured",
            subject,
            f"{where} cannot be read ({facts.boot.describe()})",
            fix="gpuhost provision host",
        )
    missing = missing_tokens(configured, tokens)
    if missing:
        return Finding(
            Level.FAIL,
            "host.cmdline_configured",
            subject,
            f"{where} lacks {' '.join(missing)}",
            cause=f"the next boot comes up without {' '.join(missing)} ({facts.boot.describe()})",
            fix="gpuhost provision host",
        )
    return _ok("host.cmdline_configured", subject, f"{where} has {' '.join(tokens)}")


@check(
    "host.iommu_passthrough",
    group="host",
    title="IOMMU default domain is Passthrough",
    meaning="iommu=pt is on the command line but the kernel reports another default domain (DMA-translated "
    "devices pay for every mapping; P2P through the IOMMU may be blocked)",
    fix="check dmesg for 'iommu: Default domain type'; a kernel option such as iommu.passthrough=0 overrides it",
)
def iommu_passthrough(facts: HostFacts, subject: str) -> Finding | None:
    domain = facts.iommu.default_domain
    if domain is None:
        return None
    if domain != "Passthrough":
        return Finding(
            Level.FAIL,
            "host.iommu_passthrough",
            subject,
            f"dmesg: IOMMU default domain is {domain}, not Passthrough",
            fix="remove conflicting iommu.* options from the command line and reboot",
        )
    return _ok("host.iommu_passthrough", subject, "IOMMU default domain Passthrough")


@check(
    "host.iommu_groups",
    group="host",
    title="GPUs sit in IOMMU groups",
    meaning="no IOMMU groups exist: the IOMMU is off (firmware setting, or the kernel booted without it)",
    fix="enable VT-d / AMD-Vi (IOMMU) in the firmware and boot with the IOMMU tokens",
)
def iommu_groups(facts: HostFacts, subject: str) -> Finding | None:
    if not facts.gpus:
        return None
    if not facts.iommu_groups:
        return Finding(
            Level.FAIL,
            "host.iommu_groups",
            subject,
            "no IOMMU groups under /sys/kernel/iommu_groups: the IOMMU is off",
            fix="enable VT-d / AMD-Vi in the firmware, then gpuhost provision host --allow-reboot",
        )
    grouped = [g for g in facts.gpus if g.bdf in facts.iommu_groups]
    level = Level.PASS if len(grouped) == len(facts.gpus) else Level.FAIL
    return Finding(level, "host.iommu_groups", subject, f"{len(grouped)}/{len(facts.gpus)} GPUs in IOMMU groups")


@check(
    "host.nvidia_module",
    group="host",
    title="the loaded NVIDIA kernel module is the pinned version",
    meaning="the running kernel module differs from the pin: containers with the pinned userspace would fail "
    "with 'Driver/library version mismatch'",
    fix="reboot the host so the installed module loads (gpuhost provision host --allow-reboot)",
)
def nvidia_module(facts: HostFacts, subject: str, want: str) -> Finding:
    loaded = facts.nvidia.version if facts.nvidia else None
    if loaded != want:
        cause = None
        if loaded and facts.nvidia_installed == want:
            cause = f"{want} is installed but {loaded} is still loaded: the host has not rebooted since"
        return Finding(
            Level.FAIL,
            "host.nvidia_module",
            subject,
            f"NVIDIA kernel module {loaded or 'not loaded'}, wanted {want}",
            cause=cause,
            fix="gpuhost provision host --allow-reboot",
        )
    return _ok("host.nvidia_module", subject, f"NVIDIA {loaded} loaded")


@check(
    "host.nvidia_uvm",
    group="host",
    title="/dev/nvidia-uvm exists on the host",
    meaning="containers with GPU devices refuse to start ('Device /dev/nvidia-uvm does not exist'), or CUDA "
    "fails with 'initialization error' while nvidia-smi works",
    fix="load nvidia_uvm at boot and create the nodes before guests start (nvidia-devnodes.service)",
)
def nvidia_uvm(facts: HostFacts, subject: str) -> Finding:
    if "/dev/nvidia-uvm" not in facts.nvidia_devices:
        return Finding(
            Level.FAIL,
            "host.nvidia_uvm",
            subject,
            "/dev/nvidia-uvm is missing",
            cause="nvidia_uvm is not loaded, or nothing created the device node at boot",
            fix="gpuhost provision host (installs nvidia-devnodes.service), or now: nvidia-modprobe -c0 -u",
        )
    return _ok("host.nvidia_uvm", subject, "/dev/nvidia-uvm present")


@check(
    "host.persistenced",
    group="host",
    title="nvidia-persistenced is running",
    meaning="without persistence the driver tears GPU state down when the last client exits: every start pays "
    "seconds of initialisation, and containers cannot enable persistence themselves",
    fix="systemctl enable --now nvidia-persistenced",
)
def persistenced(facts: HostFacts, subject: str) -> Finding:
    if facts.persistenced != "active":
        return Finding(
            Level.FAIL,
            "host.persistenced",
            subject,
            f"nvidia-persistenced is {facts.persistenced or 'not running'}",
            fix="systemctl enable --now nvidia-persistenced",
        )
    return _ok("host.persistenced", subject, "nvidia-persistenced active")


@check(
    "host.vfio_bound",
    group="host",
    title="GPUs are bound to vfio-pci (VM path)",
    meaning="a GPU meant for a VM is held by another driver: the VM cannot start with it passed through",
    fix="options vfio-pci ids=… in /etc/modprobe.d, update-initramfs -u -k all, reboot",
)
def vfio_bound(facts: HostFacts, subject: str) -> Finding | None:
    if not facts.gpus:
        return None
    unbound = [g.bdf for g in facts.gpus if g.driver != "vfio-pci"]
    if unbound:
        return Finding(
            Level.FAIL,
            "host.vfio_bound",
            subject,
            f"{len(unbound)} GPUs not bound to vfio-pci ({', '.join(unbound[:3])}{'…' if len(unbound) > 3 else ''})",
            cause="options vfio-pci ids= missing, or initramfs not updated before the reboot",
            fix="gpuhost provision host -e gpu_path=vm --allow-reboot",
        )
    return _ok("host.vfio_bound", subject, f"{len(facts.gpus)} GPUs bound to vfio-pci")


def host_findings(facts: HostFacts, subject: str, expect: HostExpectation) -> list[Finding]:
    """Every host proof that ``expect`` asks for."""
    out: list[Finding | None] = []
    if expect.cmdline:
        booted = cmdline_booted(facts, subject, expect.cmdline)
        out.append(booted)
        out.append(cmdline_configured(facts, subject, expect.cmdline))
        if expect.iommu_passthrough and "iommu=pt" in expect.cmdline and not booted.failed:
            out.append(iommu_passthrough(facts, subject))
    out.append(iommu_groups(facts, subject))
    if expect.nvidia_driver:
        out.append(nvidia_module(facts, subject, expect.nvidia_driver))
    if expect.nvidia_uvm:
        out.append(nvidia_uvm(facts, subject))
    if expect.persistenced:
        out.append(persistenced(facts, subject))
    if expect.vfio:
        out.append(vfio_bound(facts, subject))
    return [f for f in out if f is not None]
