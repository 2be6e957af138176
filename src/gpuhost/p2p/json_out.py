"""``gpuhost verify p2p --json``: the figures, identities, links and findings of one outcome.

The shape is ``docs/schema/verify-p2p.schema.json`` (schema ``gpuhost.verify-p2p/2``):
every source (probe, capture, several captures merged) gives the same keys; what a
source does not know is ``null``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuhost.checks import Finding, Level
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures
from gpuhost.p2p.links import describe_path, link_kind

if TYPE_CHECKING:
    from gpuhost.p2p.outcome import Outcome

JSON_SCHEMA = "gpuhost.verify-p2p/2"


def finding_json(f: Finding) -> dict[str, Any]:
    return f.to_json()


def _figures(path: PathFigures | None) -> dict[str, Any] | None:
    if path is None or (path.empty and not path.integrity_checked and not path.integrity_failures):
        return None
    return {
        "uni_gbps": path.uni_gbps,
        "bidi_gbps": path.bidi_gbps,
        "latency_us": path.latency_us,
        "integrity_checked": path.integrity_checked,
        "integrity_failures": list(path.integrity_failures),
    }


def _identity(g: GpuEvidence | None) -> dict[str, Any]:
    return {"name": g.name if g else None, "bus_id": g.bus_id if g else None}


def gpu_json(g: GpuEvidence, findings: list[Finding]) -> dict[str, Any]:
    mine = [f for f in findings if f.subject == g.label]
    return {
        "index": g.index,
        "label": g.label,
        "host": g.host,
        "name": g.name,
        "bus_id": g.bus_id,
        "compute_capability": g.compute_capability,
        "numa_node": g.numa_node,
        "cpu_affinity": g.cpu_affinity,
        "pcie": {
            "gen_max": g.pcie_gen_max,
            "width_max": g.pcie_width_max,
            "gen_load": g.pcie_gen_load,
            "width_load": g.pcie_width_load,
        },
        "bar1_bytes": g.bar1_bytes,
        "virtualization": g.virtualization,
        "nvlink": {"links": g.nvlink_links, "to_switch": g.nvlink_to_switch},
        "host_copies": {
            "h2d_gbps": g.h2d_gbps,
            "d2h_gbps": g.d2h_gbps,
            "d2d_gbps": g.d2d_gbps,
            "d2d_latency_us": g.d2d_latency_us,
        },
        "verdict": max((f.level for f in mine), default=Level.PASS).word if mine else None,
        "findings": [finding_json(f) for f in mine],
    }


def pair_json(ev: Evidence, p: PairEvidence, outcome: Outcome) -> dict[str, Any]:
    pv = (
        next((v for v in outcome.verdict.pairs if v.src == p.src and v.dst == p.dst), None) if outcome.verdict else None
    )
    path = pv.path if pv else (link_kind(p.topology) or "unknown")
    return {
        "src": p.src,
        "dst": p.dst,
        "src_gpu": _identity(ev.gpu(p.src)),
        "dst_gpu": _identity(ev.gpu(p.dst)),
        "link": p.topology,
        "path": path,
        "route": describe_path(p.topology) if p.topology else None,
        "p2p": pv.p2p if pv else None,
        "can_access_peer": p.can_access_peer,
        "nvml_status": dict(p.nvml_status) or None,
        "figures": {"p2p": _figures(p.p2p), "staged": _figures(p.staged)},
        "skipped": p.p2p_skipped,
        "verdict": pv.level.word if pv and pv.findings else None,
        "findings": [finding_json(f) for f in pv.findings] if pv else [],
    }


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    v, ev = outcome.verdict, outcome.evidence
    gpu_findings = v.gpu_findings if v else []
    return {
        "schema": JSON_SCHEMA,
        "target": outcome.target,
        "source": ev.source if ev else None,
        "verdict": outcome.word,
        "exit_code": outcome.exit_code,
        "cannot_run": outcome.cannot_run,
        "facts": outcome.facts,
        "diagnosis": outcome.diagnosis,
        "notes": v.notes if v else (list(ev.notes) if ev else []),
        "partial": list(ev.partial) if ev else [],
        "p2p_copy": ev.p2p_copy if ev else None,
        "machine": [finding_json(f) for f in v.machine_findings] if v else [],
        "gpus": [gpu_json(g, gpu_findings) for g in ev.gpus] if ev else [],
        "pairs": [pair_json(ev, p, outcome) for p in ev.pairs] if ev else [],
        "nics": [{"gpu": gpu, "nic": nic, "link": link} for (gpu, nic), link in sorted(ev.nic_links.items())]
        if ev
        else [],
        "nccl": ev.nccl if ev else None,
        "waived": dict(ev.waived) if ev else {},
        "regressions": [r.to_json() for r in outcome.regressions],
        "report": outcome.raw_report,
    }


def cannot_run_json(exit_code: int, why: str) -> dict[str, Any]:
    """What ``--json`` prints when no outcome could be built (unreadable file, no connection)."""
    return {"schema": JSON_SCHEMA, "verdict": "CANNOT RUN", "exit_code": exit_code, "cannot_run": why}
