"""Verdicts: each GPU, each ordered pair, and the machine, from :class:`Evidence`.

A check that has no data is not judged (and says so in ``notes``); a verdict is the
worst of its checks; the machine's verdict is the worst of all. Every finding keeps
the figure, the limit and a ``cause`` key that :mod:`gpuhost.p2p.diagnosis` turns
into advice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from gpuhost.p2p import thresholds as T
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence, PathFigures

NVML_REASONS = {
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "DR": "disabled by a driver registry key",
    "NS": "not supported",
    "U": "unknown",
}


class Level(IntEnum):
    PASS = 0
    WARN = 1
    FAIL = 2

    @property
    def word(self) -> str:
        return self.name


@dataclass(frozen=True)
class Finding:
    level: Level
    check: str
    subject: str
    message: str
    cause: str | None = None


@dataclass
class PairVerdict:
    src: int
    dst: int
    path: str  # "nvlink", "pcie" or "unknown"
    p2p: str  # "available", "unavailable", "not expected" or "unknown"
    findings: list[Finding] = field(default_factory=list)

    @property
    def level(self) -> Level:
        return max((f.level for f in self.findings), default=Level.PASS)

    @property
    def label(self) -> str:
        return f"GPU{self.src}->GPU{self.dst}"


@dataclass
class Verdict:
    gpu_findings: list[Finding] = field(default_factory=list)
    pairs: list[PairVerdict] = field(default_factory=list)
    machine_findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        out = list(self.machine_findings) + list(self.gpu_findings)
        for p in self.pairs:
            out.extend(p.findings)
        return out

    @property
    def level(self) -> Level:
        return max((f.level for f in self.findings), default=Level.PASS)

    @property
    def exit_code(self) -> int:
        return 1 if self.level == Level.FAIL else 0


def _band(ratio: float, band: T.Band) -> Level:
    if ratio >= band.pass_at:
        return Level.PASS
    return Level.WARN if ratio >= band.warn_at else Level.FAIL


# -- GPUs ----------------------------------------------------------------------------------


def judge_gpu(g: GpuEvidence, multi_gpu_pcie: bool) -> list[Finding]:
    out: list[Finding] = []
    rate = T.pcie_rate(g.pcie_gen_max, g.pcie_width_max)
    for name, value in (("host->GPU", g.h2d_gbps), ("GPU->host", g.d2h_gbps)):
        if value is None or rate is None:
            continue
        ratio = value / rate
        level = _band(ratio, T.HOST_LINK)
        out.append(Finding(level, "host-link", g.label,
                           f"{name} {value:.1f} GB/s = {ratio:.0%} of PCIe Gen{g.pcie_gen_max} "
                           f"x{g.pcie_width_max} ({rate:.1f} GB/s); pass at {T.HOST_LINK.pass_at:.0%}",
                           None if level == Level.PASS else "host-link-slow"))
    out.extend(_link_training(g))
    if g.integrity_failures:
        out.append(Finding(Level.FAIL, "integrity", g.label,
                           "local copy returned wrong data: " + "; ".join(g.integrity_failures[:3]), "integrity"))
    if multi_gpu_pcie and g.bar1_bytes is not None and g.bar1_bytes < T.BAR1_MIN_BYTES:
        out.append(Finding(Level.WARN, "bar1", g.label,
                           f"BAR1 is {g.bar1_bytes >> 20} MiB: too small to map peer memory", "bar1-small"))
    return out


def _link_training(g: GpuEvidence) -> list[Finding]:
    out: list[Finding] = []
    width = g.pcie_width_load if g.pcie_width_load is not None else g.pcie_width_idle
    if width is not None and g.pcie_width_max:
        if width <= g.pcie_width_max // 2:
            out.append(Finding(Level.FAIL, "link-width", g.label,
                               f"PCIe link runs x{width} of x{g.pcie_width_max}", "link-downtrained"))
        elif width < g.pcie_width_max:
            out.append(Finding(Level.WARN, "link-width", g.label,
                               f"PCIe link runs x{width} of x{g.pcie_width_max}", "link-downtrained"))
        else:
            out.append(Finding(Level.PASS, "link-width", g.label, f"PCIe x{width} as the slot allows"))
    if g.pcie_gen_load is not None and g.pcie_gen_max:
        behind = g.pcie_gen_max - g.pcie_gen_load
        if behind >= 2:
            level = Level.FAIL
        elif behind == 1:
            level = Level.WARN
        else:
            level = Level.PASS
        out.append(Finding(level, "link-gen", g.label,
                           f"PCIe Gen{g.pcie_gen_load} under load, Gen{g.pcie_gen_max} possible",
                           None if level == Level.PASS else "link-downtrained"))
    return out


# -- pairs ---------------------------------------------------------------------------------


def _path_kind(ev: Evidence, p: PairEvidence) -> str:
    if p.nvml_status.get("nvlink") == "OK" or (p.topology or "").startswith("NV"):
        return "nvlink"
    uni = p.p2p.uni_gbps if p.p2p else None
    if uni is not None and uni > T.BEYOND_PCIE_GBPS:
        return "nvlink"
    if p.nvml_status or p.topology or ev.gpu(p.src) is not None:
        return "pcie"
    return "unknown"


def _line_rate(ev: Evidence, p: PairEvidence, kind: str,
               link_override: tuple[int, int] | None) -> tuple[float | None, str]:
    a, b = ev.gpu(p.src), ev.gpu(p.dst)
    if kind == "nvlink":
        if a is None or b is None:
            return None, "NVLink"
        links_a = a.nvlink_links if a.nvlink_to_switch else a.nvlink_peers.get(b.bus_id or "", 0)
        links_b = b.nvlink_links if b.nvlink_to_switch else b.nvlink_peers.get(a.bus_id or "", 0)
        links = min(links_a, links_b)
        rate = T.nvlink_rate(a.compute_capability, links)
        return rate, f"{links} NVLink links"
    if link_override is not None:
        gen, width = link_override
        return T.pcie_rate(gen, width), f"PCIe Gen{gen} x{width} (given)"
    if a is None or b is None:
        return None, "PCIe (link unknown)"
    ra = T.pcie_rate(a.pcie_gen_max, a.pcie_width_max)
    rb = T.pcie_rate(b.pcie_gen_max, b.pcie_width_max)
    if ra is None or rb is None:
        return None, "PCIe (link unknown)"
    slow = a if ra <= rb else b
    return min(ra, rb), f"PCIe Gen{slow.pcie_gen_max} x{slow.pcie_width_max}"


def _availability(p: PairEvidence) -> tuple[bool | None, str | None]:
    """Whether P2P is available, and the NVML reason when it is not."""
    rw = [p.nvml_status.get(k) for k in ("read", "write") if p.nvml_status.get(k) is not None]
    reason = next((s for s in rw if s != "OK"), None)
    nvml_ok = (reason is None) if rw else None
    if p.can_access_peer is not None:
        return p.can_access_peer, reason
    return nvml_ok, reason


def judge_pair(ev: Evidence, p: PairEvidence, *, expect_p2p: bool = True,
               link_override: tuple[int, int] | None = None) -> PairVerdict:
    kind = _path_kind(ev, p)
    available, reason = _availability(p)
    state = {True: "available", False: "unavailable", None: "unknown"}[available]
    v = PairVerdict(p.src, p.dst, kind, state)
    f = v.findings
    s = p.label

    if p.can_access_peer is not None and reason is not None and p.can_access_peer:
        f.append(Finding(Level.WARN, "p2p-status", s,
                         f"CUDA allows peer access but NVML reports {reason} ({NVML_REASONS.get(reason, reason)})",
                         "status-disagree"))
    if available is False:
        why = f"NVML: {reason} ({NVML_REASONS.get(reason, reason)})" if reason else "CUDA: cannot access peer"
        if expect_p2p:
            f.append(Finding(Level.FAIL, "p2p-status", s, f"P2P unavailable, {why}",
                             f"nvml-{reason}" if reason else "no-peer-access"))
        else:
            v.p2p = "not expected"
            f.append(Finding(Level.PASS, "p2p-status", s, f"P2P unavailable as expected ({why})"))
            f.extend(_judge_staged(ev, p, kind, link_override))
        _integrity(p, f)
        return v
    if available:
        f.append(Finding(Level.PASS, "p2p-status", s, "P2P available"
                         + (f" (NVML read/write {p.nvml_status.get('read')}/{p.nvml_status.get('write')})"
                            if p.nvml_status else "")))

    _integrity(p, f)
    fig = p.p2p
    if fig is None or fig.empty:
        if p.p2p_skipped:
            f.append(Finding(Level.WARN, "p2p-measured", s, f"peer copies not measured: {p.p2p_skipped}",
                             "not-measured"))
        return v

    staged = p.staged if p.staged is not None and not p.staged.empty else None
    if fig.latency_us is not None:
        lat = fig.latency_us
        if lat > T.P2P_LATENCY_WARN_US:
            f.append(Finding(Level.FAIL, "p2p-latency", s,
                             f"16-byte peer copy takes {lat:.1f} us (limit {T.P2P_LATENCY_WARN_US:.0f}): "
                             "the time of a trip through host memory", "p2p-not-engaged"))
        elif lat > T.P2P_LATENCY_PASS_US:
            f.append(Finding(Level.WARN, "p2p-latency", s,
                             f"16-byte peer copy takes {lat:.1f} us (pass at {T.P2P_LATENCY_PASS_US:.0f})",
                             "p2p-slow-latency"))
        else:
            f.append(Finding(Level.PASS, "p2p-latency", s, f"16-byte peer copy {lat:.2f} us"))
        if staged is not None and staged.latency_us is not None and lat * T.LATENCY_GAIN_MIN > staged.latency_us:
            f.append(Finding(Level.FAIL if lat > T.P2P_LATENCY_PASS_US else Level.WARN, "p2p-vs-staged", s,
                             f"peer copy latency {lat:.1f} us is not well below the staged {staged.latency_us:.1f} us",
                             "p2p-not-engaged"))

    rate, rate_name = _line_rate(ev, p, kind, link_override)
    if fig.uni_gbps is not None:
        if rate is not None:
            # A VM shows a made-up topology (often PHB for every pair), so a pair there might
            # cross sockets without saying so: it gets the cross-socket band.
            near = p.topology in ("PIX", "PXB", "PHB", "NODE") and not ev.in_vm
            band = T.UNI_NVLINK if kind == "nvlink" else (T.UNI_PCIE_NEAR if near else T.UNI_PCIE_FAR)
            ratio = fig.uni_gbps / rate
            level = _band(ratio, band)
            caveat = ""
            if kind != "nvlink" and not near:
                caveat = ", topology hidden by the VM" if ev.in_vm and p.topology else (
                    "" if p.topology else ", topology unknown")
            f.append(Finding(level, "uni-bandwidth", s,
                             f"{fig.uni_gbps:.1f} GB/s = {ratio:.0%} of {rate_name} ({rate:.1f} GB/s); "
                             f"pass at {band.pass_at:.0%}" + caveat,
                             None if level == Level.PASS else "uni-low"))
        if staged is not None and staged.uni_gbps is not None and fig.uni_gbps <= staged.uni_gbps:
            f.append(Finding(Level.WARN, "p2p-vs-staged", s,
                             f"peer copies ({fig.uni_gbps:.1f} GB/s) are no faster than staged ones "
                             f"({staged.uni_gbps:.1f} GB/s)", "p2p-no-gain"))
    if fig.uni_gbps and fig.bidi_gbps is not None:
        ratio = fig.bidi_gbps / fig.uni_gbps
        level = _band(ratio, T.BIDI_OVER_UNI)
        f.append(Finding(level, "bidi-bandwidth", s,
                         f"both ways {fig.bidi_gbps:.1f} GB/s = {ratio:.2f}x one way; pass at "
                         f"{T.BIDI_OVER_UNI.pass_at}x", None if level == Level.PASS else "bidi-low"))
    return v


def _integrity(p: PairEvidence, f: list[Finding]) -> None:
    for name, path in (("peer", p.p2p), ("staged", p.staged)):
        if path is None:
            continue
        if path.integrity_failures:
            f.append(Finding(Level.FAIL, "integrity", p.label,
                             f"{name} copies delivered wrong data: " + "; ".join(path.integrity_failures[:3]),
                             "integrity"))
        elif path.integrity_checked:
            f.append(Finding(Level.PASS, "integrity", p.label,
                             f"{name} copies: {path.integrity_checked} destinations checked, all correct"))


def _judge_staged(ev: Evidence, p: PairEvidence, kind: str, link_override: tuple[int, int] | None) -> list[Finding]:
    staged: PathFigures | None = p.staged if p.staged is not None and not p.staged.empty else None
    if staged is None:
        return []
    out: list[Finding] = []
    rate, rate_name = _line_rate(ev, p, "pcie", link_override)
    if staged.uni_gbps is not None and rate is not None:
        ratio = staged.uni_gbps / rate
        level = Level.PASS if ratio >= T.STAGED_SHARE_OF_LINK else Level.WARN
        out.append(Finding(level, "staged-bandwidth", p.label,
                           f"staged {staged.uni_gbps:.1f} GB/s = {ratio:.0%} of {rate_name}; "
                           f"pass at {T.STAGED_SHARE_OF_LINK:.0%}", None if level == Level.PASS else "staged-slow"))
    if staged.latency_us is not None:
        level = Level.PASS if staged.latency_us <= T.STAGED_LATENCY_MAX_US else Level.WARN
        out.append(Finding(level, "staged-latency", p.label,
                           f"staged 16-byte copy {staged.latency_us:.1f} us; pass at "
                           f"{T.STAGED_LATENCY_MAX_US:.0f}", None if level == Level.PASS else "staged-slow"))
    return out


# -- the machine ---------------------------------------------------------------------------


def judge(ev: Evidence, *, expect_p2p: bool = True, link_override: tuple[int, int] | None = None) -> Verdict:
    verdict = Verdict(notes=list(ev.notes))
    pairs_over_pcie = False
    for p in ev.pairs:
        pv = judge_pair(ev, p, expect_p2p=expect_p2p, link_override=link_override)
        pairs_over_pcie = pairs_over_pcie or pv.path == "pcie"
        verdict.pairs.append(pv)
    for g in ev.gpus:
        verdict.gpu_findings.extend(judge_gpu(g, multi_gpu_pcie=pairs_over_pcie))
    if ev.gpu_count < 2:
        verdict.notes.append("one GPU: no peer-to-peer pairs to judge")
    if ev.nccl:
        verdict.machine_findings.extend(_judge_nccl(ev.nccl))
    if not any(pv.findings for pv in verdict.pairs) and ev.pairs and all(
            p.p2p is None and p.staged is None for p in ev.pairs):
        verdict.notes.append("no copies measured: status only")
    return verdict


def _judge_nccl(nccl: dict[str, object]) -> list[Finding]:
    if "skipped" in nccl:
        return []
    if "error" in nccl:
        return [Finding(Level.WARN, "nccl", "machine", f"NCCL all-reduce did not complete: {nccl['error']}",
                        "nccl-failed")]
    if nccl.get("correct") is False:
        return [Finding(Level.FAIL, "nccl", "machine", "NCCL all-reduce returned a wrong sum", "integrity")]
    return [Finding(Level.PASS, "nccl", "machine",
                    f"NCCL all-reduce over {nccl.get('world_size')} GPUs: bus bandwidth {nccl.get('busbw_gbps')} GB/s,"
                    f" correct sum")]
