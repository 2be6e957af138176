"""What a ``verify`` selects from the inventory: nodes, containers, VMs and serving containers."""

from __future__ import annotations

from dataclasses import dataclass

from gpuhost.errors import UsageError
from gpuhost.inventory.loader import Inventory


@dataclass(frozen=True)
class Selection:
    """Node names, (node, ctid) pairs, (node, vmid) pairs, and the (node, ctid) pairs of the selected containers
    that serve (``serve:``)."""

    nodes: list[str]
    containers: list[tuple[str, int]]
    vms: list[tuple[str, int]]
    servers: list[tuple[str, int]]


#: why a suite has nothing to prove, by the selection's field it proves
NONE_SELECTED = {
    "nodes": "no nodes selected",
    "containers": "no containers in the inventory for the selected nodes (nodes.NAME.containers)",
    "vms": "no VM guests in the inventory for the selected nodes (nodes.NAME.vms)",
    "servers": "no serving containers in the inventory for the selected nodes (nodes.NAME.containers.ID.serve)",
}


def ids(sel: Selection, field: str) -> list[str]:
    """The subjects of one field as test ids: ``NODE``, or ``NODE/ID`` for a guest."""
    items: list[str] | list[tuple[str, int]] = getattr(sel, field)
    return [i if isinstance(i, str) else f"{i[0]}/{i[1]}" for i in items]


def select(inv: Inventory, limit: str | None, ctids: list[int], vmids: list[int]) -> Selection:
    """The selection of ``--limit``, ``--ctid`` and ``--vmid`` (an id the inventory lacks: a usage error)."""
    from gpuhost.inventory.loader import followers

    names = inv.select(limit) if limit else list(inv.nodes)
    wanted_ct = set(ctids)
    cts = [(n, c) for n in names for c in inv.nodes[n].containers if not wanted_ct or c in wanted_ct]
    if wanted_ct and not cts:
        raise UsageError(f"--gpuhost-ctid {', '.join(map(str, sorted(wanted_ct)))}: no such container")
    wanted_vm = set(vmids)
    vms = [(n, v) for n in names for v in inv.nodes[n].vms if not wanted_vm or v in wanted_vm]
    if wanted_vm and not vms:
        raise UsageError(f"--gpuhost-vmid {', '.join(map(str, sorted(wanted_vm)))}: no such VM")
    # a follower of a multi-node replica serves no API: its replica is proven on rank 0
    skip = followers(inv)
    servers = [(n, c) for n, c in cts if inv.nodes[n].containers[c].serve is not None and (n, c) not in skip]
    return Selection(names, cts, vms, servers)
