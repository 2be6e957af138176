"""VM proofs: each GPU VM of the inventory (``nodes.NAME.vms``), on its node and inside its guest.

On the node: the VM runs, and ``qm showcmd`` shows q35, every GPU as its own vfio-pci device ``hostpciN``
(function ``.0``) on a PCIe root port (``pcie=1``), the GPUDirect clique ``-set`` lines the inventory's
``clique`` asks for, no ``kvm=off``; the VM's GPUs are bound to vfio-pci on the host. Inside the guest
(over SSH at the VM's ``address``, as ``qm-guest://NODE/VMID``): the NVIDIA module is loaded and sees
the GPUs, nvidia-persistenced runs, and the driver reports P2P between the GPUs that share a clique.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuhost.acceptance.proof import Proof, ProofFailed, ProofSkipped, Prover, Subject, Suite, reachable
from gpuhost.checks import vm as checks
from gpuhost.facts.host import HostFacts, host_facts
from gpuhost.facts.vm import GuestDriver, guest_driver, pci_numa_nodes, vm_config, vm_showcmd, vm_status
from gpuhost.p2p.guest import guest_p2p
from gpuhost.pve import vm_gpu
from gpuhost.pve.vm_gpu import GpuRef, KvmCmdline
from gpuhost.roles.vm_gpu import resolve_gpus
from gpuhost.runner.connect import read_fact


@dataclass(frozen=True)
class VmProof:
    node: str
    vmid: int
    subject: str
    status: str | None
    options: dict[str, str]  # the configuration QEMU runs (pending changes left out)
    cmd: KvmCmdline | None
    host: HostFacts
    gpus: tuple[GpuRef, ...]  # the GPUs the inventory gives the VM, with their cliques
    address: str | None

    @property
    def placed(self) -> dict[int, GpuRef]:
        return vm_gpu.gpu_indices(self.options, self.gpus)


def read_vm(s: Subject) -> VmProof:
    from gpuhost.acceptance.connections import node_connection

    node, vmid = s.key
    spec = s.inventory.nodes[node].vms[vmid]

    def read() -> VmProof:
        conn = node_connection(node)
        facts = read_fact(conn, host_facts)
        bdfs = tuple(g.bdf for g in facts.gpus)
        numa = read_fact(conn, pci_numa_nodes, bdfs) if bdfs else {}
        gpus = tuple(g.ref() for g in resolve_gpus(spec, list(bdfs), numa))
        status = read_fact(conn, vm_status, vmid)
        conf = read_fact(conn, vm_config, vmid)
        cmd = read_fact(conn, vm_showcmd, vmid) if conf is not None else None
        options = dict(conf.main.options) if conf is not None else {}
        return VmProof(node, vmid, f"{node}/VM {vmid}", status, options, cmd, facts, gpus, spec.address)

    return reachable(read)


def _cmd(vm: VmProof) -> KvmCmdline:
    if vm.cmd is None:
        raise ProofFailed(f"vm.running {vm.subject}: VM {vm.vmid} does not exist on {vm.node}")
    return vm.cmd


def read_guest(s: Subject) -> Any:
    """The guest's connection (its proofs skip when the inventory gives the VM no address)."""
    from gpuhost.acceptance.connections import guest_connection

    vm = s.read(read_vm)
    if vm.address is None:
        where = f"nodes.{vm.node}.vms.{vm.vmid}.address"
        raise ProofSkipped(f"VM {vm.vmid} has no guest address in the inventory ({where})")
    if vm.status != "running":
        raise ProofFailed(f"vm.running {vm.subject}: VM {vm.vmid} is {vm.status or 'absent'}")
    return reachable(lambda: guest_connection(vm.node, vm.vmid))


def read_driver(s: Subject) -> GuestDriver:
    guest = s.read(read_guest)
    found: GuestDriver = reachable(lambda: read_fact(guest, guest_driver))
    return found


def _running(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.running, vm.status, vm.subject, vm.vmid)


def _q35(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.q35, _cmd(vm), vm.subject)


def _functions(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.functions, _cmd(vm), vm.options, vm.gpus, vm.subject)


def _pcie(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.pcie, _cmd(vm), vm.placed, vm.subject)


def _cliques(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.cliques, _cmd(vm), vm.placed, vm.subject)


def _no_kvm_off(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.no_kvm_off, _cmd(vm), vm.subject)


def _vfio_bound(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.vfio_bound, vm.host, vm.gpus, vm.subject, not_applicable="the VM's GPUs are PVE resource mappings")


def _guest_driver(s: Subject, prove: Prover) -> None:
    vm = s.read(read_vm)
    prove(checks.guest_driver, s.read(read_driver), vm.subject, len(vm.gpus))


def _guest_persistenced(s: Subject, prove: Prover) -> None:
    prove(checks.guest_persistenced, s.read(read_driver), s.read(read_vm).subject)


def _guest_p2p(s: Subject, prove: Prover) -> None:
    from gpuhost.operations.vm_p2p import guest_topo_p2p

    vm, guest = s.read(read_vm), s.read(read_guest)
    cliques = [g.clique for _, g in sorted(vm.placed.items())]  # the guest numbers its GPUs in hostpci order
    if len(cliques) != len(vm.gpus):
        raise ProofFailed(
            f"vm.functions {vm.subject}: the running configuration passes {len(cliques)} of {len(vm.gpus)} GPUs"
        )
    ev = None if all(c is None for c in cliques) else reachable(lambda: read_fact(guest, guest_topo_p2p))
    prove(guest_p2p, ev, cliques, vm.options, vm.subject)


ON_NODE = (read_vm,)
SUITE = Suite(
    "vm",
    "test_vm.py",
    "vms",
    (
        Proof("running", _running, ON_NODE),
        Proof("q35", _q35, ON_NODE),
        Proof("functions", _functions, ON_NODE),
        Proof("pcie", _pcie, ON_NODE),
        Proof("cliques", _cliques, ON_NODE),
        Proof("no_kvm_off", _no_kvm_off, ON_NODE),
        Proof("vfio_bound", _vfio_bound, ON_NODE),
        Proof("guest_driver", _guest_driver, (read_vm, read_driver)),
        Proof("guest_persistenced", _guest_persistenced, (read_vm, read_driver)),
        Proof("guest_p2p", _guest_p2p, (read_vm, read_guest)),
    ),
)
