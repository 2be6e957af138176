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

import pytest

from gpuhost.acceptance.plugin import reachable
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


@pytest.fixture(scope="module")
def vm(gpuhost_inventory: Any, gpuhost_vm: tuple[str, int]) -> VmProof:
    from gpuhost.acceptance.backend import node_connection

    node, vmid = gpuhost_vm
    spec = gpuhost_inventory.nodes[node].vms[vmid]

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

    return reachable(read)  # type: ignore[no-any-return]


def _cmd(vm: VmProof) -> KvmCmdline:
    if vm.cmd is None:
        pytest.fail(f"vm.running {vm.subject}: VM {vm.vmid} does not exist on {vm.node}", pytrace=False)
    return vm.cmd


@pytest.fixture(scope="module")
def guest(vm: VmProof) -> Any:
    """The guest's connection (the test skips when the inventory gives the VM no address)."""
    from gpuhost.acceptance.backend import guest_connection

    if vm.address is None:
        pytest.skip(f"VM {vm.vmid} has no guest address in the inventory (nodes.{vm.node}.vms.{vm.vmid}.address)")
    if vm.status != "running":
        pytest.fail(f"vm.running {vm.subject}: VM {vm.vmid} is {vm.status or 'absent'}", pytrace=False)
    return reachable(lambda: guest_connection(vm.node, vm.vmid))


@pytest.fixture(scope="module")
def driver(guest: Any) -> GuestDriver:
    return reachable(lambda: read_fact(guest, guest_driver))  # type: ignore[no-any-return]


def test_running(vm: VmProof, prove: Any) -> None:
    prove(checks.running, vm.status, vm.subject, vm.vmid)


def test_q35(vm: VmProof, prove: Any) -> None:
    prove(checks.q35, _cmd(vm), vm.subject)


def test_functions(vm: VmProof, prove: Any) -> None:
    prove(checks.functions, _cmd(vm), vm.options, vm.gpus, vm.subject)


def test_pcie(vm: VmProof, prove: Any) -> None:
    prove(checks.pcie, _cmd(vm), vm.placed, vm.subject)


def test_cliques(vm: VmProof, prove: Any) -> None:
    prove(checks.cliques, _cmd(vm), vm.placed, vm.subject)


def test_no_kvm_off(vm: VmProof, prove: Any) -> None:
    prove(checks.no_kvm_off, _cmd(vm), vm.subject)


def test_vfio_bound(vm: VmProof, prove: Any) -> None:
    prove(checks.vfio_bound, vm.host, vm.gpus, vm.subject, not_applicable="the VM's GPUs are PVE resource mappings")


def test_guest_driver(vm: VmProof, driver: GuestDriver, prove: Any) -> None:
    prove(checks.guest_driver, driver, vm.subject, len(vm.gpus))


def test_guest_persistenced(vm: VmProof, driver: GuestDriver, prove: Any) -> None:
    prove(checks.guest_persistenced, driver, vm.subject)


def test_guest_p2p(vm: VmProof, guest: Any, prove: Any) -> None:
    from gpuhost.operations.vm_p2p import guest_topo_p2p

    cliques = [g.clique for _, g in sorted(vm.placed.items())]  # the guest numbers its GPUs in hostpci order
    if len(cliques) != len(vm.gpus):
        pytest.fail(
            f"vm.functions {vm.subject}: the running configuration passes {len(cliques)} of {len(vm.gpus)} GPUs",
            pytrace=False,
        )
    ev = None if all(c is None for c in cliques) else reachable(lambda: read_fact(guest, guest_topo_p2p))
    prove(guest_p2p, ev, cliques, vm.options, vm.subject)
