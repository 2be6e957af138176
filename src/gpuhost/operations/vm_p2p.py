"""P2P inside a VM, judged from what the guest's NVIDIA driver reports (``nvidia-smi topo -p2p r`` and
``w``, read over SSH) by the P2P judge; when P2P is off, the VM's running configuration names the cause.

This reads the driver's P2P status only: it does not time a copy or check data integrity (that is
``gpuhost verify p2p``'s probe, which needs CUDA in the guest)."""

from __future__ import annotations

from dataclasses import replace
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
from gpuhost.p2p.diagnosis import diagnose
from gpuhost.p2p.judge import judge
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
        if all(c is None for c in cliques):
            return nothing(f"VM {a.vmid}: no GPUDirect clique configured (clique: none), so P2P stays off in the guest")
        ev = host.guest(vm).fact(guest_topo_p2p)
        ev.in_vm = True
        if ev.gpu_count != len(a.gpus):
            raise OperationFailed(f"VM {a.vmid}: the guest's driver sees {ev.gpu_count} GPUs, expected {len(a.gpus)}")
        same = {(i, j) for i in range(len(cliques)) for j in range(len(cliques)) if i != j}
        peers = {(i, j) for i, j in same if cliques[i] is not None and cliques[i] == cliques[j]}
        others = replace(ev, pairs=[p for p in ev.pairs if (p.src, p.dst) not in peers])
        ev = replace(ev, pairs=[p for p in ev.pairs if (p.src, p.dst) in peers])
        verdict = judge(ev, expect_p2p=True)
        bad = [f for f in verdict.findings if f.failed]
        if bad:
            causes = vm_gpu.p2p_blockers(running)
            lines = [f.message for f in bad[:3]] + diagnose(verdict, ev)[:2]
            where = f"; the VM's running configuration: {'; '.join(causes)}" if causes else ""
            text = f"VM {a.vmid}: P2P unavailable in the guest: " + " | ".join(lines) + where
            if host.check:
                raise SkipTask(f"check mode: would verify after the changes; now: {text}")
            raise OperationFailed(text)
        unexpected = [p.label for p in others.pairs if p.nvml_status.get("read") == "OK" and cliques[p.src] is None]
        across = len(others.pairs)
        text = f"VM {a.vmid}: P2P available on all {len(peers)} GPU pairs that share a clique"
        if across:
            text += f"; {across} pairs across cliques go through host memory, as configured"
        if unexpected:
            text += f" (yet the driver allows {', '.join(unexpected[:3])} without a clique)"
        return nothing(text + " (guest driver: nvidia-smi topo -p2p r/w; status only, no copy was timed)")
