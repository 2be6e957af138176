"""P2P inside a VM, judged from what the guest's NVIDIA driver reports (``nvidia-smi topo -p2p r`` and
``w``, read over SSH) by the check :func:`gpuhost.p2p.guest.guest_p2p`; when P2P is off, the VM's running
configuration names the cause.

This reads the driver's P2P status only: it does not time a copy or check data integrity (that is
``gpuhost verify p2p``'s probe, which needs CUDA in the guest)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from gpuhost.core.facts import Fact
from gpuhost.core.guest import Guest
from gpuhost.core.operation import Args, Operation, SkipTask
from gpuhost.core.plan import Plan, nothing
from gpuhost.core.result import CommandResult
from gpuhost.errors import FactError, OperationFailed
from gpuhost.facts.vm import vm_config, vm_status
from gpuhost.operations.vm import VmGpu
from gpuhost.p2p.guest import guest_p2p
from gpuhost.p2p.parsers import topo_p2p
from gpuhost.pve import vm_gpu

if TYPE_CHECKING:
    from gpuhost.core.context import HostContext
    from gpuhost.p2p.evidence import Evidence

_TOPO_CMD = 'for c in r w; do echo "== nvidia-smi topo -p2p $c"; nvidia-smi topo -p2p $c || exit $?; done'


def _topo(result: CommandResult) -> Evidence:
    if result.exit_code != 0 or not topo_p2p.looks_like(result.stdout):
        raise FactError(
            f"nvidia-smi topo -p2p failed in the guest (exit {result.exit_code}): "
            f"{(result.stderr or result.stdout).strip()[-300:]}"
        )
    return topo_p2p.parse(result.stdout)


guest_topo_p2p: Fact[Evidence] = Fact("P2P status (nvidia-smi topo -p2p r/w)", lambda: _TOPO_CMD, _topo)


class VmP2PArgs(Args):
    vmid: int = Field(description="the VM's id")
    gpus: list[VmGpu] = Field(description="the GPUs passed through, each with its hostpci slot and clique")


class VmP2P(Operation[VmP2PArgs]):
    """Every GPU pair of the guest reports P2P available (or, with cliques off, unavailable as expected)."""

    kind = "vm_p2p"
    Args = VmP2PArgs

    def plan(self, host: HostContext) -> Plan:
        a = self.args
        vm = Guest.vm(a.vmid)
        if host.restart_pending(vm):
            raise SkipTask(f"not verified: VM {a.vmid} must restart into its new configuration (--allow-restart)")
        status = host.fact(vm_status, a.vmid)
        if status != "running":
            if host.check:
                raise SkipTask(f"check mode: VM {a.vmid} is {status or 'absent'}")
            raise OperationFailed(f"VM {a.vmid} is {status or 'absent'}: cannot check P2P inside it")
        conf = host.fact(vm_config, a.vmid)
        running = dict(conf.main.options) if conf is not None else {}
        placed = vm_gpu.gpu_indices(running, tuple(g.ref() for g in a.gpus))
        if len(placed) != len(a.gpus):
            raise OperationFailed(
                f"VM {a.vmid}: its running configuration passes {len(placed)} of the {len(a.gpus)} GPUs"
            )
        cliques = [g.clique for _, g in sorted(placed.items())]  # the guest numbers GPUs in hostpci order
        ev = None if all(c is None for c in cliques) else host.guest(vm).fact(guest_topo_p2p)
        finding = guest_p2p(ev, cliques, running, f"VM {a.vmid}")
        text = f"VM {a.vmid}: {finding.message}"
        if finding.failed:
            if host.check:
                raise SkipTask(f"check mode: would verify after the changes; now: {text}")
            raise OperationFailed(text)
        return nothing(text)
