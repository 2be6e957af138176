"""Role ``vm_gpu``: KVM guests that get whole GPUs by passthrough, with GPUDirect P2P between them.

Per VM of the inventory (``nodes.NAME.vms``): q35, ``cpu: host``, ``hostpciN: <bus>:<dev>.0,pcie=1``
per GPU and a GPUDirect clique per NUMA node (``args: -set device.hostpciN.x-nv-gpudirect-clique=K``),
written through PVE's API with the config digest; a running VM restarts only with ``--allow-restart``;
``qm showcmd`` proves what QEMU runs. Inside the guest (SSH at the VM's ``address``): the full NVIDIA
driver (kernel modules by DKMS), persistenced, and the guest driver's P2P status judged.
Run after ``proxmox_host`` with ``gpu_path: vm`` (``playbooks/provision-vm.yml`` does both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from gpuhost.core.operation import Operation
from gpuhost.core.task import Task, task
from gpuhost.errors import OperationFailed
from gpuhost.facts.gpu_holders import gpu_holders
from gpuhost.facts.hardware import full_bdf
from gpuhost.facts.host import host_facts
from gpuhost.facts.vm import pci_numa_nodes
from gpuhost.inventory.models import VMSpec
from gpuhost.operations.command import Command, CommandArgs
from gpuhost.operations.files import Template, TemplateArgs
from gpuhost.operations.modules import ModuleList, ModuleListArgs
from gpuhost.operations.nvidia import DriverPin, NvidiaDriver, NvidiaDriverArgs, NvidiaInstaller
from gpuhost.operations.systemd import Systemd, SystemdArgs
from gpuhost.operations.vm import (
    InVm,
    InVmArgs,
    VmArgs,
    VmCommandLineProof,
    VmConfig,
    VmConfigArgs,
    VmGpu,
    VmPendingApplied,
    VmProofArgs,
    VmRunning,
)
from gpuhost.operations.vm_p2p import VmP2P, VmP2PArgs
from gpuhost.roles import gpu_guard
from gpuhost.roles.base import Role, RoleVars

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext

PERSISTENCED = "nvidia-persistenced.service"
HEADERS = "dkms linux-headers-$(uname -r)"


class VmGpuVars(RoleVars):
    vms: dict[int, VMSpec] = Field({}, description="the node's GPU VMs (the inventory's nodes.NAME.vms)")
    vm_vmids: list[int] | None = Field(None, description="only these VMs of the node (--vmid)")
    nvidia_driver: DriverPin | None = Field(
        None, description="the NVIDIA .run installer for the guests {version, url, sha256, kernel_open}"
    )

    @model_validator(mode="after")
    def _consistent(self) -> VmGpuVars:
        unknown = sorted(set(self.vm_vmids or ()) - set(self.vms))
        if unknown:
            raise ValueError(
                f"vm_vmids: VM {unknown[0]} is not among the node's vms ({', '.join(map(str, self.vms)) or 'none'})"
            )
        if any(v.address for v in self.selected().values()) and self.nvidia_driver is None:
            raise ValueError(
                "nvidia_driver: a VM has a guest address, so gpuhost installs the driver inside it: set "
                "nvidia_driver {version, url, sha256}"
            )
        return self

    def selected(self) -> dict[int, VMSpec]:
        if not self.vm_vmids:
            return dict(self.vms)
        return {k: v for k, v in self.vms.items() if k in self.vm_vmids}


def _slot(bdf: str) -> str:
    return full_bdf(bdf.lower()).rsplit(".", 1)[0]


def resolve_gpus(spec: VMSpec, host_gpus: list[str], numa: dict[str, int]) -> list[VmGpu]:
    """The VM's GPUs with their cliques (numa: one clique per NUMA node, in node order)."""
    by_slot = {_slot(b): b for b in host_gpus}
    if spec.gpus == "all":
        chosen: list[str] = list(host_gpus)
        if not chosen:
            raise OperationFailed("gpus: all, but the node has no NVIDIA GPU (lspci -nn -d 10de:)")
    else:
        chosen = []
        for item in spec.gpus:
            if item.startswith("mapping="):
                chosen.append(item)
                continue
            if _slot(item) not in by_slot:
                raise OperationFailed(
                    f"GPU {item} is not an NVIDIA GPU of this node (it has {', '.join(host_gpus) or 'none'})"
                )
            chosen.append(by_slot[_slot(item)])
    nodes = sorted({max(numa.get(b, 0), 0) for b in chosen if not b.startswith("mapping=")})
    out = []
    for item in chosen:
        if spec.clique == "none":
            clique = None
        elif spec.clique == "single" or item.startswith("mapping="):
            clique = 0
        else:
            clique = nodes.index(max(numa.get(item, 0), 0))
        if item.startswith("mapping="):
            out.append(VmGpu(mapping=item.removeprefix("mapping="), clique=clique))
        else:
            out.append(VmGpu(pci=item, clique=clique))
    return out


def vm_tasks(vmid: int, spec: VMSpec, gpus: list[VmGpu], pin: DriverPin | None) -> list[Task]:
    vm = f"VM {vmid}"
    cliques = sorted({g.clique for g in gpus if g.clique is not None})
    options: dict[str, str] = {}
    if spec.memory is not None:
        options["memory"] = str(spec.memory)
    if spec.cores is not None:
        options["cores"] = str(spec.cores)
    if spec.numa is not None:
        options["numa"] = "1" if spec.numa else "0"
    efidisk = f"{spec.efidisk_storage}:1,efitype=4m,pre-enrolled-keys=0" if spec.efidisk_storage else None
    config = VmConfigArgs(vmid=vmid, gpus=gpus, bios=spec.bios, efidisk=efidisk, options=options)
    clique_text = f"cliques {','.join(map(str, cliques))}" if cliques else "no clique"
    tasks = [
        task(f"{vm}: q35, {len(gpus)} GPUs with pcie=1, {clique_text}", VmConfig(config), tags=("vm",)),
        task(f"{vm}: pending changes applied (restart)", VmPendingApplied(VmArgs(vmid=vmid)), tags=("vm",)),
        task(f"{vm} running", VmRunning(VmArgs(vmid=vmid)), tags=("vm",)),
        task(
            f"{vm}: qm showcmd proves vfio-pci on PCIe ports, the clique -set lines, no kvm=off",
            VmCommandLineProof(VmProofArgs(vmid=vmid, gpus=gpus)),
            tags=("vm", "verify"),
        ),
    ]
    if spec.address is None or pin is None:
        return tasks

    def inside(op: Operation[Any]) -> InVm:
        return InVm(InVmArgs(vmid=vmid, operation=op))

    driver = NvidiaDriver(NvidiaDriverArgs(**pin.model_dump(), target="host"))
    tasks += [
        task(
            f"{vm}: kernel headers and dkms before the driver",
            inside(
                Command(
                    CommandArgs(
                        cmd=f"DEBIAN_FRONTEND=noninteractive apt-get install -y {HEADERS}",
                        unless=f"dpkg-query -W {HEADERS} >/dev/null 2>&1",
                        timeout=1800,
                    )
                )
            ),
            tags=("driver",),
        ),
        task(
            f"{vm}: NVIDIA {pin.version} installer cached",
            inside(NvidiaInstaller(pin)),
            tags=("driver",),
        ),
        task(f"{vm}: NVIDIA driver {pin.version} with kernel modules (DKMS)", inside(driver), tags=("driver",)),
        task(
            f"{vm}: nvidia and nvidia_uvm load at boot",
            inside(
                ModuleList(ModuleListArgs(path="/etc/modules-load.d/nvidia.conf", modules=["nvidia", "nvidia_uvm"]))
            ),
            tags=("driver",),
        ),
        task(
            f"{vm}: {PERSISTENCED} unit",
            inside(Template(TemplateArgs(src=f"{PERSISTENCED}.j2", dest=f"/etc/systemd/system/{PERSISTENCED}"))),
            tags=("driver",),
        ),
        task(
            f"{vm}: {PERSISTENCED} enabled",
            inside(Systemd(SystemdArgs(unit=PERSISTENCED, enabled=True))),
            tags=("driver",),
        ),
        task(
            f"{vm}: {PERSISTENCED} running",
            inside(
                Command(
                    CommandArgs(
                        cmd=f"systemctl start {PERSISTENCED}", unless=f"systemctl is-active --quiet {PERSISTENCED}"
                    )
                )
            ),
            tags=("driver",),
        ),
        task(
            f"{vm}: P2P between its {len(gpus)} GPUs (guest driver status)",
            VmP2P(VmP2PArgs(vmid=vmid, gpus=gpus)),
            tags=("verify", "p2p"),
        ),
    ]
    return tasks


class VmGpuRole(Role[VmGpuVars]):
    """KVM guests with GPUs: q35, pcie=1 passthrough and GPUDirect cliques in the VM config (applied with the
    config digest, pending until an allowed restart, proven by qm showcmd), then the full driver inside."""

    name = "vm_gpu"
    Vars = VmGpuVars
    templates = (f"{PERSISTENCED}.j2",)

    def tasks(self, host: HostContext, v: VmGpuVars) -> list[Task]:
        vms = v.selected()
        if not vms:
            return []
        facts = host.fact(host_facts)
        host_gpus = [g.bdf for g in facts.gpus]
        numa = host.fact(pci_numa_nodes, tuple(host_gpus)) if host_gpus else {}
        holders = host.fact(gpu_holders)
        claimed: dict[str, int] = {}
        tasks: list[Task] = []
        for vmid, spec in vms.items():
            gpus = resolve_gpus(spec, host_gpus, numa)
            for g in gpus:
                key = g.pci or f"mapping={g.mapping}"
                if key in claimed:
                    raise OperationFailed(f"GPU {key} is given to VM {claimed[key]} and VM {vmid}: a GPU has one owner")
                claimed[key] = vmid
            gpu_guard.vm_gpus_free(vmid, [g.pci for g in gpus if g.pci], holders)
            tasks += vm_tasks(vmid, spec, gpus, v.nvidia_driver)
        return tasks
