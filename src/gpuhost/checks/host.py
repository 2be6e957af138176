"""Host proofs: pure functions from :class:`~gpuhost.facts.host.HostFacts` and a :class:`HostExpectation`
to findings.

Each check has the signature ``(facts, subject, expect) -> Finding | None`` (``None``: it does not apply to
this host, e.g. no GPU). Which checks run for an expectation, and in which order, is decided once, by the
registry :data:`gpuhost.checks.table.HOST_CHECKS`: the provision roles' final ``verify`` task, ``gpuhost verify
host`` and the acceptance suite all go through it.
"""

from __future__ import annotations

from pydantic import Field

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.core.operation import Args
from gpuhost.facts.boot import GRUB_DEFAULT, KERNEL_CMDLINE
from gpuhost.facts.cmdline import missing_tokens
from gpuhost.facts.driver_failure import (
    ApiMismatch,
    InitFailure,
    explain_driver_failure,
    parse_nvrm_api_mismatch,
    parse_rm_init_failures,
)
from gpuhost.facts.hardware import IommuState, parse_dmesg_iommu
from gpuhost.facts.host import HostFacts


class HostExpectation(Args):
    """What a provisioned host must show once booted (the ``verify`` task's ``host`` argument)."""

    cmdline: tuple[str, ...] = Field(default=(), description="tokens /proc/cmdline must show")
    iommu_passthrough: bool = Field(default=True, description="the IOMMU default domain must be Passthrough")
    nvidia_driver: str | None = Field(default=None, description="the NVIDIA kernel module must be this version")
    nvidia_uvm: bool = Field(default=False, description="/dev/nvidia-uvm must exist")
    persistenced: bool = Field(default=False, description="nvidia-persistenced must be running")
    vfio: bool = Field(default=False, description="the GPUs must be bound to vfio-pci (VM path)")


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
def cmdline_booted(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding:
    tokens = expect.cmdline
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
def cmdline_configured(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding:
    tokens = expect.cmdline
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
def iommu_passthrough(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding | None:
    domain = facts.iommu.default_domain
    if domain is None or "iommu=pt" not in facts.booted_tokens:
        return None  # no domain logged, or not booted with iommu=pt (host.cmdline_booted says so)
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
def iommu_groups(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding | None:
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
def nvidia_module(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding | None:
    want = expect.nvidia_driver
    if want is None:
        return None
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
def nvidia_uvm(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding:
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
def persistenced(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding:
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
def vfio_bound(facts: HostFacts, subject: str, expect: HostExpectation) -> Finding | None:
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


@check(
    "host.iommu_faults",
    group="host",
    title="the IOMMU blocked no GPU DMA (dmesg)",
    meaning="AMD-Vi IO_PAGE_FAULT or Intel DMAR fault lines name a device: the IOMMU is translating and refused "
    "DMA it has no mapping for; for a GPU that is what breaks peer-to-peer copies and GPUDirect",
    fix="boot the host with iommu=pt (gpuhost provision host --allow-reboot), or keep P2P off (NCCL_P2P_DISABLE=1)",
)
def iommu_faults(facts: HostFacts, subject: str, expect: HostExpectation | None = None) -> Finding | None:
    """The DMA faults in the kernel log, per device; a GPU's faults fail, another device's warn."""
    return iommu_fault_finding(facts.iommu, {g.bdf for g in facts.gpus}, subject)


def iommu_fault_finding(iommu: IommuState, gpu_bdfs: set[str], subject: str) -> Finding | None:
    """:func:`iommu_faults` on a parsed kernel log; a device the kernel names by the nvidia driver is a GPU."""
    by_device = iommu.faulting_devices()
    if not by_device:
        return None
    gpus = gpu_bdfs | {f.device for f in iommu.faults if f.driver == "nvidia"}
    hit = sorted(d for d in by_device if d in gpus)
    shown = hit or sorted(by_device)
    kinds = sorted({f.kind for f in iommu.faults if f.device in shown})
    what = ", ".join(f"{d} ({by_device[d]}×)" for d in shown[:4]) + ("…" if len(shown) > 4 else "")
    return Finding(
        Level.FAIL if hit else Level.WARN,
        "host.iommu_faults",
        subject,
        f"IOMMU {iommu.summary}: {'/'.join(kinds)} for {'GPU ' if hit else ''}{what}",
        cause="the IOMMU translates DMA and refused addresses the device has no mapping for"
        + (": GPU peer-to-peer (a write into another GPU's BAR) faults this way" if hit else ""),
        fix="boot the host with iommu=pt (gpuhost provision host --allow-reboot); until then NCCL_P2P_DISABLE=1"
        if hit
        else "a device other than a GPU: check its driver; iommu=pt also silences it",
    )


@check(
    "host.nvidia_api_mismatch",
    group="host",
    title="NVIDIA userspace and kernel module are one version (dmesg)",
    meaning="the kernel refused a client: 'NVRM: API mismatch: the client has the version A, but this kernel "
    "module has the version B'",
    fix="reboot so the installed module loads (a driver upgraded without a reboot does this), or reinstall one "
    "driver version",
)
def nvidia_api_mismatch(facts: HostFacts, subject: str, expect: HostExpectation | None = None) -> Finding | None:
    """The kernel's own mismatch words, in host wording; stale when the module has been reloaded since."""
    return api_mismatch_finding(facts.nvrm_api_mismatch, facts.nvidia.version if facts.nvidia else None, subject)


def api_mismatch_finding(api: ApiMismatch | None, loaded: str | None, subject: str) -> Finding | None:
    """:func:`nvidia_api_mismatch` on a parsed kernel log; ``loaded``: the module loaded now, if known."""
    if api is None:
        return None
    if loaded is not None and loaded != api.module_version:
        return Finding(
            Level.INFO,
            "host.nvidia_api_mismatch",
            subject,
            f"dmesg has an old NVRM API mismatch (module {api.module_version}); {loaded} is loaded now",
        )
    explained = explain_driver_failure(
        f"NVRM: API mismatch: the client has the version {api.client_version}, but this kernel module has the "
        f"version {api.module_version}.",
        where="host",
    )
    client = f" ({api.client})" if api.client else ""
    return Finding(
        Level.FAIL,
        "host.nvidia_api_mismatch",
        subject,
        f"NVRM: API mismatch: userspace {api.client_version}{client}, kernel module {api.module_version}",
        cause=explained.message,
        fix=explained.fix,
    )


@check(
    "host.gpu_init",
    group="host",
    title="the NVIDIA driver initialised every GPU (dmesg)",
    meaning="'NVRM: GPU <bdf>: RmInitAdapter failed!': the driver could not bring the GPU up; nvidia-smi shows it "
    "missing or 'No devices were found'",
    fix="the cause named next to it: D3cold (power management), missing GSP firmware, a GPU in a bad state",
)
def gpu_init(facts: HostFacts, subject: str, expect: HostExpectation | None = None) -> list[Finding]:
    return init_failure_findings(facts.rm_init_failures, subject)


def init_failure_findings(failures: tuple[InitFailure, ...] | list[InitFailure], subject: str) -> list[Finding]:
    return [
        Finding(
            Level.FAIL,
            "host.gpu_init",
            f"{subject} {f.device}",
            f"NVRM: RmInitAdapter failed ({f.code}) for GPU {f.device}, {f.count}×",
            cause=f.cause,
            fix=f.fix,
        )
        for f in failures
    ]


def kernel_log_findings(text: str, subject: str) -> tuple[IommuState, list[Finding]]:
    """What a kernel log (dmesg, journal, syslog) proves, for ``gpuhost doctor dmesg``: the IOMMU state and the
    findings of the dmesg-based host checks (the module loaded now is not known, so a mismatch is not stale)."""
    iommu = parse_dmesg_iommu(text)
    found = [
        iommu_fault_finding(iommu, set(), subject),
        api_mismatch_finding(parse_nvrm_api_mismatch(text), None, subject),
        *init_failure_findings(parse_rm_init_failures(text), subject),
    ]
    return iommu, [f for f in found if f is not None]
