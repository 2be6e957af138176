"""Verdicts: each GPU, each ordered pair, and the machine, from :class:`Evidence`.

A check that has no data is not judged (and says so in ``notes``); a verdict is the
worst of its checks; the machine's verdict is the worst of all. Every finding keeps
the figure, the limit and a ``cause`` key that :mod:`gpuhost.p2p.diagnosis` turns
into advice. The findings are :class:`gpuhost.checks.Finding`; every check is registered
with :func:`gpuhost.checks.check` under the name its findings carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuhost.checks import Finding, Level, check
from gpuhost.p2p import thresholds as T
from gpuhost.p2p.evidence import Evidence, GpuEvidence, PairEvidence
from gpuhost.p2p.links import PCIE_LINKS, link_kind, nvlink_count

__all__ = ["Finding", "Level", "PairVerdict", "Verdict", "judge", "judge_gpu", "judge_pair"]
GROUP = "p2p"

NVML_REASONS = {
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "DR": "disabled by a driver registry key",
    "NS": "not supported",
    "U": "unknown",
}


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


@check(
    "host-link",
    title="Host-GPU copy bandwidth",
    group=GROUP,
    meaning="pinned host<->GPU copies fall short of the PCIe line rate",
    fix="check the link width under load, NUMA placement of the process and the IOMMU mode (iommu=pt)",
)
def check_host_link(g: GpuEvidence) -> list[Finding]:
    out: list[Finding] = []
    rate = T.pcie_rate(g.pcie_gen_max, g.pcie_width_max)
    for name, value in (("host->GPU", g.h2d_gbps), ("GPU->host", g.d2h_gbps)):
        if value is None or rate is None:
            continue
        ratio = value / rate
        level = _band(ratio, T.HOST_LINK)
        out.append(
            Finding(
                level,
                "host-link",
                g.label,
                f"{name} {value:.1f} GB/s = {ratio:.0%} of PCIe Gen{g.pcie_gen_max} "
                f"x{g.pcie_width_max} ({rate:.1f} GB/s); pass at {T.HOST_LINK.pass_at:.0%}",
                None if level == Level.PASS else "host-link-slow",
            )
        )
    return out


@check(
    "link-width",
    title="PCIe link width",
    group=GROUP,
    meaning="the GPU's PCIe link trained narrower than the slot",
    fix="reseat the card or riser, check lane sharing and bifurcation in the BIOS",
)
def check_link_width(g: GpuEvidence) -> list[Finding]:
    width = g.pcie_width_load if g.pcie_width_load is not None else g.pcie_width_idle
    if width is None or not g.pcie_width_max:
        return []
    if width <= g.pcie_width_max // 2:
        return [
            Finding(
                Level.FAIL, "link-width", g.label, f"PCIe link runs x{width} of x{g.pcie_width_max}", "link-downtrained"
            )
        ]
    if width < g.pcie_width_max:
        return [
            Finding(
                Level.WARN, "link-width", g.label, f"PCIe link runs x{width} of x{g.pcie_width_max}", "link-downtrained"
            )
        ]
    return [Finding(Level.PASS, "link-width", g.label, f"PCIe x{width} as the slot allows")]


@check(
    "link-gen",
    title="PCIe link generation under load",
    group=GROUP,
    meaning="the GPU's PCIe link runs below its generation while copying",
    fix="check risers, BIOS PCIe speed settings and PCIe power management (pcie_aspm=off)",
)
def check_link_gen(g: GpuEvidence) -> list[Finding]:
    if g.pcie_gen_load is None or not g.pcie_gen_max:
        return []
    behind = g.pcie_gen_max - g.pcie_gen_load
    level = Level.FAIL if behind >= 2 else Level.WARN if behind == 1 else Level.PASS
    return [
        Finding(
            level,
            "link-gen",
            g.label,
            f"PCIe Gen{g.pcie_gen_load} under load, Gen{g.pcie_gen_max} possible",
            None if level == Level.PASS else "link-downtrained",
        )
    ]


@check(
    "bar1",
    title="BAR1 size",
    group=GROUP,
    meaning="BAR1 is too small to map peer memory",
    fix="enable Above-4G decoding and Resizable BAR in the host's BIOS",
)
def check_bar1(g: GpuEvidence, multi_gpu_pcie: bool) -> list[Finding]:
    if multi_gpu_pcie and g.bar1_bytes is not None and g.bar1_bytes < T.BAR1_MIN_BYTES:
        return [
            Finding(
                Level.WARN,
                "bar1",
                g.label,
                f"BAR1 is {g.bar1_bytes >> 20} MiB: too small to map peer memory",
                "bar1-small",
            )
        ]
    return []


def judge_gpu(g: GpuEvidence, multi_gpu_pcie: bool) -> list[Finding]:
    out = check_host_link(g) + check_link_width(g) + check_link_gen(g)
    if g.integrity_failures:
        out.append(
            Finding(
                Level.FAIL,
                "integrity",
                g.label,
                "local copy returned wrong data: " + "; ".join(g.integrity_failures[:3]),
                "integrity",
            )
        )
    return out + check_bar1(g, multi_gpu_pcie)


# -- pairs ---------------------------------------------------------------------------------


def _path_kind(ev: Evidence, p: PairEvidence) -> str:
    if p.nvml_status.get("nvlink") == "OK" or link_kind(p.topology) == "nvlink":
        return "nvlink"
    if p.topology in PCIE_LINKS:
        return "pcie"  # the topology says so: no guessing from rates
    uni = p.p2p.uni_gbps if p.p2p else None
    if uni is not None and uni > T.BEYOND_PCIE_GBPS:
        return "nvlink"
    if p.nvml_status or p.topology or ev.gpu(p.src) is not None:
        return "pcie"
    return "unknown"


def _nvlink_links(ev: Evidence, p: PairEvidence) -> int:
    a, b = ev.gpu(p.src), ev.gpu(p.dst)
    if a is not None and b is not None:
        links_a = (a.nvlink_links or 0) if a.nvlink_to_switch else a.nvlink_peers.get(b.bus_id or "", 0)
        links_b = (b.nvlink_links or 0) if b.nvlink_to_switch else b.nvlink_peers.get(a.bus_id or "", 0)
        if min(links_a, links_b):
            return min(links_a, links_b)
    return nvlink_count(p.topology)


def _line_rate(
    ev: Evidence, p: PairEvidence, kind: str, link_override: tuple[int, int] | None
) -> tuple[float | None, str]:
    a, b = ev.gpu(p.src), ev.gpu(p.dst)
    if kind == "nvlink":
        links = _nvlink_links(ev, p)
        g = a or b
        cc = (g.compute_capability or T.compute_capability_from_name(g.name)) if g else None
        return T.nvlink_rate(cc, links), f"{links} NVLink links"
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


@check(
    "p2p-status",
    title="Peer access",
    group=GROUP,
    meaning="CUDA or the driver refuses peer access for a pair",
    fix="see the NVML reason: GPU model, platform topology, VM clique or a driver registry key",
)
def check_status(p: PairEvidence, available: bool | None, reason: str | None, expect_p2p: bool) -> list[Finding]:
    out: list[Finding] = []
    s = p.label
    if p.can_access_peer is not None and reason is not None and p.can_access_peer:
        out.append(
            Finding(
                Level.WARN,
                "p2p-status",
                s,
                f"CUDA allows peer access but NVML reports {reason} ({NVML_REASONS.get(reason, reason)})",
                "status-disagree",
            )
        )
    if available is False:
        why = f"NVML: {reason} ({NVML_REASONS.get(reason, reason)})" if reason else "CUDA: cannot access peer"
        if expect_p2p:
            out.append(
                Finding(
                    Level.FAIL,
                    "p2p-status",
                    s,
                    f"P2P unavailable, {why}",
                    f"nvml-{reason}" if reason else "no-peer-access",
                )
            )
        else:
            out.append(Finding(Level.PASS, "p2p-status", s, f"P2P unavailable as expected ({why})"))
    elif available:
        out.append(
            Finding(
                Level.PASS,
                "p2p-status",
                s,
                "P2P available"
                + (
                    f" (NVML read/write {p.nvml_status.get('read')}/{p.nvml_status.get('write')})"
                    if p.nvml_status
                    else ""
                ),
            )
        )
    return out


@check(
    "p2p-measured",
    title="Peer copies measured",
    group=GROUP,
    meaning="the peer path was not measured",
    fix="rerun with peer measurements",
)
def check_measured(p: PairEvidence) -> list[Finding]:
    if p.p2p_skipped and (p.p2p is None or p.p2p.empty):
        return [
            Finding(Level.WARN, "p2p-measured", p.label, f"peer copies not measured: {p.p2p_skipped}", "not-measured")
        ]
    return []


@check(
    "p2p-latency",
    title="16-byte peer copy latency",
    group=GROUP,
    meaning="a small peer copy takes as long as a trip through host memory, or longer than its link gives",
    fix="PCIe: check switch hops, ACS, the hypervisor; NVLink: lanes, NVSwitch and the fabric manager",
)
def check_latency(p: PairEvidence, kind: str) -> list[Finding]:
    lat = p.p2p.latency_us if p.p2p else None
    if lat is None:
        return []
    line = T.latency_line(kind)
    if lat > line.warn_us:
        return [
            Finding(
                Level.FAIL,
                "p2p-latency",
                p.label,
                f"16-byte peer copy takes {lat:.1f} us (limit {line.warn_us:.0f}): "
                "the time of a trip through host memory",
                "p2p-not-engaged",
            )
        ]
    if lat > line.pass_us:
        return [
            Finding(
                Level.WARN,
                "p2p-latency",
                p.label,
                f"16-byte peer copy takes {lat:.1f} us (pass at {line.pass_us:.0f} over {kind})",
                "nvlink-slow-latency" if kind == "nvlink" else "p2p-slow-latency",
            )
        ]
    return [Finding(Level.PASS, "p2p-latency", p.label, f"16-byte peer copy {lat:.2f} us")]


@check(
    "p2p-vs-staged",
    title="Peer path against host staging",
    group=GROUP,
    meaning="peer copies are no faster than copies staged through host memory",
    fix="the peer path is not engaged: see the latency finding",
)
def check_vs_staged(p: PairEvidence, kind: str) -> list[Finding]:
    fig, staged = p.p2p, p.staged
    if fig is None or staged is None or staged.empty:
        return []
    out: list[Finding] = []
    line = T.latency_line(kind)
    lat = fig.latency_us
    if lat is not None and staged.latency_us is not None and lat * T.LATENCY_GAIN_MIN > staged.latency_us:
        out.append(
            Finding(
                Level.FAIL if lat > line.pass_us else Level.WARN,
                "p2p-vs-staged",
                p.label,
                f"peer copy latency {lat:.1f} us is not well below the staged {staged.latency_us:.1f} us",
                "p2p-not-engaged",
            )
        )
    if fig.uni_gbps is not None and staged.uni_gbps is not None and fig.uni_gbps <= staged.uni_gbps:
        out.append(
            Finding(
                Level.WARN,
                "p2p-vs-staged",
                p.label,
                f"peer copies ({fig.uni_gbps:.1f} GB/s) are no faster than staged ones ({staged.uni_gbps:.1f} GB/s)",
                "p2p-no-gain",
            )
        )
    return out


@check(
    "uni-bandwidth",
    title="One-way peer bandwidth",
    group=GROUP,
    meaning="one-way peer copies fall short of the link's line rate",
    fix="PCIe: ACS on switches, link width, the inter-socket link; NVLink: inactive lanes, NVSwitch, fabric manager",
)
def check_uni(ev: Evidence, p: PairEvidence, kind: str, link_override: tuple[int, int] | None) -> list[Finding]:
    fig = p.p2p
    if fig is None or fig.uni_gbps is None:
        return []
    rate, rate_name = _line_rate(ev, p, kind, link_override)
    if rate is None:
        return []
    # A VM shows a made-up topology (often PHB for every pair), so a pair there might
    # cross sockets without saying so: it gets the cross-socket band.
    near = p.topology in ("PIX", "PXB", "PHB", "NODE") and not ev.in_vm
    band = T.UNI_NVLINK if kind == "nvlink" else (T.UNI_PCIE_NEAR if near else T.UNI_PCIE_FAR)
    ratio = fig.uni_gbps / rate
    level = _band(ratio, band)
    caveat = ""
    if kind == "nvlink" and link_kind(p.topology) != "nvlink" and p.nvml_status.get("nvlink") != "OK":
        caveat = ", NVLink inferred from the rate"
    elif kind != "nvlink" and not near:
        caveat = (
            ", topology hidden by the VM" if ev.in_vm and p.topology else ("" if p.topology else ", topology unknown")
        )
    cause = None if level == Level.PASS else ("nvlink-low" if kind == "nvlink" else "uni-low")
    return [
        Finding(
            level,
            "uni-bandwidth",
            p.label,
            f"{fig.uni_gbps:.1f} GB/s = {ratio:.0%} of {rate_name} ({rate:.1f} GB/s); "
            f"pass at {band.pass_at:.0%}" + caveat,
            cause,
        )
    ]


@check(
    "bidi-bandwidth",
    title="Both-way peer bandwidth",
    group=GROUP,
    meaning="copies both ways at once barely beat one way",
    fix="traffic is funnelled: ACS redirection, a shared uplink, or NVLink lanes down",
)
def check_bidi(p: PairEvidence, kind: str) -> list[Finding]:
    fig = p.p2p
    if fig is None or not fig.uni_gbps or fig.bidi_gbps is None:
        return []
    ratio = fig.bidi_gbps / fig.uni_gbps
    level = _band(ratio, T.BIDI_OVER_UNI)
    cause = None if level == Level.PASS else ("nvlink-low" if kind == "nvlink" else "bidi-low")
    return [
        Finding(
            level,
            "bidi-bandwidth",
            p.label,
            f"both ways {fig.bidi_gbps:.1f} GB/s = {ratio:.2f}x one way; pass at {T.BIDI_OVER_UNI.pass_at}x",
            cause,
        )
    ]


@check(
    "integrity",
    title="Data integrity",
    group=GROUP,
    meaning="a copy delivered wrong data",
    fix="set NCCL_P2P_DISABLE=1 until fixed: boot the host with iommu=pt; in a VM, check the GPUDirect clique",
)
def check_integrity(p: PairEvidence) -> list[Finding]:
    out: list[Finding] = []
    for name, path in (("peer", p.p2p), ("staged", p.staged)):
        if path is None:
            continue
        if path.integrity_failures:
            out.append(
                Finding(
                    Level.FAIL,
                    "integrity",
                    p.label,
                    f"{name} copies delivered wrong data: " + "; ".join(path.integrity_failures[:3]),
                    "integrity",
                )
            )
        elif path.integrity_checked:
            out.append(
                Finding(
                    Level.PASS,
                    "integrity",
                    p.label,
                    f"{name} copies: {path.integrity_checked} destinations checked, all correct",
                )
            )
    return out


@check(
    "staged-bandwidth",
    title="Host-staged copy bandwidth",
    group=GROUP,
    meaning="copies through host memory are slow (judged when P2P is not expected)",
    fix="check host links and NUMA placement",
)
def check_staged_bandwidth(ev: Evidence, p: PairEvidence, link_override: tuple[int, int] | None) -> list[Finding]:
    staged = p.staged
    if staged is None or staged.uni_gbps is None:
        return []
    rate, rate_name = _line_rate(ev, p, "pcie", link_override)
    if rate is None:
        return []
    ratio = staged.uni_gbps / rate
    level = Level.PASS if ratio >= T.STAGED_SHARE_OF_LINK else Level.WARN
    return [
        Finding(
            level,
            "staged-bandwidth",
            p.label,
            f"staged {staged.uni_gbps:.1f} GB/s = {ratio:.0%} of {rate_name}; pass at {T.STAGED_SHARE_OF_LINK:.0%}",
            None if level == Level.PASS else "staged-slow",
        )
    ]


@check(
    "staged-latency",
    title="Host-staged copy latency",
    group=GROUP,
    meaning="a small copy through host memory takes too long (judged when P2P is not expected)",
    fix="check host links and NUMA placement",
)
def check_staged_latency(p: PairEvidence) -> list[Finding]:
    staged = p.staged
    if staged is None or staged.latency_us is None:
        return []
    level = Level.PASS if staged.latency_us <= T.STAGED_LATENCY_MAX_US else Level.WARN
    return [
        Finding(
            level,
            "staged-latency",
            p.label,
            f"staged 16-byte copy {staged.latency_us:.1f} us; pass at {T.STAGED_LATENCY_MAX_US:.0f}",
            None if level == Level.PASS else "staged-slow",
        )
    ]


def judge_pair(
    ev: Evidence, p: PairEvidence, *, expect_p2p: bool = True, link_override: tuple[int, int] | None = None
) -> PairVerdict:
    kind = _path_kind(ev, p)
    available, reason = _availability(p)
    state = {True: "available", False: "unavailable", None: "unknown"}[available]
    v = PairVerdict(p.src, p.dst, kind, state)
    v.findings.extend(check_status(p, available, reason, expect_p2p))
    if available is False:
        if not expect_p2p:
            v.p2p = "not expected"
            v.findings.extend(check_staged_bandwidth(ev, p, link_override) + check_staged_latency(p))
        v.findings.extend(check_integrity(p))
        return v
    v.findings.extend(check_integrity(p))
    if p.p2p is None or p.p2p.empty:
        v.findings.extend(check_measured(p))
        return v
    v.findings.extend(
        check_latency(p, kind) + check_vs_staged(p, kind) + check_uni(ev, p, kind, link_override) + check_bidi(p, kind)
    )
    return v


# -- the machine ---------------------------------------------------------------------------


@check(
    "p2p-waived",
    title="Peer tests the tool skipped",
    group=GROUP,
    meaning="nvbandwidth waived a device-to-device test: the driver refused to map peer memory",
    fix="P2P is unavailable between these GPUs: see nvidia-smi topo -p2p r for the reason",
)
def check_waived(ev: Evidence, expect_p2p: bool) -> list[Finding]:
    out: list[Finding] = []
    for test, why in ev.waived.items():
        if expect_p2p:
            out.append(
                Finding(Level.FAIL, "p2p-waived", "machine", f"{ev.source} waived {test}: {why}", "no-peer-access")
            )
        else:
            out.append(Finding(Level.PASS, "p2p-waived", "machine", f"{ev.source} waived {test} as expected ({why})"))
    return out


def check_machine_integrity(ev: Evidence) -> list[Finding]:
    """Data errors a tool reported without naming the pair (reported under the ``integrity`` check)."""
    if not ev.integrity_failures:
        return []
    return [
        Finding(
            Level.FAIL,
            "integrity",
            "machine",
            f"{ev.source} found wrong data after a copy: " + "; ".join(ev.integrity_failures[:3]),
            "integrity",
        )
    ]


@check(
    "nccl",
    title="NCCL all-reduce",
    group=GROUP,
    meaning="NCCL's all-reduce failed or returned a wrong result",
    fix="rerun with NCCL_DEBUG=INFO; look for 'via SHM' (no P2P) or hangs after init",
)
def check_nccl(nccl: dict[str, object]) -> list[Finding]:
    if "skipped" in nccl:
        return []
    if "error" in nccl:
        return [
            Finding(Level.WARN, "nccl", "machine", f"NCCL all-reduce did not complete: {nccl['error']}", "nccl-failed")
        ]
    if nccl.get("correct") is False:
        wrong = nccl.get("wrong")
        detail = f" ({wrong} wrong values)" if wrong else ""
        return [Finding(Level.FAIL, "nccl", "machine", f"NCCL all-reduce returned a wrong sum{detail}", "integrity")]
    busbw = nccl.get("busbw_gbps")
    bw = f": bus bandwidth {busbw} GB/s" if busbw is not None else ""
    world = nccl.get("world_size")
    over = f" over {world} GPUs" if world else ""
    test = nccl.get("test")
    what = (
        "NCCL all-reduce"
        if test == "all_reduce_perf" or (test in (None, "nccl-tests") and nccl.get("reduces", True))
        else f"nccl-tests {test if test not in (None, 'nccl-tests') else '(a collective without reduction)'}"
    )
    if nccl.get("separate_processes"):
        return [
            Finding(
                Level.WARN,
                "nccl",
                "machine",
                f"nccl-tests ran {nccl['separate_processes']} separate processes (each rank 0){bw}: nothing was "
                "measured between them; rebuild nccl-tests with MPI=1",
                "nccl-no-mpi",
            )
        ]
    if nccl.get("small_only"):
        return [
            Finding(
                Level.WARN,
                "nccl",
                "machine",
                f"nothing to judge: the largest size is {nccl.get('largest_bytes')} B, which measures latency, not "
                f"bandwidth ({busbw} GB/s); the sums were correct. Run sizes up to 1 GiB (-e 1G)",
                "nccl-small-sizes",
            )
        ]
    if "max_busbw_gbps" in nccl and not nccl["max_busbw_gbps"] and not nccl.get("inplace_max_busbw_gbps"):
        return [
            Finding(
                Level.WARN,
                "nccl",
                "machine",
                f"nothing to judge: {what} moved nothing between GPUs (bus bandwidth 0 at every size: one GPU, "
                "or one rank per process); the results were correct",
                "nccl-small-sizes",
            )
        ]
    return [
        Finding(
            Level.PASS,
            "nccl",
            "machine",
            f"{what}{over}{bw}, correct {'sum' if what == 'NCCL all-reduce' else 'results'}",
        )
    ]


@check(
    "host-copies",
    title="Host copies measured, nothing to judge",
    group=GROUP,
    meaning="the capture times only host<->GPU (or SM) copies: without the PCIe link of each GPU or a "
    "device-to-device test there is no rate to judge them against; the figures are kept",
    fix="add a device-to-device capture (--from-file again), or run gpuhost verify p2p on the machine (it reads "
    "each GPU's PCIe link)",
)
def check_host_copies_only(ev: Evidence) -> list[Finding]:
    """A WARN carrying the host-copy figures when they are all the capture measured (no vacuous PASS, no exit 2)."""
    shown = [g for g in ev.gpus if g.h2d_gbps is not None or g.d2h_gbps is not None or g.d2d_gbps is not None]
    if not shown:
        return []

    def fig(g: GpuEvidence) -> str:
        parts = [f"{k} {v:.2f}" for k, v in (("H2D", g.h2d_gbps), ("D2H", g.d2h_gbps), ("D2D", g.d2d_gbps)) if v]
        return f"{g.label} " + " / ".join(parts)

    listed = ", ".join(fig(g) for g in shown[:4]) + ("…" if len(shown) > 4 else "")
    return [
        Finding(
            Level.WARN,
            "host-copies",
            "machine",
            f"only host copies were measured ({listed} GB/s): nothing to judge without each GPU's PCIe link or a "
            "device-to-device test",
            "host-copies-only",
        )
    ]


def judge(ev: Evidence, *, expect_p2p: bool = True, link_override: tuple[int, int] | None = None) -> Verdict:
    verdict = Verdict(notes=list(ev.notes))
    verdict.notes.extend(f"partial capture: {why}" for why in ev.partial)
    pairs_over_pcie = False
    for p in ev.pairs:
        pv = judge_pair(ev, p, expect_p2p=expect_p2p, link_override=link_override)
        pairs_over_pcie = pairs_over_pcie or pv.path == "pcie"
        verdict.pairs.append(pv)
    for g in ev.gpus:
        verdict.gpu_findings.extend(judge_gpu(g, multi_gpu_pcie=pairs_over_pcie))
    if ev.gpu_count < 2:
        verdict.notes.append("one GPU: no peer-to-peer pairs to judge")
    verdict.machine_findings.extend(check_waived(ev, expect_p2p) + check_machine_integrity(ev))
    if ev.nccl:
        verdict.machine_findings.extend(check_nccl(ev.nccl))
    if not verdict.findings and not ev.pairs and not ev.waived and not ev.integrity_failures:
        verdict.machine_findings.extend(check_host_copies_only(ev))
    if (
        not any(pv.findings for pv in verdict.pairs)
        and ev.pairs
        and all(p.p2p is None and p.staged is None for p in ev.pairs)
    ):
        verdict.notes.append("no copies measured: status only")
    return verdict


def _judge_nccl(nccl: dict[str, object]) -> list[Finding]:
    return check_nccl(nccl)
