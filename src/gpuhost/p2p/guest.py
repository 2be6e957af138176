"""P2P inside a VM guest, judged from what its NVIDIA driver reports (``nvidia-smi topo -p2p r`` and ``w``).

A pure registered check on the guest's :class:`Evidence`, the VM's cliques (in hostpci order) and its running
configuration (which names the cause when P2P is off). ``gpuhost provision vm`` (operation ``vm_p2p``),
``gpuhost verify vm`` and the acceptance suite call it. It reads the driver's status only: no copy is timed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpuhost.checks.finding import Finding, Level, check
from gpuhost.p2p.diagnosis import diagnose
from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.judge import judge
from gpuhost.pve import vm_gpu

NAME = "vm.guest_p2p"


@check(
    NAME,
    group="vm",
    title="The guest's driver reports P2P between the GPUs that share a clique",
    meaning="the guest's NVIDIA driver refuses P2P (chipset not supported): the VM lacks q35, pcie=1, the clique "
    "args, or carries kvm=off",
    fix="gpuhost provision vm --allow-restart",
)
def guest_p2p(ev: Evidence | None, cliques: list[int | None], running: Mapping[str, str], subject: str) -> Finding:
    """``cliques``: each GPU's clique in hostpci order (the guest numbers its GPUs so); ``ev`` is not read
    (may be ``None``) when no GPU has a clique."""
    if all(c is None for c in cliques):
        return Finding(
            Level.PASS, NAME, subject, "no GPUDirect clique configured (clique: none), so P2P stays off in the guest"
        )
    assert ev is not None
    ev = replace(ev, in_vm=True)
    if ev.gpu_count != len(cliques):
        return Finding(
            Level.FAIL,
            NAME,
            subject,
            f"the guest's driver sees {ev.gpu_count} GPUs, expected {len(cliques)}",
            fix="gpuhost provision vm --allow-restart",
        )
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
        return Finding(
            Level.FAIL,
            NAME,
            subject,
            "P2P unavailable in the guest: " + " | ".join(lines) + where,
            cause="; ".join(causes) or None,
            fix="gpuhost provision vm --allow-restart",
        )
    unexpected = [p.label for p in others.pairs if p.nvml_status.get("read") == "OK" and cliques[p.src] is None]
    across = len(others.pairs)
    text = f"P2P available on all {len(peers)} GPU pairs that share a clique"
    if across:
        text += f"; {across} pairs across cliques go through host memory, as configured"
    if unexpected:
        text += f" (yet the driver allows {', '.join(unexpected[:3])} without a clique)"
    return Finding(
        Level.PASS, NAME, subject, text + " (guest driver: nvidia-smi topo -p2p r/w; status only, no copy was timed)"
    )
