"""Role ``proxmox_host``: IOMMU on the kernel command line, the VM or LXC GPU path, a safe reboot, proof.

Current kernels ignore ``amd_iommu=on`` (dmesg: ``AMD-Vi: Unknown option - 'on'``) and enable the AMD
IOMMU by default; ``iommu=pt`` is the token that matters. The vendor token is still added by
default because users and guides expect it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from gpuhost.checks.host import HostExpectation
from gpuhost.core.task import FLUSH_HANDLERS, Task, task
from gpuhost.errors import OperationFailed
from gpuhost.facts.gpu_holders import gpu_holders
from gpuhost.facts.host import host_facts
from gpuhost.inventory.models import VMSpec
from gpuhost.operations.apt import Apt, AptArgs
from gpuhost.operations.boot import BootRefresh, BootRefreshArgs, KernelCmdline, KernelCmdlineArgs
from gpuhost.operations.command import Command, CommandArgs
from gpuhost.operations.files import Copy, CopyArgs, Template, TemplateArgs
from gpuhost.operations.modules import ModuleList, ModuleListArgs
from gpuhost.operations.nvidia import DriverPin, NvidiaDriver, NvidiaDriverArgs
from gpuhost.operations.reboot import RebootIfNeeded, RebootIfNeededArgs
from gpuhost.operations.systemd import Systemd, SystemdArgs
from gpuhost.operations.verify import Verify, VerifyArgs
from gpuhost.roles import gpu_guard
from gpuhost.roles.base import Role, RoleVars
from gpuhost.roles.vm_gpu import resolve_gpus

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

REFRESH = "refresh boot loader"
INITRAMFS = "update initramfs"
VFIO_MODULES = ["vfio", "vfio_iommu_type1", "vfio_pci"]  # vfio_virqfd is part of vfio since 6.2
VFIO_CONF = "/etc/modprobe.d/gpuhost-vfio.conf"
PERSISTENCED = "nvidia-persistenced.service"
UNITS = ("nvidia-devnodes.service", PERSISTENCED)


class ProxmoxHostVars(RoleVars):
    gpu_path: Literal["lxc", "vm", "none"] = Field(
        "lxc",
        description="lxc: the host NVIDIA driver, shared by containers; vm: vfio-pci for passthrough; "
        "none: only the IOMMU command line",
    )
    iommu_vendor_token: bool = Field(True, description="add amd_iommu=on / intel_iommu=on by CPU vendor")
    cmdline_extra: list[str] = Field([], description="more kernel command-line tokens, e.g. [pcie_aspm=off]")
    grub_dropin: bool = Field(
        False,
        description="on GRUB hosts, write /etc/default/grub.d/90-gpuhost.cfg instead of editing /etc/default/grub",
    )
    vfio_ids: list[str] | None = Field(
        None, description="vendor:device ids for vfio-pci (VM path); default: the host's NVIDIA GPUs"
    )
    nvidia_driver: DriverPin | None = Field(
        None, description="the NVIDIA .run installer for the LXC path {version, url, sha256, kernel_open}"
    )
    vms: dict[int, VMSpec] = Field(
        {}, description="the node's GPU VMs (nodes.NAME.vms): on the VM path, their GPUs must be free before vfio"
    )
    vm_vmids: list[int] | None = Field(None, description="only these VMs of the node (--vmid)")
    uvm_disable_hmm: bool = Field(
        False, description="options nvidia_uvm uvm_disable_hmm=1 (RTX PRO 6000 NCCL lock-ups)"
    )

    @field_validator("cmdline_extra")
    @classmethod
    def _tokens(cls, v: list[str]) -> list[str]:
        for t in v:
            if not t or any(c.isspace() for c in t) or any(c in t for c in "\"'$`\\;|&<>"):
                raise ValueError(f"'{t}' is not a single kernel command-line token")
        return v

    @field_validator("vfio_ids")
    @classmethod
    def _ids(cls, v: list[str] | None) -> list[str] | None:
        for i in v or []:
            if not re.fullmatch(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}", i):
                raise ValueError(f"'{i}' is not a PCI vendor:device id such as 10de:2bb5")
        return v

    @model_validator(mode="after")
    def _driver_for_lxc(self) -> ProxmoxHostVars:
        if self.gpu_path == "lxc" and self.nvidia_driver is None:
            raise ValueError(
                "nvidia_driver: gpu_path is lxc, so the host needs an NVIDIA driver: set nvidia_driver "
                "{version, url, sha256} (or gpu_path: vm / none)"
            )
        return self


def cmdline_tokens(cpu_vendor: str, v: ProxmoxHostVars) -> list[str]:
    tokens = ["iommu=pt"]
    if v.iommu_vendor_token:
        if cpu_vendor == "amd":
            tokens.append("amd_iommu=on")
        elif cpu_vendor == "intel":
            tokens.append("intel_iommu=on")
    return tokens + list(v.cmdline_extra)


def host_expectation(cpu_vendor: str, v: ProxmoxHostVars) -> HostExpectation:
    """What ``provision host`` leaves behind for this node's GPU path: the one expectation its final
    ``verify`` task, ``gpuhost verify host`` and the acceptance suite prove."""
    lxc = v.gpu_path == "lxc"
    return HostExpectation(
        cmdline=tuple(cmdline_tokens(cpu_vendor, v)),
        nvidia_driver=v.nvidia_driver.version if lxc and v.nvidia_driver else None,
        nvidia_uvm=lxc,
        persistenced=lxc,
        vfio=v.gpu_path == "vm",
    )


def lxc_driver_tasks(pin: DriverPin, kernel: str, uvm_disable_hmm: bool) -> list[Task]:
    """The host NVIDIA driver that LXC guests share, with its device nodes guaranteed at boot."""
    driver = NvidiaDriverArgs(**pin.model_dump(), target="host")
    tasks = [
        task(
            "kernel headers and dkms before the driver",
            Apt(AptArgs(packages={"dkms": None, "proxmox-default-headers": None, f"proxmox-headers-{kernel}": None})),
            tags=("driver",),
        ),
        task(f"NVIDIA driver {pin.version} (DKMS)", NvidiaDriver(driver), tags=("driver",)),
        task(
            "/dev/nvidia-uvm now (the boot unit keeps it after reboots)",
            Command(
                CommandArgs(
                    cmd="nvidia-modprobe -c0 -u",
                    creates="/dev/nvidia-uvm",
                    unless="! test -e /proc/driver/nvidia/version",
                )
            ),
            tags=("driver",),
        ),
        task(
            "nvidia and nvidia_uvm load at boot",
            ModuleList(ModuleListArgs(path="/etc/modules-load.d/nvidia.conf", modules=["nvidia", "nvidia_uvm"])),
            tags=("driver",),
        ),
    ]
    if uvm_disable_hmm:
        tasks.append(
            task(
                "nvidia_uvm without HMM",
                Copy(
                    CopyArgs(
                        dest="/etc/modprobe.d/nvidia-uvm.conf",
                        content="options nvidia_uvm uvm_disable_hmm=1\n",
                        mode="0644",
                    )
                ),
                tags=("driver",),
            )
        )
    for unit in UNITS:
        tasks += [
            task(
                f"{unit} unit",
                Template(TemplateArgs(src=f"{unit}.j2", dest=f"/etc/systemd/system/{unit}", mode="0644")),
                tags=("driver",),
            ),
            task(f"{unit} enabled", Systemd(SystemdArgs(unit=unit, enabled=True)), tags=("driver",)),
        ]
    return tasks


class ProxmoxHost(Role[ProxmoxHostVars]):
    """A Proxmox VE node ready for GPUs: IOMMU tokens in the file its boot loader really reads, then the VM
    path (vfio-pci) or the LXC path (host NVIDIA driver, ``nvidia-uvm``, persistenced), a reboot when
    allowed, and proof from ``/proc/cmdline`` and dmesg."""

    name = "proxmox_host"
    Vars = ProxmoxHostVars
    templates = (*(f"{u}.j2" for u in UNITS), "vfio.conf.j2")
    template_vars = frozenset({"vfio_ids"})

    def tasks(self, host: HostContext, v: ProxmoxHostVars) -> list[Task]:
        facts = host.fact(host_facts)
        expect = host_expectation(facts.cpu_vendor, v)
        tokens = list(expect.cmdline)
        tasks = [
            task(
                "IOMMU on the kernel command line",
                KernelCmdline(KernelCmdlineArgs(present=tokens, grub_dropin=v.grub_dropin)),
                tags=("cmdline",),
            ),
            # a task, not a handler: it decides from what the boot loader boots, so it also repairs a run
            # killed before the refresh and a file edited by hand
            task(REFRESH, BootRefresh(BootRefreshArgs()), tags=("cmdline",)),
        ]
        if v.gpu_path == "vm":
            ids = v.vfio_ids or sorted({f"{g.vendor}:{g.device}" for g in facts.gpus})
            if not ids:
                raise OperationFailed(
                    "gpu_path is vm but no NVIDIA GPU was found (lspci -nn -d 10de:) and vfio_ids is not set"
                )
            holders = host.fact(gpu_holders)
            gpu_guard.vfio_over_containers(facts.gpus, holders, ids)
            host_gpus = [g.bdf for g in facts.gpus]
            for vmid, spec in v.vms.items():
                if v.vm_vmids and vmid not in v.vm_vmids:
                    continue
                wanted = [g.pci for g in resolve_gpus(spec, host_gpus, {}) if g.pci]
                gpu_guard.vm_gpus_free(vmid, wanted, holders)
            tasks += [
                task(
                    "vfio modules at boot",
                    ModuleList(ModuleListArgs(modules=VFIO_MODULES)),
                    notify=(INITRAMFS,),
                    tags=("vfio",),
                ),
                task(
                    "vfio-pci claims the GPUs, nouveau stays away",
                    Template(TemplateArgs(src="vfio.conf.j2", dest=VFIO_CONF, mode="0644", vars={"vfio_ids": ids})),
                    notify=(INITRAMFS,),
                    tags=("vfio",),
                ),
            ]
        if v.gpu_path == "lxc":
            assert v.nvidia_driver is not None  # the Vars model requires it
            # decided from the host facts; the guests holding GPUs are read only to word a refusal (a converged LXC
            # node costs no extra round trip)
            gpu_guard.containers_can_use(facts.gpus, facts.vfio_ids, VFIO_CONF, lambda: host.fact(gpu_holders))
            tasks += lxc_driver_tasks(v.nvidia_driver, facts.kernel, v.uvm_disable_hmm)
        tasks += [
            FLUSH_HANDLERS,
            task(
                "reboot if the running kernel lags its configuration",
                RebootIfNeeded(RebootIfNeededArgs(cmdline=tokens, nvidia_driver=expect.nvidia_driver)),
                tags=("reboot",),
            ),
        ]
        if v.gpu_path == "lxc":
            # enabled is not running: a re-run repairs a persistenced stopped by hand or by a failed start
            # (after the reboot, so the module it needs is the pinned one); as vm_gpu does it, so it also runs
            # where /run/systemd/system is absent (the systemd operation refuses a state change there)
            tasks.append(
                task(
                    f"{PERSISTENCED} running",
                    Command(
                        CommandArgs(
                            cmd=f"systemctl start {PERSISTENCED}", unless=f"systemctl is-active --quiet {PERSISTENCED}"
                        )
                    ),
                    tags=("driver",),
                )
            )
        tasks += [
            task(
                "verify the booted host",
                Verify(VerifyArgs(host=expect)),
                tags=("verify",),
            ),
        ]
        return tasks

    def handlers(self, v: ProxmoxHostVars) -> list[Task]:
        return [
            task(INITRAMFS, Command(CommandArgs(cmd="update-initramfs -u -k all"))),
        ]
