"""Several captures of one machine judged together (``--from-file topo.txt --from-file bw.txt``).

A topology capture (``nvidia-smi topo -m``, or the probe's NVML link matrix) lends each
pair its link type and each GPU its NUMA placement; status captures (``topo -p2p``) lend
the driver's verdict; measurements keep their figures. Later files fill only what earlier
ones left empty, except that a measured figure always wins over none.
"""

from __future__ import annotations

from dataclasses import replace

from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence

_GPU_FIELDS = (
    "name",
    "bus_id",
    "compute_capability",
    "pcie_gen_max",
    "pcie_width_max",
    "pcie_gen_load",
    "pcie_width_load",
    "pcie_width_idle",
    "bar1_bytes",
    "memory_bytes",
    "virtualization",
    "h2d_gbps",
    "d2h_gbps",
    "d2d_gbps",
    "d2d_latency_us",
    "cpu_affinity",
    "numa_node",
)
_PAIR_FIELDS = ("topology", "can_access_peer", "p2p", "staged", "p2p_skipped")


def _gpu(into: GpuEvidence, other: GpuEvidence) -> None:
    for name in _GPU_FIELDS:
        if getattr(into, name) is None and getattr(other, name) is not None:
            setattr(into, name, getattr(other, name))
    if not into.nvlink_links and other.nvlink_links:
        into.nvlink_links, into.nvlink_to_switch = other.nvlink_links, other.nvlink_to_switch
        into.nvlink_peers = dict(other.nvlink_peers)
    into.integrity_failures.extend(other.integrity_failures)


def _pair(into: PairEvidence, other: PairEvidence) -> None:
    for name in _PAIR_FIELDS:
        if getattr(into, name) is None and getattr(other, name) is not None:
            setattr(into, name, getattr(other, name))
    for key, value in other.nvml_status.items():
        into.nvml_status.setdefault(key, value)


def merge(first: Evidence, *others: Evidence) -> Evidence:
    """One :class:`Evidence` from captures of one machine, in the order given."""
    out = replace(
        first,
        gpus=[replace(g) for g in first.gpus],
        pairs=[replace(p) for p in first.pairs],
        notes=list(first.notes),
        partial=list(first.partial),
        waived=dict(first.waived),
        integrity_failures=list(first.integrity_failures),
    )
    sources = [first.source]
    for ev in others:
        sources.append(ev.source)
        for g in ev.gpus:
            mine = out.gpu(g.index)
            if mine is None:
                out.gpus.append(replace(g))
            else:
                _gpu(mine, g)
        for p in ev.pairs:
            mine_p = out.pair(p.src, p.dst)
            if mine_p is None:
                out.pairs.append(replace(p))
            else:
                _pair(mine_p, p)
        out.notes.extend(n for n in ev.notes if n not in out.notes)
        out.partial.extend(ev.partial)
        out.waived.update(ev.waived)
        out.integrity_failures.extend(ev.integrity_failures)
        out.nccl = out.nccl or ev.nccl
        out.nics = out.nics or list(ev.nics)
        out.nic_links = out.nic_links or dict(ev.nic_links)
        out.in_vm = out.in_vm if out.in_vm is not None else ev.in_vm
        out.container = out.container or ev.container
        out.kernel_cmdline = out.kernel_cmdline or ev.kernel_cmdline
        if out.p2p_copy == "P2P Writes" and ev.p2p_copy != "P2P Writes":
            out.p2p_copy = ev.p2p_copy
    out.gpus.sort(key=lambda g: g.index)
    out.pairs.sort(key=lambda p: (p.src, p.dst))
    if any(p.topology for p in out.pairs):
        out.notes = [
            n
            for n in out.notes
            if "does not say how the GPUs are linked" not in n and "shows how the GPUs are linked, not whether" not in n
        ]
    out.source = " + ".join(dict.fromkeys(sources))
    return out
