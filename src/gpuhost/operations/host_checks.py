"""Reboot when the running kernel lags its configuration, then prove the host booted right."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuhost.errors import OperationFailed
from gpuhost.facts.boot import GRUB_DEFAULT, KERNEL_CMDLINE
from gpuhost.facts.cmdline import missing_tokens
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.operations.actions import Reboot
from gpuhost.operations.base import Args, Operation, Plan, SkipTask, nothing
from gpuhost.operations.registry import register

if TYPE_CHECKING:
    from gpuhost.runner.context import HostContext


def diagnose_cmdline(facts: HostFacts, missing: list[str]) -> str:
    """Why the booted command line lacks ``missing``, in words a user can act on."""
    words = " ".join(missing)
    grub = facts.grub_effective_tokens or ()
    kcmd = facts.kernel_cmdline_tokens or ()
    boot = facts.boot
    if boot.loader == "systemd-boot" and not missing_tokens(grub, missing) and missing_tokens(kcmd, missing):
        return (f"{words} is in {GRUB_DEFAULT}, but this host boots with systemd-boot, which reads "
                f"{KERNEL_CMDLINE}: put the tokens there and run proxmox-boot-tool refresh")
    if boot.loader != "systemd-boot" and not missing_tokens(kcmd, missing) and missing_tokens(grub, missing):
        return (f"{words} is in {KERNEL_CMDLINE}, but this host boots with {boot.describe()}, which reads "
                f"{GRUB_DEFAULT}: put the tokens there and run {boot.refresh_command}")
    configured = facts.configured_tokens or ()
    if not missing_tokens(configured, missing):
        return (f"{boot.cmdline_file} has {words}, but the host booted without it: the boot loader was not "
                f"refreshed ({boot.refresh_command}) or the host was not rebooted since")
    return f"{boot.cmdline_file} lacks {words} ({boot.describe()})"


class RebootArgs(Args):
    cmdline: list[str] = []
    nvidia_driver: str | None = None


@register
class RebootIfNeeded(Operation):
    """Reboot when the booted command line or the loaded NVIDIA module lags what is installed."""

    kind = "reboot_if_needed"
    Args = RebootArgs
    args: RebootArgs

    def plan(self, host: HostContext) -> Plan:
        facts = host.fact(host_facts)
        reasons = []
        missing = missing_tokens(facts.booted_tokens, self.args.cmdline)
        if missing:
            if not host.check and missing_tokens(facts.configured_tokens or (), missing):
                raise OperationFailed("a reboot would not help: " + diagnose_cmdline(facts, missing))
            reasons.append(f"booted without {' '.join(missing)}")
        want = self.args.nvidia_driver
        if want and facts.nvidia is not None and facts.nvidia.version != want and facts.nvidia_installed == want:
            reasons.append(f"NVIDIA module {facts.nvidia.version} loaded, {want} installed")
        if not reasons:
            return nothing("the running kernel matches its configuration")
        return Plan(reason="; ".join(reasons), actions=[Reboot("; ".join(reasons))])


class VerifyArgs(Args):
    cmdline: list[str] = []
    iommu_passthrough: bool = True
    nvidia_driver: str | None = None
    nvidia_uvm: bool = False
    vfio: bool = False


@register
class VerifyHost(Operation):
    """Read-only proof that the host booted as configured; fails with a diagnosis otherwise."""

    kind = "verify_host"
    Args = VerifyArgs
    args: VerifyArgs

    def plan(self, host: HostContext) -> Plan:
        if host.reboot_required:
            raise SkipTask("not verified: the host must reboot first (--allow-reboot)")
        facts = host.fact(host_facts)
        a = self.args
        problems: list[str] = []
        proven: list[str] = []
        missing = missing_tokens(facts.booted_tokens, a.cmdline)
        if missing:
            problems.append(f"/proc/cmdline lacks {' '.join(missing)}: " + diagnose_cmdline(facts, missing))
        elif a.cmdline:
            proven.append(f"booted with {' '.join(a.cmdline)}")
        if a.iommu_passthrough and "iommu=pt" in a.cmdline and not missing:
            domain = facts.iommu.default_domain
            if domain is not None and domain != "Passthrough":
                problems.append(f"dmesg: IOMMU default domain is {domain}, not Passthrough")
            elif domain == "Passthrough":
                proven.append("IOMMU default domain Passthrough")
        if facts.gpus and not facts.iommu_groups:
            problems.append("no IOMMU groups under /sys/kernel/iommu_groups: the IOMMU is off")
        elif facts.gpus:
            grouped = [g for g in facts.gpus if g.bdf in facts.iommu_groups]
            proven.append(f"{len(grouped)}/{len(facts.gpus)} GPUs in IOMMU groups")
        if a.nvidia_driver:
            loaded = facts.nvidia.version if facts.nvidia else None
            if loaded != a.nvidia_driver:
                problems.append(f"NVIDIA kernel module {loaded or 'not loaded'}, wanted {a.nvidia_driver}")
            else:
                proven.append(f"NVIDIA {loaded} loaded")
        if a.nvidia_uvm:
            if "/dev/nvidia-uvm" not in facts.nvidia_devices:
                problems.append("/dev/nvidia-uvm is missing: containers with GPU devices will not start "
                                "(nvidia_uvm not loaded, or nothing created the node at boot)")
            else:
                proven.append("/dev/nvidia-uvm present")
        if a.vfio and facts.gpus:
            unbound = [g.bdf for g in facts.gpus if g.driver != "vfio-pci"]
            if unbound:
                problems.append(f"{len(unbound)} GPUs not bound to vfio-pci ({', '.join(unbound[:3])}…): check "
                                "options vfio-pci ids= and that initramfs was updated before the reboot")
            else:
                proven.append(f"{len(facts.gpus)} GPUs bound to vfio-pci")
        if problems:
            if host.check:
                raise SkipTask("check mode: would verify after the changes; now: " + "; ".join(problems))
            raise OperationFailed("; ".join(problems))
        return nothing("; ".join(proven) or "nothing to verify")
