"""The verdict in words: what is wrong, where, and what to change.

Findings that share a cause are told once, with the pairs or GPUs they concern;
the advice depends on where the probe ran (VM, container, or the host itself).
"""

from __future__ import annotations

import re
from collections import OrderedDict

from gpuhost.p2p.evidence import Evidence
from gpuhost.p2p.judge import Finding, Level, Verdict

CLIQUE = (
    "in the VM's config give every GPU the same GPUDirect clique "
    "(args: -set device.hostpciN.x-nv-gpudirect-clique=0 for each hostpciN, hostpci entries naming "
    "function .0, no hidden=1/kvm=off), then check 'nvidia-smi topo -p2p r' in the guest reads OK"
)
NVLINK = (
    "NVLink pairs: check every lane is up ('nvidia-smi nvlink -s', and 'nvidia-smi nvlink -e' for "
    "replay/recovery errors); on NVSwitch systems nvidia-fabricmanager must run with the driver's exact "
    "version ('nvidia-smi -q' shows Fabric State Completed); in a VM every GPU and NVSwitch of the "
    "partition must be passed through"
)
HOST_IOMMU = (
    "boot the host with iommu=pt (and check dmesg for IO_PAGE_FAULT), clear ACS redirection on "
    "PCIe switches, and keep Above-4G decoding and Resizable BAR on"
)


#: consumer boards NVIDIA's stock driver gives no PCIe P2P: every GeForce, and the TITAN line ("TITAN RTX",
#: "TITAN V", "NVIDIA TITAN Xp", "GeForce GTX TITAN X"); data-center and RTX/Quadro workstation boards are not here
_CONSUMER = re.compile(r"\bGeForce\b|\bTITAN\b", re.IGNORECASE)


def is_consumer_card(name: str | None) -> bool:
    return bool(name and _CONSUMER.search(name))


def _where(ev: Evidence) -> str:
    if ev.in_vm:
        return "vm"
    if ev.container:
        return "container"
    return "host" if ev.in_vm is False else "unknown"


def _advice(cause: str, ev: Evidence, nvlink: bool = False) -> str:
    where = _where(ev)
    if cause in ("nvlink-low", "nvlink-slow-latency") or (
        nvlink and cause in ("p2p-not-engaged", "uni-low", "bidi-low", "p2p-slow-latency")
    ):
        return NVLINK + "."
    geforce = sorted({g.name for g in ev.gpus if g.name and is_consumer_card(g.name)})
    if cause == "no-peer-access" and geforce:
        return (
            f"{', '.join(geforce)}: consumer cards (GeForce, TITAN) do not do PCIe P2P with NVIDIA's stock "
            "driver; plan for NCCL through host memory, or use GPUs that support it."
        )
    if cause in ("p2p-not-engaged", "nvml-CNS", "no-peer-access"):
        if where == "vm":
            return "This runs in a VM: " + CLIQUE + "."
        if where == "container":
            return (
                "This runs in a container, which shares the host's kernel, so the fix is on the host: "
                + HOST_IOMMU
                + ". Keep every GPU of one engine in one container."
            )
        if where == "host":
            return "On this host: " + HOST_IOMMU + "."
        return "In a VM: " + CLIQUE + "; on the host: " + HOST_IOMMU + "."
    return {
        "nvml-GNS": "This GPU model does not do P2P with the stock driver (GeForce cards); plan for NCCL over "
        "host memory or use GPUs that support it.",
        "nvml-TNS": "The GPUs sit where the platform does not route peer traffic (often across CPU sockets); "
        "pair GPUs under one socket, or accept host-staged copies for this pair.",
        "nvml-DR": "A driver registry key disables P2P: check NVreg_RegistryDwords in /proc/driver/nvidia/params "
        "and modprobe.d, remove it, reload the driver.",
        "nvml-NS": "The driver reports P2P not supported for this pair without a reason; check driver version, "
        "GPU model and, in a VM, the clique setting.",
        "nvml-U": "The driver cannot tell whether P2P works; check the driver installation.",
        "status-disagree": "CUDA and NVML disagree; trust the measured latency and integrity.",
        "integrity": "Do not run NCCL over P2P on this machine (set NCCL_P2P_DISABLE=1) until fixed: wrong data "
        "after a peer copy comes from a translating IOMMU (boot the host with iommu=pt) or, in a VM, "
        "a clique granted to GPUs that cannot really reach each other.",
        "link-downtrained": "A link trained below its capability: reseat the card or riser, check slot lane "
        "sharing and bifurcation in the BIOS, and PCIe power management (pcie_aspm=off).",
        "host-link-slow": "Host copies fall short of the link rate: check the link width under load, NUMA "
        "placement of the process, and IOMMU mode (iommu=pt).",
        "bar1-small": "Enable Above-4G decoding and Resizable BAR in the host's BIOS (a VM cannot show it; read "
        "BAR1 on the host with nvidia-smi -q).",
        "uni-low": "Peer copies fall short of the link rate: check ACS on PCIe switches, link width under load, "
        "and for cross-socket pairs the inter-socket link.",
        "bidi-low": "Both directions together barely beat one: traffic is funnelled (ACS redirecting through the "
        "root complex, or a shared uplink).",
        "p2p-slow-latency": "Peer latency is higher than a direct link gives; check the PCIe path (switch hops, "
        "ACS) or whether a hypervisor sits in the path.",
        "p2p-no-gain": "The peer path gives no bandwidth over host staging; see the latency finding.",
        "staged-slow": "Even copies through host memory are slow: check host links and NUMA placement.",
        "not-measured": "Rerun with peer measurements.",
        "nccl-failed": "Rerun with NCCL_DEBUG=INFO; look for 'via SHM' (no P2P) or hangs after init.",
        "nvlink-low": NVLINK + ".",
        "regression": "A figure fell well below the baseline run: look for what changed since (driver, BIOS, "
        "kernel command line, a card reseated, another job on the GPUs).",
    }.get(cause, "")


def _measured_not_judged(ev: Evidence, judged: set[str]) -> str:
    """Figures that were measured but had nothing to be judged against (no line rate known)."""
    uni = any(p.p2p is not None and p.p2p.uni_gbps is not None for p in ev.pairs)
    if uni and "uni-bandwidth" not in judged:
        return (
            "one-way bandwidth was measured but not judged against a line rate: give --link GENxWIDTH, "
            "or a topology capture for NVLink pairs"
        )
    staged = any(p.staged is not None and not p.staged.empty for p in ev.pairs)
    if staged and not uni:
        return "host-staged copies were measured, peer copies were not"
    return ""


def _on_nvlink(verdict: Verdict, items: list[Finding]) -> bool:
    paths = {p.label: p.path for p in verdict.pairs}
    pairs = [paths.get(f.subject) for f in items]
    return bool(pairs) and all(path == "nvlink" for path in pairs)


def _subjects(findings: list[Finding]) -> str:
    names = list(OrderedDict.fromkeys(f.subject for f in findings))
    if len(names) > 4:
        return ", ".join(names[:4]) + f" and {len(names) - 4} more"
    return ", ".join(names)


def diagnose(verdict: Verdict, ev: Evidence) -> list[str]:
    """One sentence (with advice) per cause of a WARN or FAIL, worst first; a line for a pass."""
    bad = [f for f in verdict.findings if f.level > Level.PASS and f.cause]
    if not bad:
        judged = {f.check for f in verdict.findings}
        covered = [
            name
            for check, name in (
                ("p2p-latency", "16-byte latency"),
                ("uni-bandwidth", "bandwidth against the line rate"),
                ("bidi-bandwidth", "both-way bandwidth"),
                ("integrity", "data integrity"),
                ("host-link", "host links"),
                ("nccl", "NCCL all-reduce"),
            )
            if check in judged
        ]
        if verdict.pairs and all(p.p2p == "available" for p in verdict.pairs):
            lat = [f.message for p in verdict.pairs for f in p.findings if f.check == "p2p-latency"]
            detail = f" ({lat[0]})" if lat else ""
            what = "; passed: " + ", ".join(covered) if covered else ""
            unjudged = _measured_not_judged(ev, judged)
            if unjudged:
                what += ("; " if what else "; ") + unjudged
            elif not covered:
                what = "; nothing was measured (status only)"
            return [f"P2P is available between every pair{detail}{what}."]
        if verdict.pairs and all(p.p2p == "not expected" for p in verdict.pairs):
            return ["P2P is unavailable, as you said to expect; the host-staged path passes."]
        if not verdict.pairs and verdict.machine_findings:
            return [f"All checks pass: {f.message}." for f in verdict.machine_findings if f.level == Level.PASS][:3]
        return ["All checks pass."]
    by_cause: OrderedDict[str, list[Finding]] = OrderedDict()
    for f in sorted(bad, key=lambda f: -f.level):
        by_cause.setdefault(f.cause or "", []).append(f)
    lines = []
    for cause, items in by_cause.items():
        worst = max(f.level for f in items)
        head = items[0].message
        advice = _advice(cause, ev, _on_nvlink(verdict, items))
        lines.append(f"{worst.word}: {_subjects(items)}: {head}. {advice}".strip())
    return lines
