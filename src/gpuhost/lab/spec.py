"""What a lab consists of: its nodes and how each one boots."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from gpuhost.errors import LabError, UsageError

BootLoader = Literal["grub", "grub-pbt", "systemd-boot"]
CpuVendor = Literal["amd", "intel"]
#: grub-pbt: ZFS on legacy BIOS, GRUB on ESPs managed by proxmox-boot-tool (pve-docs system-booting.adoc)
BOOTLOADERS: tuple[str, ...] = ("grub", "grub-pbt", "systemd-boot")
CPU_VENDORS: tuple[str, ...] = ("amd", "intel")
PVE_MAJORS: tuple[int, ...] = (8, 9)
DEFAULT_BASE_ADDRESS = "127.0.100.1"
TOKEN_ID = "root@pam!gpuhost"
MAX_NODES = 200


@dataclass(frozen=True)
class NodeSpec:
    name: str
    address: str
    boot: BootLoader = "systemd-boot"
    cpu: CpuVendor = "amd"
    pve: int = 8
    gpus: int = 0  # simulated NVIDIA GPUs (gpuhost.lab.gpu)
    gpu_model: str = ""  # "" = gpuhost.lab.gpu.catalog.DEFAULT_MODEL
    numa: int = 1  # NUMA nodes (sockets) the GPUs are spread over
    gpu_vm: int = 0  # a VM seeded with every GPU as the seeds had it (i440fx, bare hostpci ids); 0: none
    guest_of: str = ""  # a VM's guest: the node whose VM this is ("" for a PVE node)
    vmid: int = 0  # the guest's VM id on guest_of
    cluster: str = ""  # the PVE cluster this node is a member of ("" for a standalone node; gpuhost.lab.cluster)


@dataclass
class LabSpec:
    nodes: list[NodeSpec]
    token_id: str = TOKEN_ID
    seed_dirs: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_file(cls, path: Path) -> LabSpec:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise LabError(f"cannot read lab state {path}: {exc}") from exc
        return cls(
            nodes=[NodeSpec(**n) for n in data["nodes"]],
            token_id=data["token_id"],
            seed_dirs=list(data.get("seed_dirs", [])),
        )

    def pve_nodes(self) -> list[NodeSpec]:
        return [n for n in self.nodes if not n.guest_of]

    def guest(self, host: str, vmid: int) -> NodeSpec | None:
        for node in self.nodes:
            if node.guest_of == host and node.vmid == vmid:
                return node
        return None

    def node(self, name: str) -> NodeSpec:
        for node in self.nodes:
            if node.name == name:
                return node
        raise LabError(f"no lab node named {name!r}")


def require_loopback(address: str) -> None:
    """Lab nodes listen on loopback only: a stray address could reach a real machine."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError as exc:
        raise UsageError(f"not an IP address: {address!r}") from exc
    if ip.version != 4 or not ip.is_loopback:
        raise UsageError(f"lab nodes must use 127.0.0.0/8 addresses, got {address}")


def plan_nodes(
    count: int,
    *,
    base_address: str = DEFAULT_BASE_ADDRESS,
    boot: str = "systemd-boot",
    cpu: str = "amd",
    pve: int = 8,
    name_prefix: str = "pve",
) -> list[NodeSpec]:
    """``count`` nodes named pve1..pveN on consecutive loopback addresses from ``base_address``."""
    if not 1 <= count <= MAX_NODES:
        raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, got {count}")
    if boot not in BOOTLOADERS:
        raise UsageError(f"--boot must be one of {', '.join(BOOTLOADERS)}, got {boot!r}")
    if cpu not in CPU_VENDORS:
        raise UsageError(f"--cpu must be one of {', '.join(CPU_VENDORS)}, got {cpu!r}")
    if pve not in PVE_MAJORS:
        raise UsageError(f"--pve must be one of {', '.join(map(str, PVE_MAJORS))}, got {pve}")
    require_loopback(base_address)
    first = ipaddress.ip_address(base_address)
    nodes = []
    for i in range(count):
        address = str(first + i)
        require_loopback(address)
        nodes.append(
            NodeSpec(
                name=f"{name_prefix}{i + 1}",
                address=address,
                boot=boot,  # type: ignore[arg-type]
                cpu=cpu,  # type: ignore[arg-type]
                pve=pve,
            )
        )
    return nodes
