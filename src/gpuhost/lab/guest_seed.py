"""The GPU VM a lab node can be seeded with: the seeds' starting point, every GPU passed through the
way their KVM VM had it (i440fx, ``hostpciN`` with a bare ``bus:dev`` id, no ``pcie=1``, no clique)."""

from __future__ import annotations

import ipaddress
import uuid as uuidlib
from pathlib import Path

from gpuhost.lab.node.state import NodeState
from gpuhost.lab.spec import NodeSpec


def guest_address(node: NodeSpec) -> str:
    """The loopback address the VM's guest answers on: the node's, last octet + 100."""
    ip = ipaddress.ip_address(node.address)
    last = int(str(ip).rsplit(".", 1)[1])
    if last + 100 > 254:
        raise ValueError(f"{node.name}: no guest address above {node.address} (the last octet must be <= 154)")
    return str(ip + 100)


def vm_config(node: NodeSpec, vmid: int, bdfs: list[str], mac: str) -> str:
    """The VM's config as PVE writes it (keys sorted); the GPUs are named without their function."""
    lines = {
        "boot": "order=scsi0;net0",
        "cores": "32",
        "cpu": "x86-64-v2-AES",
        "memory": "262144",
        "name": f"glm{vmid}",
        "net0": f"virtio={mac},bridge=vmbr0,firewall=1",
        "numa": "0",
        "ostype": "l26",
        "scsi0": f"local-lvm:vm-{vmid}-disk-0,iothread=1,size=512G",
        "scsihw": "virtio-scsi-single",
        "smbios1": f"uuid={uuidlib.uuid5(uuidlib.NAMESPACE_URL, f'{node.name}/{vmid}')}",
        "sockets": "1",
        "vmgenid": str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{node.name}/{vmid}/gen")),
    }
    for i, bdf in enumerate(bdfs):
        lines[f"hostpci{i}"] = bdf.rsplit(".", 1)[0]  # 0000:01:00: every function, one multifunction device
    return "".join(f"{k}: {v}\n" for k, v in sorted(lines.items()))


def seed_gpu_vm(upper: Path, state: NodeState, node: NodeSpec) -> None:
    if not node.gpu_vm:
        return
    gpus = state.extra.get("gpu", {}).get("gpus", [])
    bdfs = [str(g["bdf"]) for g in gpus]
    mac = "BC:24:11:" + ":".join(f"{b:02X}" for b in uuidlib.uuid5(uuidlib.NAMESPACE_URL, node.name).bytes[:3])
    path = upper / f"etc/pve/nodes/{node.name}/qemu-server/{node.gpu_vm}.conf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(vm_config(node, node.gpu_vm, bdfs, mac))


def with_guests(nodes: list[NodeSpec]) -> list[NodeSpec]:
    """The lab's nodes plus one guest per seeded GPU VM (booted only when the VM starts)."""
    from dataclasses import replace

    guests = [
        replace(
            n,
            name=f"{n.name}-vm{n.gpu_vm}",
            address=guest_address(n),
            gpu_vm=0,
            guest_of=n.name,
            vmid=n.gpu_vm,
            numa=1,
        )
        for n in nodes
        if n.gpu_vm and not n.guest_of
    ]
    return [*nodes, *guests]
