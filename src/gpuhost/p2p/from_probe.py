"""The probe's report as :class:`Evidence`."""

from __future__ import annotations

from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures
from gpuhost.p2p.report import Figure, GpuReport, PathCopies, ProbeReport


def _v(fig: Figure | None) -> float | None:
    return fig.value if fig is not None else None


def _path(copies: PathCopies | None) -> PathFigures | None:
    if copies is None:
        return None
    return PathFigures(
        uni_gbps=_v(copies.uni),
        bidi_gbps=_v(copies.bidi),
        latency_us=_v(copies.latency),
        integrity_checked=copies.integrity.checked,
        integrity_failures=list(copies.integrity.failures),
    )


def _gpu(g: GpuReport) -> GpuEvidence:
    local = g.local
    link = g.pcie
    remote = {bus: n for bus, n in g.nvlink.remote_bus_ids.items() if not bus.upper().startswith("FFFFFFFF")}
    return GpuEvidence(
        index=g.index,
        name=g.name,
        bus_id=g.bus_id,
        compute_capability=g.compute_capability,
        pcie_gen_max=link.gen_max,
        pcie_width_max=link.width_max,
        pcie_gen_load=link.gen_under_load,
        pcie_width_load=link.width_under_load,
        pcie_width_idle=link.width_current_idle,
        bar1_bytes=g.bar1_total_bytes,
        memory_bytes=g.memory_total_bytes,
        virtualization=g.virtualization_mode,
        nvlink_links=g.nvlink.active_links,
        nvlink_to_switch=g.nvlink.remote_types.get("switch", 0) > 0,
        nvlink_peers=remote,
        h2d_gbps=_v(local.h2d) if local else None,
        d2h_gbps=_v(local.d2h) if local else None,
        d2d_gbps=_v(local.d2d) if local else None,
        d2d_latency_us=_v(local.d2d_latency) if local else None,
        integrity_failures=list(local.integrity.failures) if local else [],
        cpu_affinity=g.cpu_affinity,
        numa_node=str(g.numa_node) if g.numa_node is not None else None,
    )


def link_label(a: GpuEvidence | None, b: GpuEvidence | None, nvml_topology: str | None) -> str | None:
    """The pair's link as ``nvidia-smi topo -m`` names it, from NVML: ``NV#`` when NVLink joins them
    (directly or through NVSwitch), else NVML's common-ancestor level (PIX, PXB, PHB, NODE, SYS)."""
    if a is not None and b is not None:
        if a.nvlink_to_switch and b.nvlink_to_switch:
            links = min(a.nvlink_links or 0, b.nvlink_links or 0)
        else:
            links = min(a.nvlink_peers.get(b.bus_id or "", 0), b.nvlink_peers.get(a.bus_id or "", 0))
        if links > 0:
            return f"NV{links}"
    return nvml_topology


def evidence_from_report(report: ProbeReport) -> Evidence:
    gpus = [_gpu(g) for g in report.gpus]
    in_vm: bool | None = None
    modes = {g.virtualization for g in gpus if g.virtualization}
    if modes:
        in_vm = bool(modes & {"passthrough", "vgpu"})
    elif report.host.cpu_hypervisor_flag is not None:
        in_vm = report.host.cpu_hypervisor_flag
    pairs = []
    by_index = {g.index: g for g in gpus}
    for p in report.pairs:
        pairs.append(
            PairEvidence(
                src=p.src,
                dst=p.dst,
                nvml_status=dict(p.nvml.status) if p.nvml else {},
                topology=link_label(by_index.get(p.src), by_index.get(p.dst), p.nvml.topology if p.nvml else None),
                can_access_peer=p.cuda.can_access_peer if p.cuda else None,
                p2p=_path(p.p2p),
                staged=_path(p.staged),
                p2p_skipped=p.p2p_skipped,
            )
        )
    return Evidence(
        source="probe",
        gpus=gpus,
        pairs=pairs,
        in_vm=in_vm,
        container=report.host.container,
        kernel_cmdline=report.host.cmdline,
        nccl=report.nccl,
    )
