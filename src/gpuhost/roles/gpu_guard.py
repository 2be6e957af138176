"""Refusals before a role plans anything: a GPU one path would take is held by a guest, or bound the other way.

- ``provision vm`` (``proxmox_host`` with ``gpu_path: vm``) binds GPUs to vfio-pci at boot by vendor:device id;
  a running container given one of them loses it at the next reboot (``nvidia-smi`` fails inside, and the host's
  NVIDIA module is gone): refused, naming the container and the GPU.
- a VM's GPU held by another running VM: qemu-server refuses the second start (``reserve_pci_usage`` in
  PVE/QemuServer/PCI.pm, "PCI device '…' already in use by VMID '…'"), so the restart gpuhost plans would fail
  after the config was changed: refused before, as is a GPU a running container holds.
- ``provision lxc`` (``gpu_path: lxc``) on GPUs bound to vfio-pci, now or by an ``options vfio-pci ids=`` line at
  the next boot: the NVIDIA module cannot drive them, so no container can use them: refused with the cause.

Each refusal is :class:`~gpuhost.errors.GpuConflict` (exit 2): nothing was changed on the host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gpuhost.errors import GpuConflict
from gpuhost.facts.gpu_holders import GpuHolders
from gpuhost.facts.hardware import PciDevice

NOTHING_CHANGED = "nothing was changed on the node"


def _gpu_id(g: PciDevice) -> str:
    return f"{g.vendor}:{g.device}".lower()


def vfio_over_containers(gpus: Sequence[PciDevice], holders: GpuHolders, vfio_ids: Sequence[str]) -> None:
    """Binding ``vfio_ids`` to vfio-pci must not take a GPU a running container holds."""
    ids = {i.lower() for i in vfio_ids}
    bound = [g for g in gpus if _gpu_id(g) in ids]
    for ct in (h for h in holders.holders if h.kind == "CT"):
        # a /dev/nvidiaN whose GPU the module does not name (not loaded): one of the GPUs vfio-pci would take
        taken = [d for d in ct.devices if (d.startswith("/dev/") and bound) or d in {g.bdf for g in bound}]
        if taken:
            raise GpuConflict(
                f"{ct} is running with GPU {', '.join(taken)}: gpu_path vm binds vfio-pci ids={','.join(sorted(ids))} "
                "at boot, which takes the GPU from the container at the next reboot (nvidia-smi then fails inside "
                f"it); {NOTHING_CHANGED}. Fix: stop {ct.kind} {ct.id} and remove its GPU devN entries (pct set "
                f"{ct.id} -delete devN), or keep this node on gpu_path: lxc"
            )


def vm_gpus_free(vmid: int, bdfs: Sequence[str], holders: GpuHolders) -> None:
    """The GPUs of VM ``vmid`` are held by no other running guest."""
    for bdf in bdfs:
        other = holders.holding(bdf, besides=vmid)
        if other:
            g = other[0]
            why = (
                "qemu-server refuses to start a second VM on a GPU another running VM holds ('PCI device … already "
                "in use by VMID …')"
                if g.kind == "VM"
                else "passing it through would take it from the running container"
            )
            raise GpuConflict(
                f"GPU {bdf} of VM {vmid} is held by the running {g}: {why}; {NOTHING_CHANGED}. Fix: give VM {vmid} "
                f"another GPU, or stop {g.kind} {g.id} and take the GPU out of its configuration first"
            )


def containers_can_use(
    gpus: Sequence[PciDevice], vfio_ids: Mapping[str, str], own_vfio_conf: str, holders: Callable[[], GpuHolders]
) -> None:
    """The LXC path: the GPUs are not bound to vfio-pci, now or at the next boot, by gpuhost's own VM path
    (``own_vfio_conf``), nor all of them by any binding (the NVIDIA module could not drive them). A binding of some
    GPUs by the operator's own file is a node that keeps those for VMs on purpose: the others serve containers.
    ``vfio_ids`` are the host facts' modprobe.d claims; ``holders`` is read only to name the VMs in a refusal."""
    now = [g.bdf for g in gpus if g.driver == "vfio-pci"]
    claimed = sorted({vfio_ids[_gpu_id(g)] for g in gpus if _gpu_id(g) in vfio_ids})
    if own_vfio_conf not in claimed and not (gpus and len(now) == len(gpus)):
        return
    held = holders()
    vms = sorted({str(h) for g in gpus for h in held.holding(g.bdf, kind="VM")})
    said = []
    if now:
        said.append(f"GPU {', '.join(now)} {'is' if len(now) == 1 else 'are'} bound to vfio-pci now")
    if claimed:
        said.append(f"'options vfio-pci ids=' in {', '.join(claimed)} binds the GPUs at every boot")
    holding = f"; {', '.join(vms)} {'holds' if len(vms) == 1 else 'hold'} them" if vms else ""
    raise GpuConflict(
        f"{' and '.join(said)}{holding}: a container cannot use a GPU bound to vfio-pci (the NVIDIA module does not "
        f"drive it, so there is no /dev/nvidiaN to pass); {NOTHING_CHANGED}. Fix: this node's GPUs are on the VM "
        f"path (gpuhost provision vm); to give them to containers, stop the VMs using them, remove the vfio-pci "
        "ids line (rm /etc/modprobe.d/gpuhost-vfio.conf when gpuhost wrote it), update-initramfs -u -k all, then "
        "gpuhost provision lxc --allow-reboot"
    )
